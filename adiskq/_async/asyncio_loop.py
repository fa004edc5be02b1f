"""asyncio's side of the event-loop interface (``event_loop.py``), built once a producer opens.

The cancellation check reads anyio's state synchronously: anyio's asyncio backend keeps each task's
innermost cancel scope, and the check walks the scopes as anyio does. anyio's public answer
(``anyio.current_effective_deadline() == -inf``: ``cancellation.scope_cancelled``) is the same
question asked slower: through ``checkpoint_if_cancelled`` it cost 0.6-0.9 µs of a 5.6 µs push (two
coroutines, ``current_task()``, on Python 3.11 a ``getpid`` system call, and a ``WeakKeyDictionary``
lookup), this check 0.1-0.2 µs. Where anyio's state is not found as expected, the public answer is
used instead; ``tests/async/test_cancellation_check.py`` holds the check to it in every arrangement
of scopes.
"""

from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from .cancellation import scope_cancelled
from .event_loop import EventLoop
from .steadfast import SteadfastFuture

__all__ = ["asyncio_loop"]


def asyncio_loop() -> EventLoop:
    """The interface for the running asyncio loop (call it from one of its tasks)."""
    loop = asyncio.get_running_loop()

    def call_soon(callback: Callable[[], None]) -> None:
        loop.call_soon(callback)

    return EventLoop(
        "asyncio",
        cancel_pending=_cancel_check(loop) or scope_cancelled,
        loop_turn=_asyncio_turn,
        shielded_turn=_shielded_turn(),
        call_soon=call_soon,
        new_batch_waiter=functools.partial(SteadfastFuture, loop=loop),
        start_task=loop.create_task,
        cancelled_errors=(asyncio.CancelledError,),
    )


def _cancel_check(loop: asyncio.AbstractEventLoop) -> Callable[[], bool] | None:
    """anyio's asyncio backend keeps each task's innermost scope in ``_task_states[task]``; a scope
    is cancelled when ``_cancel_called``, and a shielded one stops the walk outwards."""
    try:
        from anyio._backends._asyncio import CancelScope, TaskState, _task_states
    except ImportError:  # pragma: no cover - an anyio that moved them
        return None
    if not all(hasattr(CancelScope, name) for name in ("_cancel_called", "_shield", "_parent_scope")):
        return None  # pragma: no cover - slots renamed
    if "cancel_scope" not in getattr(TaskState, "__slots__", ()):
        return None  # pragma: no cover
    current_task = _current_task_finder(loop)
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
    tasks = getattr(asyncio.tasks, "_current_tasks", None)
    if isinstance(tasks, dict) and tasks.get(loop) is asyncio.current_task():
        return functools.partial(tasks.get, loop)
    return functools.partial(asyncio.current_task, loop)  # pragma: no cover - a Python without it


@types.coroutine
def _asyncio_turn() -> Generator[None, None, None]:
    """A bare yield: asyncio's task runs again at the loop's next turn (``asyncio.sleep(0)``
    without its two coroutines). A cancellation of the task is delivered here."""
    yield


def _shielded_turn() -> Callable[[], Awaitable[None]]:
    """A bare yield whose ``CancelledError`` is put back: anyio delivers its scopes' again by
    itself, and asyncio's own is asked for again with the task's count as it was (as ``handoff.py``
    does after its wait). anyio's shielded checkpoint (a cancel scope entered and left) cost more
    than twice the turn itself."""
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
