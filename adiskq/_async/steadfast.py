"""A wait that no cancellation cuts short, on asyncio: a push waiting for its batch, a call waiting
for its worker thread.

Its own module, imported by the asyncio side only: a process on Trio never imports asyncio.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["SteadfastFuture"]


class SteadfastFuture(asyncio.Future[None]):
    """A future whose waiters cancellation cannot cut short: ``cancel()`` refuses.

    A task cancelled while it awaits one (by asyncio's own ``task.cancel()`` or an anyio scope, which
    cancels the same way) is marked and gets its ``CancelledError`` only once the future is done
    (asyncio's ``Task.cancel`` cancels the awaited future if it can, and marks the task otherwise).
    So a push waiting for its batch learns the batch's outcome before any cancellation, and a batch's
    waiters cannot cancel the future they share. anyio's scopes do the same for their own
    cancellations only, at several times the cost of this wait (a scope entered and exited a push).
    """

    __slots__ = ()

    def cancel(self, msg: Any | None = None) -> bool:
        return False
