"""The deadline of a waiter's waits on asyncio, kept by one loop timer that outlives each wait.

A consumer's wait on asyncio ends at its deadline (mostly the backup poll's second) by a loop timer.
A timer made for every wait has to be cancelled at every wake-up: ``TimerHandle.cancel``, three calls
of asyncio's Python between the kernel's wake-up and the message, on a CPU that slept and runs them
cold (``benchmarks/wakeup_breakdown.py``). So a waiter keeps one timer in its loop: each wait sets
its deadline, and the timer, when it fires, ends the wait whose deadline has come, or sleeps on until
the current wait's deadline, or (no wait going on) goes. A wait whose deadline comes before the
timer's replaces it; that cancel is before the sleep, off the wake-up's way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import asyncio

    from .wakeup import Waiter

__all__ = ["AsyncioDeadline"]

# A timer may fire a hair before its time (the loop runs those due within its clock's resolution):
# a deadline that close has come.
_EARLY_SECONDS: Final = 1e-6


class AsyncioDeadline:
    """The deadline of one waiter's current wait in one asyncio loop, and the timer that keeps it."""

    __slots__ = ("_loop", "_timer", "_when")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._when = 0.0  # the current wait's deadline, on the loop's clock
        # The waiter is the timer's argument, not held here: the waiter holds this object.
        self._timer: asyncio.TimerHandle | None = None

    def start(self, waiter: Waiter, max_seconds: float) -> None:
        """``waiter``'s wait beginning now (it is armed) ends ``max_seconds`` from now unless woken first."""
        loop = self._loop
        when = loop.time() + max_seconds
        self._when = when
        timer = self._timer
        if timer is not None:
            if timer.when() <= when:
                return  # it fires first, and sleeps on until ``when``
            timer.cancel()
        self._timer = loop.call_at(when, self._fire, waiter)

    def _fire(self, waiter: Waiter) -> None:
        self._timer = None
        if waiter.fired or waiter.event is None or waiter.asyncio_deadline is not self:
            return  # no wait of this loop's is going on: the next one makes a timer again
        when = self._when
        if when > self._loop.time() + _EARLY_SECONDS:
            self._timer = self._loop.call_at(when, self._fire, waiter)  # this wait began after the timer was set
        else:
            waiter.nudge()
