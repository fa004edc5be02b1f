"""asyncio's side of a consumer's waits (``event_loop.Waits``): a waiter's event is a bare future of
its loop, and the loop itself reads the inotify descriptor, in a callback.

The future rather than ``anyio.Event``: that wraps an ``asyncio.Event``, which makes its own future
per wait, a layer a wake-up pays for on its way to the task. The reading callback stays registered
from one wait to the next (``anyio.wait_readable`` adds and removes it every time, and wakes a task
that then reads), so a wake-up from the kernel costs the loop's own dispatch and one task step; it
goes once an event finds no task of the loop waiting. A wait's deadline is the waiter's loop timer
(``asyncio_deadlines.py``), not a cancel scope: entering and leaving one costs more than the rest of
the wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from .asyncio_deadlines import AsyncioDeadline

if TYPE_CHECKING:
    from .notify import Notifier
    from .wakeup import Waiter

__all__ = ["AsyncioWaits"]


class AsyncioWaits:
    """A waiter's waits in one asyncio loop."""

    __slots__ = ("asyncio_loop", "call_soon_threadsafe", "new_event")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.asyncio_loop: asyncio.AbstractEventLoop | None = loop
        self.new_event = loop.create_future
        self.call_soon_threadsafe: Callable[[Callable[[], object]], object] = loop.call_soon_threadsafe

    @staticmethod
    def set_event(waiter: Waiter) -> None:
        future: asyncio.Future[None] | None = waiter.event
        if future is not None and not future.done():  # done: set before, or cancelled with its waiting task
            future.set_result(None)

    @staticmethod
    def event_wait(event: asyncio.Future[None]) -> asyncio.Future[None]:
        return event  # a future is awaited itself

    async def wait(self, notifier: Notifier, waiter: Waiter, max_seconds: float, reads: bool) -> None:
        """``Notifier.wait`` in this loop. A cancelled wait ends as any asyncio await does."""
        # The wait is on the waiter's future itself: one wake or nudge ends it, and the caller
        # disarms (or arms again) before it waits again.
        event = waiter.event
        if not isinstance(event, asyncio.Future):
            return  # not armed: nothing to wait for
        # The deadline's timer nudges the waiter (ending the wait without a wake-up). It is the
        # waiter's, kept from one wait to the next: a wake-up has none to cancel.
        deadline = waiter.asyncio_deadline
        if deadline is None:
            loop = self.asyncio_loop
            assert loop is not None
            deadline = waiter.asyncio_deadline = AsyncioDeadline(loop)
        deadline.start(waiter, max_seconds)
        if not reads:
            await event
            return
        loop = self.asyncio_loop
        listener: _Listener | None = notifier.listeners.get(loop)  # type: ignore[assignment]
        if listener is None:
            listener = _Listener(notifier, loop)  # type: ignore[arg-type]
        listener.waiting += 1
        try:
            await event
        finally:
            listener.waiting -= 1


class _Listener:
    """The reading callback registered with one asyncio loop for one notifier, and how many of
    the loop's tasks wait. Only the loop's own thread counts its waits."""

    __slots__ = ("fd", "loop", "notifier", "waiting")

    def __init__(self, notifier: Notifier, loop: asyncio.AbstractEventLoop) -> None:
        """Register the reading callback with ``loop`` (from a task of that loop)."""
        self.notifier = notifier
        self.loop = loop
        self.fd = notifier.fd
        self.waiting = 0
        with notifier.lock:
            loop.add_reader(self.fd, self._readable)
            notifier.listeners[loop] = self

    def _readable(self) -> None:
        """The descriptor is readable: dispatch; stop listening if no task of the loop waits."""
        notifier = self.notifier
        notifier.dispatch()
        if self.waiting == 0 or not notifier.uses_inotify:
            self._stop()

    def _stop(self) -> None:
        notifier = self.notifier
        with notifier.lock:
            if notifier.listeners.get(self.loop) is self:
                del notifier.listeners[self.loop]
                self.loop.remove_reader(self.fd)

    def stop(self) -> None:
        """Unregister the callback, from any thread (the notifier closes its descriptor next: a
        loop left listening to a closed number would trip over the next file to get it)."""
        with contextlib.suppress(RuntimeError):  # the loop is closed: its registrations went with it
            if _running_loop() is self.loop:
                self._stop()
            else:
                self.loop.call_soon_threadsafe(self._stop)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
