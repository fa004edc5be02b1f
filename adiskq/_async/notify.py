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
some of its tasks wait, and wakes the waiters the events are for, in any thread. On asyncio the
loop does it in a reader callback, registered while its tasks wait (not around every wait), so a
wake-up costs one loop dispatch and one task step. On Trio one of the waiting tasks reads
(``trio.lowlevel.wait_readable``) and, when it stops waiting, hands the reading over to another
waiting task of its run; when it is the only one waiting, it takes the wake-up at once and the
events are read before a consumer arms again (``read_unread``), off the message's way.
Trio's waits have no cancel scope each: their deadlines are kept by one system task per run
(``trio_deadlines.py``), as asyncio's are by one loop timer per waiter (``asyncio_deadlines.py``).
asyncinotify makes the instance and the watches; the events are read with ``os.read`` and parsed
here, ten times cheaper than its reader (``benchmarks/wakeup_breakdown.py`` times each step).

A slow poll backs inotify up (its queue can overflow; renamed or deleted files drop their watches)
and replaces it where there is none: other OSes, ``ADISKQ_NOTIFY=poll``, or an exhausted instance
limit. Waiters woken for nothing simply look again: a spurious wake-up is cheap, a lost one is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import logging
import os
import struct
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Final

import anyio
import anyio.lowlevel

from .asyncio_deadlines import AsyncioDeadline
from .trio_deadlines import TrioDeadlines
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


@dataclasses.dataclass(slots=True)
class _TrioRun:
    """One Trio run's waits: which waiting task reads the inotify descriptor, and their deadlines."""

    deadlines: TrioDeadlines
    waiting: list[Waiter] = dataclasses.field(default_factory=list)
    reader: Waiter | None = None


@dataclasses.dataclass(slots=True)
class _AsyncioListener:
    """The reading callback registered with one asyncio loop, and how many of its tasks wait."""

    fd: int
    waiting: int = 0


_trio_run: anyio.lowlevel.RunVar[_TrioRun] = anyio.lowlevel.RunVar("adiskq_trio_waits")


