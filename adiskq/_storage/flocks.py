"""The shared producers' locks under ``locks/``: one ``flock`` per file, dropped by the kernel when
its holder dies, so there is no stale lock and no timeout to break one.

* ``locks/setup`` — held while a shared producer opens (creates the stream, grows it, recovers) or
  closes (writes the clean-close record when it is the last one);
* ``locks/vacuum`` — one vacuum at a time;
* ``locks/turn`` — a shared producer's turn at writing, taken before any partition's lock (and
  ``turn.queue``): producers take turns, writing every partition during their turn;
* ``locks/partition-NNNNNN`` — held around every append to that partition: the holder checks the
  partition's tail, appends, and lets go. Beside it, ``partition-NNNNNN.queue`` keeps it fair.

``flock`` is not fair: a holder that lets go and takes the lock again at once (a producer pushing in
a loop) wins over a process the kernel has only just woken, so a waiter could starve. So a waiter
takes the ``.queue`` lock exclusively before it waits for the lock itself, and an attempt that does
not wait (``try_acquire``) first checks, with a shared ``.queue`` lock, that nobody is queued: while
someone is, it fails and the caller queues too.

The order they are taken in is always setup, then vacuum, then the turn, then a partition (the Spark sink takes
several partitions, in ascending order), so no two producers can wait for each other.

Every wait is bounded and can be given up: a holder that is alive but not progressing (stopped by
SIGSTOP or a debugger, frozen with its container) keeps its locks for as long as it is stopped, and
must not hang the others. A blocking ``flock`` cannot be interrupted, so a wait runs in a thread of
its own (``LockWait``) on descriptors of its own, and whoever waits for it waits for an event with a
bound: the caller that gives up leaves the thread blocked, and should the thread take the lock later
with nobody waiting any more, it lets go at once (its descriptors, and so its lock, are its own:
nothing another caller holds is touched). A later wait for the same lock in this process joins the
thread still blocked rather than starting another, so a stopped holder costs one thread per lock.
The error of a wait that ran out (``LockTimeoutError``) names the holder from ``/proc/locks``.

The looks that do not wait (``try_acquire``, ``contended``) never raise for a failed probe of the
queue (``flock`` may fail, e.g. ``ENOLCK``): they answer as if someone were queued, so the caller lets
go or takes the waiting road, which is always safe. A holder that got an exception instead would
skip the release that follows, and keep every other writer waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable
from typing import Final, Literal

from .._errors import LockTimeoutError
from .._sansio.naming import LOCKS_DIR, partition_lock_name
from .files import DEFAULT_FILE_MODE, dir_mode
from .lock_holders import describe_flock_holder

__all__ = [
    "SHARED_LOCK_TIMEOUT_SECONDS",
    "FileLock",
    "LockWait",
    "lock_wait_seconds",
    "partition_lock",
    "setup_lock",
    "turn_lock",
    "vacuum_lock",
]

_FLAGS: Final = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC

# How long a shared producer waits for a lock another one holds when ``lock_timeout`` is 0 (the
# default, which for the owner lock means "fail at once": shared producers take these locks in turns
# all the time, so they must wait some). A hold is an append, an fsync, an open's recovery of a
# partition: far below this, unless the holder has stopped.
SHARED_LOCK_TIMEOUT_SECONDS: Final = 30.0
# How often a waiting thread looks whether its caller gave the wait up (a cancelled open).
_INTERRUPT_LOOK_SECONDS: Final = 0.05


# Threads that ran a wait and wait for the next one: starting a thread costs about as much as a turn's
# hand-over between shared producers, which happens every few milliseconds under contention. Daemon
# threads, not an executor's: a thread blocked on a stopped holder must not hold up the process's exit.
_MAX_IDLE_WORKERS: Final = 16
_idle_workers: list[_Worker] = []
_idle_mutex = threading.Lock()


class _Worker:
    """A daemon thread that runs one job after another, idle in ``_idle_workers`` in between."""

    def __init__(self) -> None:
        self._job: Callable[[], None] | None = None
        self._ready = threading.Event()
        threading.Thread(target=self._loop, name="adiskq lock wait", daemon=True).start()

    def start(self, job: Callable[[], None]) -> None:
        self._job = job
        self._ready.set()

    def _loop(self) -> None:
        while True:
            self._ready.wait()
            self._ready.clear()
            job, self._job = self._job, None
            if job is not None:
                job()
            with _idle_mutex:
                if len(_idle_workers) >= _MAX_IDLE_WORKERS:
                    return
                _idle_workers.append(self)


def _run_in_thread(job: Callable[[], None]) -> None:
    with _idle_mutex:
        worker = _idle_workers.pop() if _idle_workers else None
    (worker or _Worker()).start(job)


def _forget_workers_in_child() -> None:
    _idle_workers.clear()  # the parent's threads are not in a forked child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers_in_child)


def lock_wait_seconds(lock_timeout: float) -> float:
    """The bound of every wait for a lock of ``locks/``: ``lock_timeout``, or the default for 0."""
    return lock_timeout if lock_timeout > 0 else SHARED_LOCK_TIMEOUT_SECONDS


class LockWait:
    """One blocking wait for a ``FileLock``, in a daemon thread, on descriptors of its own.

    Callers ``join()`` it, wait (for ``done`` or a callback) as long as they like, then ``claim()``
    the lock (True: the ``FileLock`` holds it now) or ``leave()``; once nobody waits, a lock the
    thread takes is let go at once.
    """

    def __init__(self, lock: FileLock) -> None:
        self._lock = lock
        self._mutex = threading.Lock()
        self._state: Literal["waiting", "taken", "claimed", "dropped", "failed"] = "waiting"
        self._waiters = 1  # the caller that starts it
        self._callbacks: list[Callable[[], None]] = []
        self._fd: int | None = None
        self.error: OSError | None = None
        self.done = threading.Event()
        _run_in_thread(self._run)

    def join(self) -> bool:
        """Count one more waiter; False once the thread is finished (start a new wait)."""
        with self._mutex:
            if self._state not in ("waiting", "taken"):
                return False
            self._waiters += 1
            return True

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from the thread, or now if it is finished) once the wait ends."""
        with self._mutex:
            if self._state == "waiting":
                self._callbacks.append(callback)
                return
        callback()

    def claim(self) -> bool:
        """Hand the lock the thread took to the ``FileLock``: True if it holds it now (also when
        another waiter of this process claimed it first). Raises the thread's error, if it failed."""
        fd = None
        with self._mutex:
            if self._state == "taken":
                fd, self._fd = self._fd, None
                self._state = "claimed"
            elif self._state == "failed" and self.error is not None:
                raise self.error
        if fd is not None:
            self._lock._adopt(fd)  # outside this wait's mutex: FileLock.wait takes the two the other way round
        return self._lock.held

    def leave(self) -> None:
        """This waiter stops waiting; the last one to leave lets go of a lock taken and not claimed."""
        with self._mutex:
            self._waiters -= 1
            if self._waiters > 0 or self._state != "taken":
                return
            fd, self._fd = self._fd, None
            self._state = "dropped"
        if fd is not None:
            os.close(fd)  # drops the lock

    def _run(self) -> None:
        lock = self._lock
        queue_fd = fd = None
        try:
            fd = os.open(lock.path, _FLAGS, lock.mode)
            if lock._queue is not None:
                queue_fd = os.open(lock._queue.path, _FLAGS, lock.mode)
                fcntl.flock(queue_fd, fcntl.LOCK_EX)  # first in the queue (the module docstring)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as error:
            if fd is not None:
                os.close(fd)
                fd = None
            self.error = error
        finally:
            if queue_fd is not None:
                os.close(queue_fd)
        with self._mutex:
            if fd is None:
                self._state = "failed"
            elif self._waiters > 0:
                self._fd, fd = fd, None
                self._state = "taken"
            else:
                self._state = "dropped"  # everyone gave up meanwhile
            callbacks, self._callbacks = self._callbacks, []
        if fd is not None:
            os.close(fd)
        self.done.set()
        for callback in callbacks:
            callback()


