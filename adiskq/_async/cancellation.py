"""Cancellation for the producer: is one waiting for the running task (asked without awaiting
anything)? (The wait no cancellation cuts short, on asyncio, is ``steadfast.SteadfastFuture``.)

``push`` must raise if its task's cancel scope was cancelled before it started (it is a checkpoint),
but a push that goes inline never yields, so the question is asked on every push: through anyio's
``checkpoint_if_cancelled`` it cost 0.6-0.9 µs of a 5.6 µs push — two coroutines, ``current_task()``
(on asyncio a ``getpid`` system call on Python 3.11) and a ``WeakKeyDictionary`` lookup. The checks
here read the same state as anyio and Trio do, synchronously, in 0.1-0.2 µs; the caller awaits
anyio's real checkpoint only when one says a cancellation is waiting, so the exception and its
delivery are anyio's own.

They read private state (anyio's asyncio task states and scopes, Trio's cancel status); when that
is not found as expected the public ``current_effective_deadline() == -inf`` answers instead, which is
the same question asked slower. ``tests/async/test_cancellation_check.py`` holds each fast check to
anyio's public answer in every arrangement of scopes.
"""

from __future__ import annotations

import functools
import math
import sys
import types
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    import asyncio


def scope_cancelled() -> bool:
    """Whether an anyio cancel scope around the calling task is cancelled (anyio's public answer,
    slower than ``cancel_check``'s; it also tells an anyio scope's cancellation from asyncio's own)."""
    return anyio.current_effective_deadline() == -math.inf


def _asyncio_check() -> Callable[[], bool] | None:
    """anyio's asyncio backend keeps each task's innermost scope in ``_task_states[task]``; a scope
    is cancelled when ``_cancel_called``, and a shielded one stops the walk outwards."""
    import asyncio  # the loop is asyncio's, so asyncio is imported already

    try:
        from anyio._backends._asyncio import CancelScope, TaskState, _task_states
    except ImportError:  # pragma: no cover - an anyio that moved them
        return None
    if not all(hasattr(CancelScope, name) for name in ("_cancel_called", "_shield", "_parent_scope")):
        return None  # pragma: no cover - slots renamed
    if "cancel_scope" not in getattr(TaskState, "__slots__", ()):
        return None  # pragma: no cover
    current_task = _current_task_finder(asyncio.get_running_loop())
    # A task's TaskState lives as long as the task, so the last one looked up is kept (in the
    # closure's cells, read with a bytecode each): the WeakKeyDictionary's lookup is most of the
    # cost otherwise. Only the loop's own tasks are kept.
    last_task: Any = None
    last_state: Any = None

    def cancel_pending() -> bool:
        nonlocal last_task, last_state
        task = current_task()
        if task is not last_task:
            state = _task_states.get(task) if task is not None else None
            if state is None:
                return False  # a task that never entered an anyio scope cannot be cancelled by one
            last_task, last_state = task, state
        scope = last_state.cancel_scope
        while scope is not None:
            if scope._cancel_called:
                return True
            if scope._shield:
                return False
            scope = scope._parent_scope
        return False

    return cancel_pending


def _current_task_finder(loop: asyncio.AbstractEventLoop) -> Callable[[], asyncio.Task[Any] | None]:
    """``asyncio.current_task`` for one loop, minus its cost: without the loop it calls
    ``get_running_loop()`` (a ``getpid`` system call), and on Python 3.11 it is a Python function
    around ``_current_tasks.get(loop)``, which is called directly where it gives the same task."""
    import asyncio

    tasks = getattr(asyncio.tasks, "_current_tasks", None)
    if isinstance(tasks, dict) and tasks.get(loop) is asyncio.current_task():
        return functools.partial(tasks.get, loop)
    return functools.partial(asyncio.current_task, loop)  # pragma: no cover - a Python without it


def _trio_check() -> Callable[[], bool] | None:
    """Trio keeps the answer itself: the task's ``_cancel_status.effectively_cancelled``. The task
    is read where ``current_task()`` reads it (the run's thread-local context), a Python call less
    a push; through ``current_task()`` where that is not found as expected. (A compiled getter,
    ``functools.partial(operator.attrgetter(...), run_context)``, cost ~200 instructions more a
    push than this closure under callgrind.)"""
    import trio

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


def cancel_check() -> Callable[[], bool]:
    """A function for the running event loop that says whether the calling task's next checkpoint
    would raise a cancellation. Call it from a task of the loop it was made in."""
    check = _trio_check() if running_on_trio() else _asyncio_check()
    return check if check is not None else scope_cancelled


@types.coroutine
def _asyncio_turn() -> Generator[None, None, None]:
    """A bare yield: asyncio's task runs again at the loop's next turn (``asyncio.sleep(0)``
    without its two coroutines). A cancellation of the task is delivered here."""
    yield


def loop_turn() -> Callable[[], Awaitable[None]]:
    """For the running event loop: let the loop's other tasks run once, at the least cost. On
    asyncio a cancellation of the task may be delivered there, on Trio none is (its
    ``cancel_shielded_checkpoint``: Trio's cancellable ``checkpoint`` enters a cancel scope); the
    caller checks for one first (``cancel_check``) and writes nothing before the turn."""
    if running_on_trio():
        import trio

        return trio.lowlevel.cancel_shielded_checkpoint
    return _asyncio_turn


def shielded_turn() -> Callable[[], Awaitable[None]]:
    """For the running event loop: let the loop's other tasks run once, delivering no cancellation,
    at the least cost: for a call that has written and must return what it wrote. A cancellation that
    comes meanwhile is delivered at the caller's next checkpoint. On Trio that is Trio's own
    ``cancel_shielded_checkpoint``; on asyncio a bare yield whose ``CancelledError`` is put back:
    anyio delivers its scopes' again by itself, and asyncio's own is asked for again with the task's
    count as it was (as ``handoff.py`` does after its wait). anyio's shielded checkpoint (a cancel
    scope entered and left) cost more than twice the turn itself on asyncio."""
    if running_on_trio():
        import trio

        return trio.lowlevel.cancel_shielded_checkpoint
    import asyncio  # the loop is asyncio's, so asyncio is imported already

    cancelled_error = asyncio.CancelledError
    current_task = asyncio.current_task

    async def asyncio_shielded_turn() -> None:
        try:
            await _asyncio_turn()
        except cancelled_error:
            if not scope_cancelled():
                task = current_task()
                assert task is not None
                task.uncancel()
                task.cancel()

    return asyncio_shielded_turn


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
