"""Trio's side of the event-loop interface (``event_loop.py``), built once a producer opens.

Trio keeps the cancellation answer itself, in the task's ``_cancel_status.effectively_cancelled``;
the check reads it where ``trio.lowlevel.current_task()`` finds the task (the run's thread-local
context), a Python call less a push. Trio's public answer (``trio.current_effective_deadline() ==
-inf``) is the same question asked slower; where the state is not found as expected, the check
goes through ``current_task()``, or anyio's public answer. A turn of the loop is Trio's own
``cancel_shielded_checkpoint`` either way (Trio's cancellable checkpoint enters a cancel scope, and
Trio delivers no cancellation at a bare turn); a callback at the next turn is the run's token's
``run_sync_soon``, from any thread.

A blocking call handed to a worker thread (a sync batch's fdatasync, once per batch, so the hand-off's
own cost is paid by every round of ``flush="sync"`` pushes): ``anyio.to_thread.run_sync`` goes through
``trio.to_thread.run_sync``, a capacity limiter whose ``acquire`` yields a turn of the loop even when
a token is free, a copied context, a thread name formatted from the task's, the thread registered
for ``from_thread`` calls, two ``outcome`` wrappings. Here the same limiter token is taken without
waiting, the call goes to Trio's own thread cache (``start_thread_soon``), and the thread hands its
result back to the task with ``run_sync_soon(reschedule)``: one wake-up of the loop, and nothing
else (measured: benchmarks/RESULTS.md, W3). The wait is ``wait_task_rescheduled`` without an abort
(its caller, a batch's leader, runs in a shielded scope anyway); when no limiter token is free, it
is ``anyio.to_thread.run_sync``, waiting for a token as usual.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import anyio
import anyio.to_thread
import trio
import trio.lowlevel

from .cancellation import scope_cancelled
from .event_loop import EventLoop

if TYPE_CHECKING:
    import outcome

T = TypeVar("T")

__all__ = ["trio_loop"]


def trio_loop() -> EventLoop:
    """The interface for the running Trio loop (call it from one of its tasks)."""
    turn = trio.lowlevel.cancel_shielded_checkpoint
    token = trio.lowlevel.current_trio_token()

    def call_soon_threadsafe(callback: Callable[[], None]) -> None:
        with contextlib.suppress(trio.RunFinishedError):  # a run that ended has nobody to wake
            token.run_sync_soon(callback)

    return EventLoop(
        "trio",
        cancel_pending=_cancel_check() or scope_cancelled,
        loop_turn=turn,
        shielded_turn=turn,
        call_soon=token.run_sync_soon,
        call_soon_threadsafe=call_soon_threadsafe,
        run_in_thread=_run_in_thread,
        lowlevel=trio.lowlevel,
        cannot_abort=cannot_abort,
    )


async def _run_in_thread(function: Callable[[], T], limiter: anyio.CapacityLimiter) -> T:
    """``EventLoop.run_in_thread`` on Trio (see the module)."""
    borrower = object()  # the token's holder: this call, whatever else the task holds
    try:
        limiter.acquire_on_behalf_of_nowait(borrower)
    except anyio.WouldBlock:
        return await anyio.to_thread.run_sync(function, limiter=limiter)
    try:
        task = trio.lowlevel.current_task()
        token = trio.lowlevel.current_trio_token()

        def deliver(result: outcome.Outcome[T]) -> None:  # in the worker thread, once function returned
            with contextlib.suppress(trio.RunFinishedError):  # as Trio's own: a run that ended has no task to wake
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)

        trio.lowlevel.start_thread_soon(function, deliver)
        returned: T = await trio.lowlevel.wait_task_rescheduled(cannot_abort)
        return returned
    finally:
        limiter.release_on_behalf_of(borrower)


def cannot_abort(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
    """For ``trio.lowlevel.wait_task_rescheduled``: the wait is not aborted; a cancellation meanwhile
    is delivered at the task's next checkpoint."""
    return trio.lowlevel.Abort.FAILED


def _cancel_check() -> Callable[[], bool] | None:
    """The task's ``_cancel_status.effectively_cancelled``, the task read where ``current_task()``
    reads it. (A compiled getter, ``functools.partial(operator.attrgetter(...), run_context)``,
    cost more a push than this closure under callgrind: see benchmarks/RESULTS.md, section "Figures
    the code relies on", F9.)"""
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
