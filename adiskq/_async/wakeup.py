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
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, Final

import anyio.lowlevel

from .event_loop import waits_in

if TYPE_CHECKING:
    from .asyncio_deadlines import AsyncioDeadline
    from .event_loop import AsyncioLoop, Waits

__all__ = ["PartitionKey", "Waiter", "notify", "notify_others", "register", "unregister"]

PartitionKey = tuple[str, int]

# Waiters by what they wait for: a partition (PartitionKey), or anything else hashable that
# wakes waiters of one process directly (a group's members: ("group", stream, name)).
_waiters: dict[Hashable, list[Waiter]] = {}
_registry_lock = threading.Lock()


def _no_event(waiter: Waiter) -> None:
    """``set_event`` before the first arm: there is no event to set."""


def _no_new_event() -> None:
    """``new_event`` before the first arm (which replaces it before calling it)."""


class Waiter:
    """One task's readiness to be woken: armed per wait, woken by any thread.

    The wait is the loop's own (a bare future on asyncio, a ``trio.Event`` on Trio): the loop's
    ``Waits`` (``event_loop.py``), taken when the waiter arms in a loop it was not armed in last,
    whose callables it keeps in its own slots for the wake-up's way.
    """

    __slots__ = (
        "_call_soon",
        "_event_wait",
        "_new_event",
        "_set_event",
        "_thread",
        "_token",
        "asyncio_deadline",
        "asyncio_loop",
        "event",
        "expired",
        "fired",
        "interrupt",
        "waits",
    )

    def __init__(self) -> None:
        self.event: Any = None  # the current wait's event (the loop's: ``Waits.new_event``)
        self.fired = True  # not armed: wakes are ignored until arm()
        self.expired = False  # the current wait reached its deadline (set by trio_deadlines.py on Trio)
        # Set while this task waits for the inotify descriptor on Trio: ends that wait (trio_waits.py)
        self.interrupt: Callable[[], object] | None = None
        self.waits: Waits | None = None  # the loop it waits in (the last one it armed in)
        self.asyncio_loop: AsyncioLoop | None = None  # that loop, on asyncio
        # The deadline of its waits in that loop (asyncio_waits.py), made at its first wait there
        self.asyncio_deadline: AsyncioDeadline | None = None
        self._token: object = None  # the event loop it waits in (asyncio loop or Trio token)
        self._thread = 0
        self._call_soon: Callable[[Callable[[], object]], object] | None = None
        self._new_event: Callable[[], Any] = _no_new_event
        self._set_event: Callable[[Waiter], None] = _no_event
        self._event_wait: Callable[[Any], Awaitable[None]] | None = None

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
            waits = self.waits = waits_in(token)
            self._call_soon = waits.call_soon_threadsafe
            self._new_event = waits.new_event
            self._set_event = waits.set_event
            self._event_wait = waits.event_wait
            self.asyncio_loop = waits.asyncio_loop
            self.asyncio_deadline = None  # a timer of the last loop's, if any, finds it gone and ends
        self.event = self._new_event()
        self.fired = False
        self.expired = False

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
        self._set_event(self)
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
        self._set_event(self)

    async def wait_event(self) -> None:
        """Sleep until ``wake`` or ``nudge``; re-arms the event after a nudge."""
        event = self.event
        if event is None or self._event_wait is None:
            return
        await self._event_wait(event)
        if not self.fired:
            self.event = self._new_event()

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
