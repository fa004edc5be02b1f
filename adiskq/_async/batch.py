"""A lane's batch: the pushes committed together, and how they wait for it on each event loop.

Pushes that join a batch share one write a file (and one fsync with ``flush="sync"``); the lane
(``lane.py``) forms the batch, leads it and commits it. The batch holds what its pushes gave (one
run of records, written as it is, or the runs of several gathered in one) and what they wait on: on asyncio a
``SteadfastFuture`` (a wait nothing cancels), on Trio an ``anyio.Event`` for the leader's
predecessors and the parked follower tasks, rescheduled when it is finished. What differs between
the loops comes from the lane's ``EventLoop`` (the future's ``shield``, Trio's ``reschedule``), so
this module imports neither loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from .._sansio.entries import Run
    from .steadfast import SteadfastFuture

__all__ = ["Batch"]


class Batch:
    """Pushes committed together: they share one write per file (and one fsync in sync mode)."""

    __slots__ = (
        "committed",
        "done",
        "error",
        "finished",
        "first_offset",
        "followers",
        "gathered",
        "leader",
        "led",
        "reschedule",
        "run",
        "shield",
        "waiter",
    )

    def __init__(
        self,
        waiter: SteadfastFuture | None = None,
        *,
        shield: Callable[[SteadfastFuture], Awaitable[None]] | None = None,
        reschedule: Callable[[Any], None] | None = None,
    ) -> None:
        """On asyncio: the ``waiter`` its pushes await, and how a cancellable wait ``shield``s it;
        on Trio: how a parked follower task is ``reschedule``d."""
        # What the batch writes: the run its first write gave, as it is, while it is alone (a Kafka
        # Produce's batch, a push_many share); once another joins, a RecordRun of the batch's own
        # that gathers them all (``gathered``), which later runs extend (``Lane.enqueue``).
        self.run: Run | None = None
        self.gathered = False
        # Set when the batch is finished: on asyncio the future its pushes wait for, on Trio an Event.
        self.waiter = waiter
        self.shield = shield
        self.reschedule = reschedule
        self.done: anyio.Event | None = anyio.Event() if waiter is None else None
        self.finished = False  # read without a call on Trio's follower path
        self.first_offset = -1
        self.error: BaseException | None = None
        # With an error: how many of the batch's first records were committed all the same (an
        # index write that failed part-way keeps the entries readers could have seen).
        self.committed = 0
        self.led = False  # Trio: a push has taken the lead of this batch (on asyncio, its task leads it)
        self.followers: list[Any] = []  # Trio's pushes (their tasks) waiting for it (Lane.complete)
        self.leader: Any = None  # asyncio: the task leading it (held, or it may be collected)

    def finish(self) -> None:
        """The batch is committed or failed: wake every push waiting for it."""
        self.finished = True
        if self.waiter is not None:
            self.waiter.set_result(None)
            return
        assert self.done is not None
        self.done.set()
        if self.followers:  # only Trio's pushes are followers (see Lane.complete)
            reschedule = self.reschedule
            assert reschedule is not None
            for task in self.followers:
                reschedule(task)
            self.followers.clear()

    async def wait(self) -> None:
        """Wait until the batch is finished; unlike a push's wait, this one can be cancelled."""
        if self.waiter is not None:  # a waiter is a future on asyncio only
            assert self.shield is not None
            await self.shield(self.waiter)
        else:
            assert self.done is not None
            await self.done.wait()
