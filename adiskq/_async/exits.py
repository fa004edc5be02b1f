"""Wake-ups when another process exits: its ``pidfd`` in one ``epoll``, read by one daemon thread per process.

A member of a consumer group that dies cannot ring the others. Where Linux offers ``pidfd_open``
(5.3 and later), each member watches the other members' processes on its host: a ``pidfd`` becomes
readable once its process has exited — after the kernel closed the process's files, so its
``flock`` leases are free by then — and the watching member looks at the group at once instead of
at its next ``rebalance_interval``. This is only a hint: the truth is the ``flock`` probe of the
member file, and the interval backs the hint up where there is none (other OSes, other hosts'
members, a pid reused before it was watched, ``ADISKQ_EXIT_WATCH=off``).

One thread per process waits on the ``epoll`` (never on the event loop: a blocking wait would stall
it, and an ``epoll`` cannot join inotify's descriptor in one ``wait_readable``); it starts with the
first watch and lives as a daemon. Waking a ``Waiter`` from another thread is safe (wakeup.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from typing import Final

from .wakeup import Waiter

__all__ = ["ExitWatch", "get_exit_watch"]

logger = logging.getLogger("adiskq")

_CAN_WATCH: Final = hasattr(os, "pidfd_open") and hasattr(select, "epoll")
_ENV_MODE: Final = "ADISKQ_EXIT_WATCH"  # "off": members find dead ones at their interval only


class ExitWatch:
    """Pids watched for their exit, each with the waiters to wake then."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled and _CAN_WATCH
        self._lock = threading.Lock()
        self._by_pid: dict[int, tuple[int, list[Waiter]]] = {}  # pid -> (pidfd, waiters)
        self._by_fd: dict[int, int] = {}  # pidfd -> pid
        self._epoll: select.epoll | None = None
        self._thread: threading.Thread | None = None
        self.closed = False

    @property
    def available(self) -> bool:
        """True where process exits can be watched (Linux 5.3+ with pidfd_open)."""
        return self.enabled and not self.closed

    def watch_only(self, pids: set[int], waiter: Waiter) -> None:
        """Wake ``waiter`` once when any of ``pids`` exits (at once for one gone already); no other pid."""
        if not self.available:
            return
        gone = False
        with self._lock:
            for pid, (pidfd, waiters) in list(self._by_pid.items()):
                if pid not in pids and waiter in waiters:
                    waiters.remove(waiter)
                    if not waiters:
                        self._forget(pid, pidfd)
            for pid in pids:
                entry = self._by_pid.get(pid)
                if entry is not None:
                    if waiter not in entry[1]:
                        entry[1].append(waiter)
                    continue
                try:
                    pidfd = os.pidfd_open(pid)
                except ProcessLookupError:
                    gone = True
                    continue
                except OSError as error:  # ENOSYS (an old kernel), EMFILE: the interval covers it
                    logger.debug("adiskq: cannot watch process %d (%s)", pid, error)
                    continue
                self._by_pid[pid] = (pidfd, [waiter])
                self._by_fd[pidfd] = pid
                self._ensure_thread().register(pidfd, select.EPOLLIN)
        if gone:
            waiter.wake()

    def unwatch(self, waiter: Waiter) -> None:
        """Stop waking ``waiter`` for any process."""
        self.watch_only(set(), waiter)

    def watched(self) -> set[int]:
        """The pids watched now."""
        with self._lock:
            return set(self._by_pid)

    def _forget(self, pid: int, pidfd: int) -> None:
        del self._by_pid[pid]
        del self._by_fd[pidfd]
        if self._epoll is not None:
            with contextlib.suppress(OSError):
                self._epoll.unregister(pidfd)
        os.close(pidfd)

    def _ensure_thread(self) -> select.epoll:
        if self._epoll is None:
            self._epoll = select.epoll()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(self._epoll,), name="adiskq-exits", daemon=True)
            self._thread.start()
        return self._epoll

    def _run(self, epoll: select.epoll) -> None:
        while not self.closed:
            try:
                events = epoll.poll()
            except OSError:  # pragma: no cover - the epoll is never closed while its thread runs
                return
            for pidfd, _ in events:
                with self._lock:
                    pid = self._by_fd.get(pidfd)
                    if pid is None:
                        continue
                    waiters = list(self._by_pid[pid][1])
                    self._forget(pid, pidfd)
                for waiter in waiters:
                    waiter.wake()


_exit_watch: ExitWatch | None = None
_exit_watch_lock = threading.Lock()


def get_exit_watch() -> ExitWatch:
    """The process's exit watch, created on first use."""
    global _exit_watch
    watch = _exit_watch
    if watch is None:
        with _exit_watch_lock:
            if _exit_watch is None:
                _exit_watch = ExitWatch(enabled=os.environ.get(_ENV_MODE, "").strip().lower() != "off")
            watch = _exit_watch
    return watch


def _after_fork_in_child() -> None:
    # The child has no thread reading the parent's epoll, and must not read it: start afresh.
    global _exit_watch
    old, _exit_watch = _exit_watch, None
    if old is not None:
        old.closed = True
        for pidfd in list(old._by_fd):
            with contextlib.suppress(OSError):
                os.close(pidfd)
        if old._epoll is not None:
            with contextlib.suppress(OSError):
                old._epoll.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
