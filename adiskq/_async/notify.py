"""Wake-ups from the kernel: one inotify instance per process, shared by all its consumers, with a poll behind it.

go-diskq opens an inotify instance per consumer and runs out at the default limit of 128 per user;
here every consumer of the process shares one, and shares the watches too (one per partition folder,
one per active ``.index`` file, counted by reference). A watch is what the kernel keys it by, its
watch descriptor: two paths to one file (a symlinked folder, a bind mount) get the same descriptor
from ``inotify_add_watch``, so they share one ``Watch``, and it goes only when its last user goes.
The folder watch sees new segments (their ``.index`` appearing); the ``.index`` watch sees commits
(IN_MODIFY), and nothing else, so a commit wakes a reader once, not once per file written. Consumers
whose producer runs in their own process watch nothing: the producer wakes them directly
(wakeup.py), and kernel events would only wake them a second time.

No task of adiskq's reads in the background. Each event loop reads the inotify descriptor while
some of its tasks wait, and wakes the waiters the events are for, in any thread: the loop's
``Waits`` (``event_loop.py``) do it their loop's way. On asyncio the loop does it in a reader
callback, registered while its tasks wait (not around every wait), so a wake-up costs one loop
dispatch and one task step (``asyncio_waits.py``). On Trio one of the waiting tasks reads, and hands
the reading over to another when it stops waiting; alone, it takes the wake-up at once and leaves
the events for ``read_unread``, off the message's way (``trio_waits.py``). Neither puts a cancel
scope around a wait: the deadlines are loop timers on asyncio (``asyncio_deadlines.py``) and one
system task per run on Trio (``trio_deadlines.py``).
asyncinotify makes the instance and the watches; the events are read with ``os.read`` and parsed
here, far cheaper than its reader (``benchmarks/wakeup_breakdown.py`` times each step; measured:
see benchmarks/RESULTS.md, section "Figures the code relies on", F7).

A slow poll backs inotify up (its queue can overflow; renamed or deleted files drop their watches)
and replaces it where there is none: other OSes, ``ADISKQ_NOTIFY=poll``, or an exhausted instance
limit. Waiters woken for nothing simply look again: a spurious wake-up is cheap, a lost one is not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import struct
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Final, Protocol

from .wakeup import Waiter

try:  # asyncinotify is installed on Linux only
    import asyncinotify
except ImportError:  # pragma: no cover - other OSes poll
    asyncinotify = None  # type: ignore[assignment]

__all__ = [
    "BACKUP_POLL_SECONDS",
    "FALLBACK_POLL_SECONDS",
    "Notifier",
    "Watch",
    "get_notifier",
    "reset_notifier",
]

logger = logging.getLogger("adiskq")

BACKUP_POLL_SECONDS: Final = 1.0  # with inotify: only overflows and odd filesystems rely on it
FALLBACK_POLL_SECONDS: Final = 0.05  # without inotify, this is the wake-up latency
_ENV_MODE: Final = "ADISKQ_NOTIFY"  # "poll" forces polling; anything else: inotify where possible
# struct inotify_event (inotify(7)): int wd; u32 mask, cookie, len; then len bytes of NUL-padded name.
_EVENT_HEADER: Final = struct.Struct("=iIII")
_EVENT_HEADER_BYTES: Final = _EVENT_HEADER.size
_LARGEST_EVENT_BYTES: Final = _EVENT_HEADER_BYTES + 256  # NAME_MAX + 1
_READ_BYTES: Final = 4096  # a short read means the queue is empty; a full one is read again
_IN_Q_OVERFLOW: Final = 0x4000
_IN_IGNORED: Final = 0x8000


@dataclasses.dataclass(eq=False, slots=True)
class Watch:
    """One watched file or folder (one kernel watch), shared by the consumers that follow it
    through any of its paths."""

    path: str
    suffix: str | None  # for a folder: wake only for entries whose names end so
    native: object | None  # asyncinotify.Watch, or None when polling
    refs: int = 0
    paths: tuple[str, ...] = ()  # every path it was asked for by (``_by_path`` keys)
    waiters: tuple[Waiter, ...] = ()  # copy-on-write, read without the lock
    suffix_bytes: bytes | None = dataclasses.field(init=False)  # the suffix as the kernel names it

    def __post_init__(self) -> None:
        self.suffix_bytes = None if self.suffix is None else os.fsencode(self.suffix)


class Listener(Protocol):
    """A loop's standing registration to read the descriptor (asyncio's reader callback)."""

    def stop(self) -> None:
        """Unregister, from any thread: the descriptor is closing."""


class Notifier:
    """Watches shared by every consumer of the process, and the wait that uses them."""

    def __init__(self, *, polling: bool = False) -> None:
        self._inotify: asyncinotify.Inotify | None = None
        self.fd = -1  # the instance's descriptor (asyncinotify's ``fd`` is a property, checked each time)
        self.unread = False  # a waiter took a wake-up and left its events queued (``read_unread``)
        if not polling and asyncinotify is not None:
            try:
                self._inotify = asyncinotify.Inotify()
                self.fd = self._inotify.fd
                # asyncinotify's InitFlags.NONBLOCK is O_CLOEXEC by mistake (4.x): set it here, or a
                # read with nothing queued would block the event loop.
                os.set_blocking(self.fd, False)
            except OSError as error:  # EMFILE: the per-user instance limit; ENOSYS: no inotify
                logger.warning("adiskq: inotify unavailable (%s); consumers poll instead", error)
        self.lock = threading.Lock()  # the watches' tables, and ``listeners``
        self._by_path: dict[str, Watch] = {}
        self._by_wd: dict[int, Watch] = {}
        # The loops (asyncio's) whose callback reads the descriptor, by loop; only each loop's own
        # thread touches its entry.
        self.listeners: weakref.WeakKeyDictionary[Any, Listener] = weakref.WeakKeyDictionary()
        self.closed = False

    @property
    def uses_inotify(self) -> bool:
        """True when the kernel wakes consumers; False when they poll."""
        return self._inotify is not None

    @property
    def poll_seconds(self) -> float:
        """The default time between two looks at the files when nothing wakes a consumer."""
        return BACKUP_POLL_SECONDS if self._inotify is not None else FALLBACK_POLL_SECONDS

    # -- watches ---------------------------------------------------------------------------------

    def watch(self, path: str, waiter: Waiter, *, folder_suffix: str | None = None) -> Watch:
        """Wake ``waiter`` on writes to a file, or (with ``folder_suffix``) on new entries so named
        in a folder, until ``unwatch``.

        A path that cannot be watched (gone already, watch limit reached) gets a watch that never
        fires: the poll covers it.
        """
        with self.lock:
            watch = self._by_path.get(path)
            if watch is None:
                watch = self._by_path[path] = self._add_watch(path, folder_suffix)
                watch.paths = (*watch.paths, path)
            watch.refs += 1
            watch.waiters = (*watch.waiters, waiter)
            return watch

    def _add_watch(self, path: str, folder_suffix: str | None) -> Watch:
        """A new watch of ``path`` (under the lock)."""
        native = None
        if self._inotify is not None:
            if folder_suffix is None:
                mask = asyncinotify.Mask.MODIFY
            else:
                mask = asyncinotify.Mask.CREATE | asyncinotify.Mask.MOVED_TO | asyncinotify.Mask.ONLYDIR
            try:
                native = self._inotify.add_watch(path, mask)
            except OSError as error:
                level = logging.DEBUG if error.errno == errno.ENOENT else logging.WARNING
                logger.log(level, "adiskq: cannot watch %s (%s); polling it", path, error)
        if native is not None:
            shared = self._by_wd.get(native.wd)
            if shared is not None:
                return shared  # the same file by another path: the kernel gave the same watch
        watch = Watch(path, folder_suffix, native)
        if native is not None:
            self._by_wd[native.wd] = watch
        return watch

    def unwatch(self, watch: Watch, waiter: Waiter) -> None:
        """Stop waking ``waiter`` on the watch's events; the last one to go removes it from the kernel."""
        with self.lock:
            watch.waiters = tuple(w for w in watch.waiters if w is not waiter)
            watch.refs -= 1
            if watch.refs > 0 or self._by_path.get(watch.path) is not watch:
                return
            for path in watch.paths:
                if self._by_path.get(path) is watch:
                    del self._by_path[path]
            native = watch.native
            if native is None or self._inotify is None or self.closed:
                return
            wd = native.wd  # type: ignore[attr-defined]
            if self._by_wd.get(wd) is watch:
                del self._by_wd[wd]
            with contextlib.suppress(OSError, ValueError):  # the kernel drops watches of deleted files
                self._inotify.rm_watch(native)  # type: ignore[arg-type]

    # -- waiting ---------------------------------------------------------------------------------

    def wait(self, waiter: Waiter, max_seconds: float, *, kernel: bool = True) -> Coroutine[Any, Any, None]:
        """Sleep until ``waiter`` is woken, or ``max_seconds`` pass; ``waiter`` must be armed.

        ``kernel=False``: the waiter has no inotify watch (its producer wakes it directly), so it
        never takes the reading of the descriptor. Not a coroutine itself but the loop's own wait
        (its ``Waits.wait``), returned to be awaited: one frame less for a wake-up to resume.
        """
        reads = kernel and self._inotify is not None and not self.closed
        waits = waiter.waits
        if waits is None:  # never armed: no loop to wait in (every caller arms first)
            raise RuntimeError("a Waiter waits only after Waiter.arm()")
        return waits.wait(self, waiter, max_seconds, reads)

    def read_unread(self) -> None:
        """Read the events a waiter took its wake-up without reading (``trio_waits.py``).

        Called before a waiter arms: the events it drops for itself are for writes its next look
        will see; other waiters they concern are woken.
        """
        if self.unread:
            self.unread = False
            self.dispatch()

    def dispatch(self) -> None:
        """Read every queued event and wake the waiters they concern.

        The events are read straight from the descriptor and parsed here: asyncinotify's reader
        builds an ``IntFlag``, a ctypes struct, a ``Path`` and an object per event, a large share of
        a cross-process wake-up (measured: see benchmarks/RESULTS.md, section "Figures the code relies on", F7).
        """
        inotify = self._inotify
        if inotify is None:
            return
        by_wd = self._by_wd
        fd = self.fd
        while True:
            try:
                buffer = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                return
            except OSError as error:  # pragma: no cover - the descriptor is unusable: poll from now on
                logger.warning("adiskq: reading inotify failed (%s); consumers poll instead", error)
                self._wake_everyone()
                self._inotify = None
                return
            size = len(buffer)
            position = 0
            while position < size:
                wd, mask, _cookie, name_bytes = _EVENT_HEADER.unpack_from(buffer, position)
                name_start = position + _EVENT_HEADER_BYTES
                position = name_start + name_bytes
                if mask & _IN_Q_OVERFLOW:
                    self._wake_everyone()
                    continue
                if mask & _IN_IGNORED:  # the kernel dropped the watch (file deleted, or rm_watch)
                    _forget_native_watch(inotify, wd)
                watch = by_wd.get(wd)
                if watch is None:
                    continue
                suffix = watch.suffix_bytes
                if suffix is not None and not buffer[name_start:position].rstrip(b"\0").endswith(suffix):
                    continue
                for other in watch.waiters:
                    if not other.fired:
                        other.wake()
            if size < _READ_BYTES - _LARGEST_EVENT_BYTES:  # the queue is drained: no need to read EAGAIN
                return

    def _wake_everyone(self) -> None:
        with self.lock:
            watches = list(self._by_path.values())
        for watch in watches:
            for waiter in watch.waiters:
                waiter.wake()

    def close(self) -> None:
        """Close the inotify instance; waiters fall back to polling."""
        self.closed = True
        inotify, self._inotify = self._inotify, None
        if inotify is not None:
            self._wake_everyone()
            self._forget_listeners()
            inotify.close()

    def _forget_listeners(self) -> None:
        """Unregister the loops' reading callbacks before the descriptor closes."""
        with self.lock:
            listeners = list(self.listeners.values())
        for listener in listeners:
            listener.stop()


