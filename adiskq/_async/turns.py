"""A shared producer's turn at writing (``locks/turn``), and the looks at its lanes' partition locks.

Shared producers (``shared=True``) take turns so that each writes every partition at full speed
while the turn is its own; ``lane.py`` says how a lane takes and keeps a partition's lock within
the turn. The looks run at the event loop's next turn, one callback for all the lanes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio

from .._storage.flocks import SHARED_LOCK_TIMEOUT_SECONDS, FileLock
from .lock_waits import take_lock

if TYPE_CHECKING:
    from .lane import Lane

__all__ = ["PROBE_SECONDS", "TURN_MIN_SECONDS", "Turns"]

logger: Final = logging.getLogger("adiskq.producer")

# How long a shared producer keeps its turn at writing once another producer waits for it: long
# enough that a turn covers many pushes (handing it over costs system calls and waking a process),
# short enough that the others wait little.
TURN_MIN_SECONDS: Final = 0.005
# How often, at most, a holder asks whether anyone is queued for a lock it holds (first asked
# TURN_MIN_SECONDS after taking it). Asking is two ``flock`` calls on the lock's queue; asked at every
# turn of the loop (every 32 pushes) for the turn and each partition, four writer processes made
# about 4,200 such looks per 30,000 pushes each, now about 1,000.
PROBE_SECONDS: Final = 0.0005


class Turns:
    """A shared producer's turn at writing, and the looks at its lanes' locks.

    Shared producers take turns: a producer takes ``locks/turn`` before any partition's lock, and
    lets go of it once none of its lanes holds one. Without it, producers pushing to every partition
    would each hold some partitions and wait for the others' (a process wake-up each time); with it,
    the producer whose turn it is writes every partition at full speed, and hands the turn over when
    another waits and it has had it ``TURN_MIN_SECONDS``. Writers that take partitions without a turn
    (Spark, the CLI) are served by the partitions' own queues.

    The looks run at the event loop's next turn: one callback for all the lanes of a producer
    (Trio's ``run_sync_soon`` costs a system call each).
    """

    def __init__(
        self,
        lock: FileLock,
        call_soon: Callable[[Callable[[], None]], None],
        call_soon_threadsafe: Callable[[Callable[[], None]], None],
        wait_seconds: float = SHARED_LOCK_TIMEOUT_SECONDS,
    ) -> None:
        self.lock = lock
        self.wait_seconds = wait_seconds  # the bound of every wait for a lock (lock_timeout)
        # How a lock's wait thread wakes a waiting task (the event loop's, from any thread).
        self.call_soon_threadsafe = call_soon_threadsafe
        self.lanes: list[Lane] = []
        self._call_soon = call_soon
        self._due: list[Lane] = []
        self._scheduled = False
        self._probe_at = 0.0  # when the turn's queue is next looked at
        self.pushing = 0  # the producer's push_many calls under way (their lanes are not idle)
        self._taking = anyio.Lock()
        # Handing the turn over: no lane takes a partition's lock until the turn was let go.
        self._handing_over = False
        self._let_go = anyio.Event()
        # Called each time the turn is taken: the disk guard measures again (others wrote meanwhile).
        self.on_taken: Callable[[], None] | None = None

    def try_take(self) -> bool:
        """Take the turn if it is free now (or already ours and not being handed over)."""
        if self._handing_over:
            return False
        if self.lock.held:
            return True
        if not self.lock.try_acquire():
            return False
        self._taken()
        return True

    async def take(self) -> None:
        """Take the turn, waiting for it at most ``wait_seconds`` (``LockTimeoutError``)."""
        while self._handing_over:
            await self._let_go.wait()
        if self.lock.held:
            return
        async with self._taking:  # one waiter per producer
            if self.lock.held:
                return
            try:
                await take_lock(self.lock, self.wait_seconds, self.call_soon_threadsafe)
            except BaseException:
                self._schedule()  # a look lets go of a turn taken as the wait was given up
                raise
            self._taken()

    def _taken(self) -> None:
        self._probe_at = time.monotonic() + TURN_MIN_SECONDS
        self._schedule()
        if self.on_taken is not None:
            self.on_taken()

    def yielding(self) -> bool:
        """True while the turn is being handed over: another producer waits for it and this one has
        had it long enough. The lanes then let go of their partitions, and the turn goes with the last."""
        if self._handing_over:
            return True
        if not self.lock.held:
            return False
        now = time.monotonic()
        if now < self._probe_at:
            return False
        self._probe_at = now + PROBE_SECONDS
        if self.lock.contended():
            self._handing_over = True
            self._let_go = anyio.Event()
            self._schedule()
            return True
        return False

    def add(self, lane: Lane) -> None:
        """Look at this lane's lock at the loop's next turn."""
        self._due.append(lane)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled:
            self._call_soon(self._run)
            self._scheduled = True

    def _run(self) -> None:
        """The look at the loop's turn. It must not raise: a look cut short would leave a lock held
        with no look to come (each is scheduled once), and every other writer waiting for it; Trio
        would also end the run. So a lane whose look fails lets go, and the error is logged."""
        self._scheduled = False
        due, self._due = self._due, []
        try:
            yielding = self.yielding() if due else False
        except Exception:
            logger.exception("adiskq: the look at the turn lock failed; letting go")
            yielding = True
        for lane in due:
            try:
                lane.look_at_lock(yielding)
            except Exception:
                logger.exception("adiskq: partition %d: the look at its lock failed; letting go", lane.partition_number)
                lane.release_quietly()
        if self.lock.held and not any(lane.busy for lane in self.lanes):
            self.release()

    def release(self) -> None:
        """Let go of the turn (once no lane holds a partition's lock, and on close)."""
        self.lock.release()
        if self._handing_over:
            self._handing_over = False
            self._let_go.set()
