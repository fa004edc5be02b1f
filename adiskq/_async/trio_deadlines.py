"""The deadlines of waits on Trio, kept by one task per run instead of a cancel scope per wait.

asyncio ends a consumer's wait at its deadline with a loop timer (``loop.call_later``). Trio has no
timer callbacks, only cancel scopes, and leaving one is ~20 calls of Trio's Python on the way from
the kernel's wake-up to the message, run cold on a CPU that slept
(``benchmarks/wakeup_breakdown.py``; measured: see benchmarks/RESULTS.md, sections "W5 on Trio" and
"Figures the code relies on", F8). So each Trio run gets one system task that sleeps until the
earliest deadline of the waits registered with it and expires those whose deadline passed
(``Waiter.expire``). A wait that ends sooner just leaves the set; the task, woken for a deadline
nobody holds any more, sleeps again until the next one. A deadline is mostly the backup poll's
second, so it wakes about once a second while consumers wait.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trio

    from .wakeup import Waiter

__all__ = ["TrioDeadlines"]


class TrioDeadlines:
    """The deadlines of one Trio run's waits, and the system task that keeps them."""

    __slots__ = ("_next", "_scope", "_waits")

    def __init__(self) -> None:
        self._waits: dict[Waiter, float] = {}
        self._next = math.inf  # the earliest deadline the keeper knows of (some may have left)
        self._scope: trio.CancelScope | None = None  # the keeper's sleep, while it sleeps

    @classmethod
    def start(cls) -> TrioDeadlines:
        """New deadlines for the current Trio run, and their keeper started as a system task."""
        import trio.lowlevel

        deadlines = cls()
        trio.lowlevel.spawn_system_task(deadlines._keep, name="adiskq: the deadlines of waits")
        return deadlines

    def add(self, waiter: Waiter, deadline: float) -> None:
        """Expire ``waiter``'s wait at ``deadline`` (Trio's clock) unless ``discard`` comes first."""
        self._waits[waiter] = deadline
        if deadline < self._next:
            self._next = deadline
            scope = self._scope
            if scope is not None:
                scope.deadline = deadline

    def discard(self, waiter: Waiter) -> None:
        """The wait ended: forget its deadline."""
        self._waits.pop(waiter, None)

    async def _keep(self) -> None:
        import trio

        while True:
            with trio.CancelScope(deadline=self._next) as scope:
                self._scope = scope
                await trio.sleep_forever()
            # Nothing awaits from here to the next sleep: no wait is added meanwhile.
            self._scope = None
            now = trio.current_time()
            upcoming = math.inf
            for waiter, deadline in list(self._waits.items()):
                if deadline <= now:
                    del self._waits[waiter]
                    waiter.expire()
                elif deadline < upcoming:
                    upcoming = deadline
            self._next = upcoming
