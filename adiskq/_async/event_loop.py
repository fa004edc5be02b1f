"""The event loop a producer runs on, chosen once when it opens: one interface, an implementation each.

asyncio and Trio differ in what the producer's hot paths ask of them: whether a cancellation waits
for the running task (asked without awaiting, on every push), how to give the loop one turn at the
least cost (with a cancellation delivered there, or shielded from it), and how to run a callback at
the loop's next turn. Each is a member of ``EventLoop``; ``running_loop()`` asks once which loop
runs and builds its implementation (``asyncio_loop.py``, ``trio_loop.py``), so the code that uses
them never asks again. The implementations, and this module's question, are where ``_async`` may
import a loop (``tests/test_layers.py`` holds the rest of the package to that, with a list of the
modules not yet behind this interface).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

__all__ = ["EventLoop", "running_loop", "running_on_trio"]


class EventLoop:
    """What the producer asks of its event loop, each member a plain callable (no dispatch a call).

    ``cancel_pending()``: whether the calling task's next checkpoint would raise a cancellation
    (an anyio scope's, or Trio's). ``await loop_turn()``: the loop's other tasks run once; on asyncio
    a cancellation of the task may be delivered there, so the caller asks ``cancel_pending`` first
    and has written nothing. ``await shielded_turn()``: the same, delivering no cancellation (for a
    call that has written and must return). ``call_soon(callback)``: run ``callback`` at the loop's
    next turn (from the loop's thread)."""

    __slots__ = ("call_soon", "cancel_pending", "loop_turn", "name", "shielded_turn")

    def __init__(
        self,
        name: str,
        *,
        cancel_pending: Callable[[], bool],
        loop_turn: Callable[[], Awaitable[None]],
        shielded_turn: Callable[[], Awaitable[None]],
        call_soon: Callable[[Callable[[], None]], None],
    ) -> None:
        self.name = name
        self.cancel_pending = cancel_pending
        self.loop_turn = loop_turn
        self.shielded_turn = shielded_turn
        self.call_soon = call_soon


def running_loop() -> EventLoop:
    """The running event loop's implementation; call it from a task of that loop."""
    if running_on_trio():
        from .trio_loop import trio_loop

        return trio_loop()
    from .asyncio_loop import asyncio_loop

    return asyncio_loop()


def running_on_trio() -> bool:
    """Whether this runs in Trio's event loop (not asyncio's, nor outside any loop)."""
    trio = sys.modules.get("trio")  # never imported: not Trio (and Trio stays an optional extra)
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
