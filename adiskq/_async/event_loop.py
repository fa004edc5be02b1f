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
from collections.abc import Awaitable, Callable, Coroutine
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

    from .steadfast import SteadfastFuture

__all__ = ["EventLoop", "running_loop", "running_on_trio"]


class EventLoop:
    """What the producer asks of its event loop, each member a plain callable (no dispatch a call).

    ``cancel_pending()``: whether the calling task's next checkpoint would raise a cancellation
    (an anyio scope's, or Trio's). ``await loop_turn()``: the loop's other tasks run once; on asyncio
    a cancellation of the task may be delivered there, so the caller asks ``cancel_pending`` first
    and has written nothing. ``await shielded_turn()``: the same, delivering no cancellation (for a
    call that has written and must return). ``call_soon(callback)``: run ``callback`` at the loop's
    next turn (from the loop's thread).

    A lane's batches wait differently on each (``lane.py`` says why): on asyncio a task leads each
    batch (``start_task``) and its pushes await a future nothing cancels (``new_batch_waiter()``),
    where ``cancelled_errors`` may still arrive; on Trio a batch's first push leads it and the others
    park through ``lowlevel`` (``trio.lowlevel``) until it is finished. The other loop's members are
    None (and ``cancelled_errors`` empty). ``on_trio`` says which, for the code that runs a blocking
    call in a thread (``handoff.run_in_thread``)."""

    __slots__ = (
        "call_soon",
        "cancel_pending",
        "cancelled_errors",
        "loop_turn",
        "lowlevel",
        "name",
        "new_batch_waiter",
        "on_trio",
        "shielded_turn",
        "start_task",
    )

    def __init__(
        self,
        name: str,
        *,
        cancel_pending: Callable[[], bool],
        loop_turn: Callable[[], Awaitable[None]],
        shielded_turn: Callable[[], Awaitable[None]],
        call_soon: Callable[[Callable[[], None]], None],
        new_batch_waiter: Callable[[], SteadfastFuture] | None = None,
        start_task: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]] | None = None,
        cancelled_errors: tuple[type[BaseException], ...] = (),
        lowlevel: ModuleType | None = None,
    ) -> None:
        self.name = name
        self.on_trio = name == "trio"
        self.cancel_pending = cancel_pending
        self.loop_turn = loop_turn
        self.shielded_turn = shielded_turn
        self.call_soon = call_soon
        self.new_batch_waiter = new_batch_waiter
        self.start_task = start_task
        self.cancelled_errors = cancelled_errors
        self.lowlevel = lowlevel


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
