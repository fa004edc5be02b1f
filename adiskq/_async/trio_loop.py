"""Trio's side of the event-loop interface (``event_loop.py``), built once a producer opens.

Trio keeps the cancellation answer itself, in the task's ``_cancel_status.effectively_cancelled``;
the check reads it where ``trio.lowlevel.current_task()`` finds the task (the run's thread-local
context), a Python call less a push. Trio's public answer (``trio.current_effective_deadline() ==
-inf``) is the same question asked slower; where the state is not found as expected, the check
goes through ``current_task()``, or anyio's public answer. A turn of the loop is Trio's own
``cancel_shielded_checkpoint`` either way (Trio's cancellable checkpoint enters a cancel scope, and
Trio delivers no cancellation at a bare turn); a callback at the next turn is the run's token's
``run_sync_soon``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import trio
import trio.lowlevel

from .cancellation import scope_cancelled
from .event_loop import EventLoop

__all__ = ["trio_loop"]


def trio_loop() -> EventLoop:
    """The interface for the running Trio loop (call it from one of its tasks)."""
    turn = trio.lowlevel.cancel_shielded_checkpoint
    return EventLoop(
        "trio",
        cancel_pending=_cancel_check() or scope_cancelled,
        loop_turn=turn,
        shielded_turn=turn,
        call_soon=trio.lowlevel.current_trio_token().run_sync_soon,
        lowlevel=trio.lowlevel,
    )


def _cancel_check() -> Callable[[], bool] | None:
    """The task's ``_cancel_status.effectively_cancelled``, the task read where ``current_task()``
    reads it. (A compiled getter, ``functools.partial(operator.attrgetter(...), run_context)``,
    cost ~200 instructions more a push than this closure under callgrind.)"""
    task = trio.lowlevel.current_task()
    status = getattr(task, "_cancel_status", None)
    if not isinstance(getattr(status, "effectively_cancelled", None), bool):
        return None  # pragma: no cover - a Trio that renamed it
    run_context: Any = getattr(sys.modules.get("trio._core._run"), "GLOBAL_RUN_CONTEXT", None)
    if run_context is not None and getattr(run_context, "task", None) is task:

        def cancel_pending() -> bool:
            cancelled: bool = run_context.task._cancel_status.effectively_cancelled
            return cancelled

        return cancel_pending
    current_task = trio.lowlevel.current_task  # pragma: no cover - as above

    def cancel_pending_slower() -> bool:  # pragma: no cover - as above
        return current_task()._cancel_status.effectively_cancelled

    return cancel_pending_slower
