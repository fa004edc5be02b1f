"""Trio's side of a consumer's waits (``event_loop.Waits``): a waiter's event is a ``trio.Event``,
and one waiting task of the run reads the inotify descriptor for all of them.

Trio's own ``Event`` and ``wait_readable`` rather than anyio's, and no cancel scope per wait: each is
a layer of Python on the way from the kernel's wake-up to the task. The deadlines are kept by one
system task per run (``trio_deadlines.py``). The reading task (``trio.lowlevel.wait_readable``),
when it stops waiting, hands the reading over to another waiting task of its run; when it is the
only one waiting, it takes the wake-up at once and the events are read before a consumer arms again
(``Notifier.read_unread``), off the message's way. Its deadline, and a direct wake
(``wakeup.notify``, another loop's reader), end its ``wait_readable`` with ``notify_closing`` (the
descriptor stays open: Trio only forgets its registration, and the next wait makes it again).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio.lowlevel
import trio
import trio.lowlevel

from .trio_deadlines import TrioDeadlines

if TYPE_CHECKING:
    from .event_loop import AsyncioLoop
    from .notify import Notifier
    from .wakeup import Waiter

__all__ = ["TrioWaits"]


@dataclasses.dataclass(slots=True)
class _TrioRun:
    """One Trio run's waits: which waiting task reads the inotify descriptor, and their deadlines."""

    deadlines: TrioDeadlines
    waiting: list[Waiter] = dataclasses.field(default_factory=list)
    reader: Waiter | None = None


_trio_run: anyio.lowlevel.RunVar[_TrioRun] = anyio.lowlevel.RunVar("adiskq_trio_waits")


class TrioWaits:
    """A waiter's waits in one Trio run."""

    __slots__ = ("call_soon_threadsafe",)

    asyncio_loop: AsyncioLoop | None = None
    new_event = trio.Event
    event_wait = staticmethod(trio.Event.wait)

    def __init__(self, token: object) -> None:
        assert isinstance(token, trio.lowlevel.TrioToken), "a native token is an asyncio loop or Trio's"
        self.call_soon_threadsafe: Callable[[Callable[[], object]], object] = token.run_sync_soon

    @staticmethod
    def set_event(waiter: Waiter) -> None:
        event: trio.Event | None = waiter.event
        if event is not None:
            event.set()

    async def wait(self, notifier: Notifier, waiter: Waiter, max_seconds: float, reads: bool) -> None:
        """``Notifier.wait`` in this run."""
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
        fd = notifier.fd
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
                    notifier.unread = True
                    waiter.take_wakeup()
                else:
                    notifier.dispatch()
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