def _forget_native_watch(inotify: asyncinotify.Inotify, wd: int) -> None:
    """Drop asyncinotify's record of a watch the kernel has dropped.

    Its own reader, which this module does not use, does that on the IN_IGNORED event; without it
    asyncinotify would keep one small object per watch ever removed (a segment roll removes one).
    """
    table = getattr(inotify, "_watches", None)
    if isinstance(table, dict):
        table.pop(wd, None)


_notifier: Notifier | None = None
_notifier_lock = threading.Lock()


def get_notifier() -> Notifier:
    """The process's notifier, created on first use."""
    global _notifier
    notifier = _notifier
    if notifier is None:
        with _notifier_lock:
            if _notifier is None:
                _notifier = Notifier(polling=os.environ.get(_ENV_MODE, "").strip().lower() == "poll")
            notifier = _notifier
    return notifier


def reset_notifier() -> None:
    """Forget the process's notifier (the next consumer makes a new one; ``ADISKQ_NOTIFY`` is read again).

    Consumers already open keep the notifier they had.
    """
    global _notifier
    with _notifier_lock:
        _notifier = None


def _after_fork_in_child() -> None:
    # A forked child shares the parent's inotify descriptor: reading it would steal the parent's
    # events. Start afresh; the child's copy of the descriptor is closed with the old notifier.
    global _notifier
    old, _notifier = _notifier, None
    if old is not None:
        old.closed = True
        inotify, old._inotify = old._inotify, None
        if inotify is not None:
            inotify.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
