"""Connection deadlines, kept by one watcher for the whole gateway instead of a timer per wait.

A connection arms its ``Deadline`` before each wait on its client (the next request: the idle
timeout; the rest of a frame, or an answer the client does not take: the request timeout) and
disarms it when the wait returns: two attribute writes, where entering and leaving a deadline scope
per wait cost tens of microseconds a request. One task (``Deadlines.run``) looks at every armed
deadline once a ``tick`` (a quarter of the shortest timeout, at most a second) and cancels the scope
of a connection whose time is up; so a deadline fires up to one tick late.

A wait that returns as its deadline is cancelled is not continued: ``disarm`` reports it, and the
connection stops before awaiting anything else (the cancellation would otherwise land in the next
request's handling).
"""

from __future__ import annotations

import math
import time
from typing import Final, Literal

import anyio

__all__ = ["Deadline", "Deadlines"]

_MAX_TICK: Final = 1.0  # seconds between looks at the deadlines, at most
_TICKS_PER_TIMEOUT: Final = 4  # and at least this many looks within the shortest timeout

Expiry = Literal["idle", "stalled", "closing"]


class Deadline:
    """One connection's deadline; ``scope`` is what the watcher cancels (the connection runs in it)."""

    __slots__ = ("at", "expired", "idle", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.at = math.inf  # time.monotonic() by which the current wait must return
        self.idle = False  # waiting for a next request (the gateway's shutdown ends such waits)
        self.expired: Expiry | None = None

    def arm(self, seconds: float, *, idle: bool) -> None:
        """Before a wait on the client: it must return within ``seconds``."""
        self.at = time.monotonic() + seconds
        self.idle = idle

    def disarm(self) -> bool:
        """After the wait; True when the deadline expired meanwhile (stop: the scope is cancelled)."""
        self.at = math.inf
        self.idle = False
        return self.expired is not None

    def expire(self, why: Expiry) -> None:
        """Cancel the connection's wait (and the connection), saying why."""
        self.expired = why
        self.scope.cancel()


class Deadlines:
    """Every connection's deadline, and the task that enforces them."""

    def __init__(self, shortest_timeout: float) -> None:
        self.tick = min(_MAX_TICK, shortest_timeout / _TICKS_PER_TIMEOUT)
        self._watched: set[Deadline] = set()

    def watch(self) -> Deadline:
        """A new connection's deadline, watched until ``forget``."""
        deadline = Deadline()
        self._watched.add(deadline)
        return deadline

    def forget(self, deadline: Deadline) -> None:
        """Stop watching a closed connection's deadline."""
        self._watched.discard(deadline)

    def end_idle(self) -> None:
        """End every connection waiting for its next request (the gateway is closing)."""
        for deadline in list(self._watched):
            if deadline.idle:
                deadline.expire("closing")

    async def run(self) -> None:
        """Cancel the connections whose deadline has passed, every ``tick``, until cancelled."""
        while True:
            await anyio.sleep(self.tick)
            now = time.monotonic()
            for deadline in list(self._watched):
                if deadline.at <= now:
                    deadline.expire("idle" if deadline.idle else "stalled")
