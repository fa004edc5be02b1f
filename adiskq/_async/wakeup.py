"""Waiters, and in-process wake-ups: a producer tells consumers in its own process that a partition grew.

A ``Waiter`` belongs to one consumer (or group). It stays registered under the partitions it
follows; ``arm()`` readies it for one wait, and any ``wake()`` from then on ends that wait — also a
wake that lands before the wait starts, so arming before the last look at the files loses nothing.
``wake()`` may come from any thread: a waiter in another thread's event loop is woken through that
loop's thread-safe call.

``notify`` skips the kernel (inotify) for a consumer beside its producer. Both sides name a partition
by ``(os.path.realpath(stream), partition)``; the producer calls ``notify`` after every commit, so
it must be cheap when nobody waits (one dict lookup) and when the waiters are already awake (one
attribute test per waiter).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Final, Protocol

import anyio.lowlevel

if TYPE_CHECKING:
    import asyncio

    from .asyncio_deadlines import AsyncioDeadline

__all__ = ["PartitionKey", "Waiter", "notify", "notify_others", "register", "unregister"]

PartitionKey = tuple[str, int]

# Waiters by what they wait for: a partition (PartitionKey), or anything else hashable that
# wakes waiters of one process directly (a group's members: ("group", stream, name)).
_waiters: dict[Hashable, list[Waiter]] = {}
_registry_lock = threading.Lock()


class _TrioToken(Protocol):
    def run_sync_soon(self, sync_fn: Callable[[], object]) -> None: ...


class _Event(Protocol):
    """``trio.Event``: what a waiter waits on under Trio."""

    def set(self) -> None: ...

    async def wait(self) -> None: ...


def _asyncio_loop(native_token: object) -> asyncio.AbstractEventLoop | None:
    """``native_token`` if it is an asyncio event loop (never while asyncio is not imported: a
    process on Trio never imports it)."""
    module = sys.modules.get("asyncio")
    if module is None:
        return None
    loop_type: type[asyncio.AbstractEventLoop] = module.AbstractEventLoop
    return native_token if isinstance(native_token, loop_type) else None


def _threadsafe_caller(native_token: object) -> Callable[[Callable[[], object]], object]:
    """A function that runs a callback soon in the event loop of ``native_token``, from any thread."""
    loop = _asyncio_loop(native_token)
    if loop is not None:
        return loop.call_soon_threadsafe
    token: _TrioToken = native_token  # type: ignore[assignment]  # Trio's TrioToken
    return token.run_sync_soon


class Waiter:
    """One task's readiness to be woken: armed per wait, woken by any thread.

    The wait is the loop's own: a bare future on asyncio, a ``trio.Event`` on Trio. ``anyio.Event``
    wraps an ``asyncio.Event`` that makes its own future per wait, or a ``trio.Event``: layers that
    a wake-up pays for on its way to the task.
    """

    __slots__ = (
        "_call_soon",
        "_thread",
        "_token",
        "asyncio_deadline",
        "asyncio_loop",
        "event",
        "expired",
        "fired",
        "interrupt",
    )

    def __init__(self) -> None:
        self.event: _Event | asyncio.Future[None] | None = None
        self.fired = True  # not armed: wakes are ignored until arm()
        self.expired = False  # the current wait reached its deadline (set by trio_deadlines.py on Trio)
        # Set while this task waits for the inotify descriptor on Trio: ends that wait (notify.py)
        self.interrupt: Callable[[], object] | None = None
        self.asyncio_loop: asyncio.AbstractEventLoop | None = None  # the loop it waits in, on asyncio
        # The deadline of its waits in that loop (notify.py), made at its first wait there
        self.asyncio_deadline: AsyncioDeadline | None = None
        self._token: object = None  # the event loop it waits in (asyncio loop or Trio token)
        self._thread = 0
        self._call_soon: Callable[[Callable[[], object]], object] | None = None

    def arm(self, token: object = None) -> None:
        """Ready for one wait; call from the waiting task, before the last check for data.

        ``token``: the running event loop's native token (``anyio.lowlevel.current_token()
        .native_token``) when the caller knows it already; looking it up costs more than the rest
        of the arming."""
        if token is None:
            token = anyio.lowlevel.current_token().native_token
        if token is not self._token:  # first wait, or a wait in another event loop than the last
            self._token = token
            self._thread = threading.get_ident()
            self._call_soon = _threadsafe_caller(token)
            self.asyncio_loop = _asyncio_loop(token)
            self.asyncio_deadline = None  # a timer of the last loop's, if any, finds it gone and ends
        self.event = self._new_event()
        self.fired = False
        self.expired = False

    def _new_event(self) -> _Event | asyncio.Future[None]:
        loop = self.asyncio_loop
        if loop is not None:
            return loop.create_future()
        import trio  # the loop is Trio's, so Trio is imported already

        return trio.Event()

    def wake(self) -> None:
        """End the current wait (if armed); safe from any thread, cheap when already woken."""
        if self.fired:
            return
        if threading.get_ident() == self._thread:
            self._set()
        elif self._call_soon is not None:
            self.fired = True
            with contextlib.suppress(RuntimeError):  # that loop has ended: nobody waits there any more
                self._call_soon(self._set)

    def _set(self) -> None:
        self.fired = True
        self._set_event()
        interrupt = self.interrupt
        if interrupt is not None:  # it is reading inotify for its loop: stop that
            interrupt()

    def take_wakeup(self) -> None:
        """End the wait from the waiting task itself: it saw the inotify descriptor readable."""
        self.fired = True

    def expire(self) -> None:
        """End the current wait at its deadline: not woken, so the waiter knows it timed out (same
        thread only)."""
        self.expired = True
        self.nudge()
        interrupt = self.interrupt
        if interrupt is not None:
            interrupt()

    def nudge(self) -> None:
        """Wake the waiting task without marking the wait done (same thread only)."""
        self._set_event()

    async def wait_event(self) -> None:
        """Sleep until ``wake`` or ``nudge``; re-arms the event after a nudge."""
        event = self.event
        if event is None:
            return
        if self.asyncio_loop is not None:  # the event is that loop's future (``_new_event``)
            await event  # type: ignore[misc]
        else:
            await event.wait()  # type: ignore[union-attr]
        if not self.fired:
            self.event = self._new_event()

    def _set_event(self) -> None:
        event = self.event
        if event is None:
            return
        if self.asyncio_loop is not None:  # the event is that loop's future (``_new_event``)
            future: asyncio.Future[None] = event  # type: ignore[assignment]
            if not future.done():  # done: set before, or cancelled with its waiting task
                future.set_result(None)
        else:
            event.set()  # type: ignore[union-attr]

    def disarm(self) -> None:
        """The wait is over; later wakes are ignored until the next ``arm``."""
        self.fired = True
        self.event = None


# The waiters of a key, if any: what a hot path asks before calling notify() (the dict is never
# replaced, so its bound get stays valid).
waiters_of: Final = _waiters.get
# Whether any consumer of this process waits at all (a key leaves the dict with its last waiter):
# a hot path's test before waiters_of, without hashing its key.
anyone_waiting: Final = _waiters


def notify(key: PartitionKey) -> None:
    """Wake every waiter following the partition; called by the producer after each commit."""
    waiters = _waiters.get(key)
    if waiters:
        for waiter in waiters:
            if not waiter.fired:
                waiter.wake()


def notify_others(key: Hashable, sender: Waiter) -> None:
    """Wake every waiter registered under ``key`` except ``sender``."""
    for waiter in _waiters.get(key, ()):
        if waiter is not sender and not waiter.fired:
            waiter.wake()


def register(key: Hashable, waiter: Waiter) -> None:
    """Wake ``waiter`` whenever ``key`` (a partition, usually) is notified, until ``unregister``."""
    with _registry_lock:
        # Copy-on-write: notify() iterates a list no one mutates, from any thread, without a lock.
        _waiters[key] = [*_waiters.get(key, ()), waiter]


def unregister(key: Hashable, waiter: Waiter) -> None:
    """Stop waking ``waiter`` for ``key``; harmless if it was not registered."""
    with _registry_lock:
        waiters = [w for w in _waiters.get(key, ()) if w is not waiter]
        if waiters:
            _waiters[key] = waiters
        else:
            _waiters.pop(key, None)