class FileLock:
    """An exclusive ``flock`` on one file of ``locks/`` (created when first taken)."""

    __slots__ = ("_closed", "_fd", "_queue", "_wait", "_wait_mutex", "held", "mode", "path", "stream_path")

    def __init__(
        self, path: str, *, mode: int = DEFAULT_FILE_MODE, queued: bool = False, stream_path: str | None = None
    ) -> None:
        self.path = path
        # The stream it locks, for error messages (locks/NAME's by default).
        self.stream_path = stream_path or os.path.dirname(os.path.dirname(path))
        self.mode = mode
        self._fd: int | None = None
        # The lock waiters queue on, for locks that are taken often (see the module docstring).
        self._queue = FileLock(path + ".queue", mode=mode) if queued else None
        self.held = False
        self._wait: LockWait | None = None  # the wait under way in this process, if any
        self._wait_mutex = threading.Lock()
        self._closed = False

    def _descriptor(self) -> int:
        fd = self._fd
        if fd is None:
            directory = os.path.dirname(self.path)
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory, dir_mode(self.mode))
            fd = self._fd = os.open(self.path, _FLAGS, self.mode)
        return fd

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; False if another holder has it."""
        if self.held:
            return True
        queue = self._queue
        if queue is not None and not queue._probe():
            return False  # a waiter is queued: it goes first
        try:
            fcntl.flock(self._descriptor(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            if queue is not None:
                queue._unlock()
        self.held = True
        return True

    def contended(self) -> bool:
        """True when another holder is queued for this lock (only a queued lock knows)."""
        queue = self._queue
        if queue is None:
            return False
        if not queue._probe():
            return True
        queue._unlock()
        return False

    def _probe(self) -> bool:
        """Take this (queue) lock shared without waiting: True if taken (the caller unlocks), False
        if a waiter holds it, or if the probe itself failed (see the module docstring)."""
        try:
            fcntl.flock(self._descriptor(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: queued; any other: cannot tell, so answer "queued"
            return False
        return True

    def wait(self) -> LockWait:
        """Join the wait for this lock under way in this process, or start one (the caller then
        ``claim()``s or ``leave()``s it)."""
        with self._wait_mutex:
            wait = self._wait
            if wait is None or not wait.join():
                wait = self._wait = LockWait(self)
            return wait

    def _adopt(self, fd: int) -> None:
        """Hold the lock through ``fd``, which a ``LockWait`` took it on (a closed lock lets go)."""
        with self._wait_mutex:
            if self._closed:
                os.close(fd)
                return
            old, self._fd = self._fd, fd
            self.held = True
        if old is not None:
            os.close(old)  # held nothing: the lock was not held through it

    def acquire(
        self, timeout: float = SHARED_LOCK_TIMEOUT_SECONDS, *, interrupt: threading.Event | None = None
    ) -> None:
        """Take the lock, waiting for its holder at most ``timeout`` seconds (``LockTimeoutError``
        then), or until ``interrupt`` is set (``InterruptedError``)."""
        started = time.monotonic()
        deadline = started + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise self.timeout_error(time.monotonic() - started)
            wait = self.wait()
            woken = threading.Event()
            try:
                wait.on_done(woken.set)
                # An interrupt is looked at between slices of the wait (a thread cannot wait for two events).
                while not woken.wait(max(0.0, min(deadline - time.monotonic(), _INTERRUPT_LOOK_SECONDS))):
                    if time.monotonic() >= deadline or (interrupt is not None and interrupt.is_set()):
                        break
                if wait.claim():
                    return
            finally:
                wait.leave()
            if interrupt is not None and interrupt.is_set():
                raise InterruptedError(f"the wait for {self.path} was given up")
            # Timed out (raised at the loop's top), or another caller in this process claimed the
            # lock this wait took and has let it go since: wait again.

    def timeout_error(self, waited_seconds: float) -> LockTimeoutError:
        """The error of a wait for this lock that ran out, naming its holder."""
        holder = describe_flock_holder(self.path, self.stream_path)
        name = os.path.relpath(self.path, self.stream_path)
        return LockTimeoutError(self.stream_path, name, round(waited_seconds, 1), holder)

    def release(self) -> None:
        """Let go of the lock; harmless when not held."""
        if self.held:
            self.held = False
            self._unlock()

    def _unlock(self) -> None:
        """``LOCK_UN``; should even that fail, close the file, which drops the lock for certain (a lock
        believed released but still held would stop every other writer)."""
        fd = self._fd
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            self._fd = None
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Let go and close the file; twice is harmless. A wait under way lets go of what it takes."""
        with self._wait_mutex:
            self._closed = True
            fd, self._fd = self._fd, None
            self.held = False
        if fd is not None:
            # Closing the last descriptor drops the lock too; Linux frees the descriptor even when
            # close reports an error, so there is nothing to retry.
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._queue is not None:
            self._queue.close()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _path(stream_path: str, name: str) -> str:
    return os.path.join(stream_path, LOCKS_DIR, name)


def setup_lock(stream_path: str, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock shared producers hold while they open or close."""
    return FileLock(_path(stream_path, "setup"), mode=mode)


def vacuum_lock(stream_path: str, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock a vacuum holds: one at a time."""
    return FileLock(_path(stream_path, "vacuum"), mode=mode)


def turn_lock(stream_path: str, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock a shared producer holds for its turn at writing (before any partition's lock)."""
    return FileLock(_path(stream_path, "turn"), mode=mode, queued=True)


def partition_lock(stream_path: str, partition: int, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock held around every append to ``partition``."""
    return FileLock(_path(stream_path, partition_lock_name(partition)), mode=mode, queued=True)