class Notifier:
    """Watches shared by every consumer of the process, and the wait that uses them."""

    def __init__(self, *, polling: bool = False) -> None:
        self._inotify: asyncinotify.Inotify | None = None
        self._fd = -1  # the instance's descriptor (asyncinotify's ``fd`` is a property, checked each time)
        self._unread = False  # a Trio waiter took a wake-up and left its events queued
        if not polling and asyncinotify is not None:
            try:
                self._inotify = asyncinotify.Inotify()
                self._fd = self._inotify.fd
                # asyncinotify's InitFlags.NONBLOCK is O_CLOEXEC by mistake (4.x): set it here, or a
                # read with nothing queued would block the event loop.
                os.set_blocking(self._fd, False)
            except OSError as error:  # EMFILE: the per-user instance limit; ENOSYS: no inotify
                logger.warning("adiskq: inotify unavailable (%s); consumers poll instead", error)
        self._lock = threading.Lock()
        self._by_path: dict[str, Watch] = {}
        self._by_wd: dict[int, Watch] = {}
        # asyncio loops whose callback reads the descriptor; only each loop's own thread touches its entry
        self._asyncio_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _AsyncioListener] = (
            weakref.WeakKeyDictionary()
        )
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
        with self._lock:
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
        with self._lock:
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
        never takes the reading of the descriptor. Not a coroutine itself but the loop's own wait,
        returned to be awaited: one frame less for a wake-up to resume.
        """
        reads = kernel and self._inotify is not None and not self.closed
        loop = waiter.asyncio_loop
        if loop is not None:
            return self._wait_in_asyncio(waiter, loop, max_seconds, reads)
        return self._wait_in_trio(waiter, max_seconds, reads)

    async def _wait_in_trio(self, waiter: Waiter, max_seconds: float, reads: bool) -> None:
        """``wait`` on Trio: one waiting task of the run reads the descriptor for all of them.

        Trio's own ``wait_readable`` and ``Event`` rather than anyio's, and no cancel scope: each
        is a layer of Python on the way from the kernel's wake-up to the task. The deadline is kept
        by the run's ``TrioDeadlines``; it, and a direct wake (``wakeup.notify``, another loop's
        reader), end the reader's ``wait_readable`` with ``notify_closing`` (the descriptor stays
        open: Trio only forgets its registration, and the next wait makes it again).
        """
        import trio
        import trio.lowlevel

        run = _trio_run.get(None)
        if run is None:
            run = _TrioRun(TrioDeadlines.start())
            _trio_run.set(run)
        run.deadlines.add(waiter, trio.current_time() + max_seconds)
        if not reads:
            try:
                while not (waiter.fired or waiter.expired):
                    await waiter.wait_event()
            finally:
                run.deadlines.discard(waiter)
            return
        fd = self._fd
        waiting = run.waiting
        waiting.append(waiter)
        try:
            while not (waiter.fired or waiter.expired):
                if run.reader is None:
                    run.reader = waiter
                if run.reader is not waiter:
                    await waiter.wait_event()
                    continue
                waiter.interrupt = functools.partial(trio.lowlevel.notify_closing, fd)
                try:
                    await trio.lowlevel.wait_readable(fd)
                except trio.ClosedResourceError:
                    continue  # interrupted: woken directly, or the deadline passed
                finally:
                    waiter.interrupt = None
                if len(waiting) == 1:
                    # No other task of this run waits: the events can only be for this one, or for
                    # nobody armed. It takes the wake-up now, and the events are read before any
                    # task arms again (``read_unread``), off the message's way.
                    self._unread = True
                    waiter.take_wakeup()
                else:
                    self.dispatch()
        finally:
            run.deadlines.discard(waiter)
            waiting.remove(waiter)
            if run.reader is waiter:
                # Hand the descriptor to another waiting task of this run, or events would queue
                # up unread while it sleeps.
                run.reader = None
                for other in waiting:
                    if not other.fired:
                        run.reader = other
                        other.nudge()
                        break

    def read_unread(self) -> None:
        """Read the events a waiter took its wake-up without reading (``_wait_in_trio``).

        Called before a waiter arms: the events it drops for itself are for writes its next look
        will see; other waiters they concern are woken.
        """
        if self._unread:
            self._unread = False
            self.dispatch()

    async def _wait_in_asyncio(
        self, waiter: Waiter, loop: asyncio.AbstractEventLoop, max_seconds: float, reads: bool
    ) -> None:
        """``wait`` on asyncio: the loop itself reads the descriptor, in a callback.

        The callback stays registered from one wait to the next (``anyio.wait_readable`` adds and
        removes it every time, and wakes a task that then reads), so a wake-up costs the event
        loop's own dispatch and one task step. It goes once an event finds no task of the loop
        waiting. A cancelled wait ends as any asyncio await does.
        """
        # The wait is on the waiter's future itself: one wake or nudge ends it, and the caller
        # disarms (or arms again) before it waits again.
        event = waiter.event
        if not isinstance(event, asyncio.Future):
            return  # not armed: nothing to wait for
        # The deadline is a loop timer that nudges the waiter (ending the wait without a wake-up),
        # not a cancel scope: entering and leaving one costs more than the rest of the wake-up. The
        # timer is the waiter's, kept from one wait to the next: a wake-up has none to cancel.
        deadline = waiter.asyncio_deadline
        if deadline is None:
            deadline = waiter.asyncio_deadline = AsyncioDeadline(loop)
        deadline.start(waiter, max_seconds)
        if not reads:
            await event
            return
        listener = self._asyncio_listeners.get(loop)
        if listener is None:
            listener = self._listen_in(loop)
        listener.waiting += 1
        try:
            await event
        finally:
            listener.waiting -= 1

    def _listen_in(self, loop: asyncio.AbstractEventLoop) -> _AsyncioListener:
        """Register the reading callback with ``loop`` (from a task of that loop)."""
        assert self._inotify is not None
        listener = _AsyncioListener(self._fd)
        with self._lock:
            loop.add_reader(listener.fd, self._readable_in, loop, listener)
            self._asyncio_listeners[loop] = listener
        return listener

    def _readable_in(self, loop: asyncio.AbstractEventLoop, listener: _AsyncioListener) -> None:
        """The descriptor is readable in ``loop``: dispatch; stop listening there if no task waits."""
        self.dispatch()
        if listener.waiting == 0 or self._inotify is None:
            self._stop_listening(loop, listener)

    def _stop_listening(self, loop: asyncio.AbstractEventLoop, listener: _AsyncioListener) -> None:
        with self._lock:
            if self._asyncio_listeners.get(loop) is listener:
                del self._asyncio_listeners[loop]
                loop.remove_reader(listener.fd)

    def dispatch(self) -> None:
        """Read every queued event and wake the waiters they concern.

        The events are read straight from the descriptor and parsed here: asyncinotify's reader
        builds an ``IntFlag``, a ctypes struct, a ``Path`` and an object per event, and costs ~30 µs
        a wake-up (benchmarks/RESULTS.md), a quarter of a cross-process wake-up.
        """
        inotify = self._inotify
        if inotify is None:
            return
        by_wd = self._by_wd
        fd = self._fd
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
        with self._lock:
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
            self._forget_asyncio_listeners()
            inotify.close()

    def _forget_asyncio_listeners(self) -> None:
        """Unregister the reading callbacks before the descriptor closes: a loop left listening to
        a closed number would trip over the next file to get it."""
        with self._lock:
            listeners = list(self._asyncio_listeners.items())
        for loop, listener in listeners:
            with contextlib.suppress(RuntimeError):  # that loop is closed: its registrations went with it
                if _running_loop() is loop:
                    self._stop_listening(loop, listener)
                else:
                    loop.call_soon_threadsafe(self._stop_listening, loop, listener)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
