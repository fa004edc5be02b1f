"""asyncio's side of the event-loop interface (``event_loop.py``), built once a producer opens.

The cancellation check reads anyio's state synchronously: anyio's asyncio backend keeps each task's
innermost cancel scope, and the check walks the scopes as anyio does. anyio's public answer
(``anyio.current_effective_deadline() == -inf``: ``cancellation.scope_cancelled``) is the same
question asked slower: through ``checkpoint_if_cancelled`` it costs two coroutines,
``current_task()``, on Python 3.11 a ``getpid`` system call, and a ``WeakKeyDictionary`` lookup, a
large share of a push; this check, a fraction of that (measured: see benchmarks/RESULTS.md, section
"Figures the code relies on", F1). Where anyio's state is not found as expected, the public answer
is used instead; ``tests/async/test_cancellation_check.py`` holds the check to it in every
arrangement of scopes.

A blocking call handed to a worker thread (a batch's fdatasync, roll or large write) does not go to
``anyio.to_thread.run_sync``, which gives way to asyncio's own ``task.cancel()`` (the loop's
shutdown cancels every task, a batch's too) and returns while the thread still writes: it goes to
adiskq's own worker threads (not the loop's default executor, which the application may have made
small or keep busy) and is waited for with a ``SteadfastFuture``; a cancellation that came meanwhile
is asked for again once the call has returned.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeVar

import anyio

from .cancellation import scope_cancelled
from .event_loop import EventLoop
from .steadfast import SteadfastFuture

__all__ = ["asyncio_loop"]

T = TypeVar("T")

# The worker threads, made on first use. Each producer's limiter bounds its calls (4 at a time), so
# the pool is rarely full; a forked child makes its own (the parent's threads are not there).
_WORKERS: Final = 32
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def asyncio_loop() -> EventLoop:
    """The interface for the running asyncio loop (call it from one of its tasks)."""
    loop = asyncio.get_running_loop()

    def call_soon(callback: Callable[[], None]) -> None:
        loop.call_soon(callback)

    def call_soon_threadsafe(callback: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is left to wake
            loop.call_soon_threadsafe(callback)

    return EventLoop(
        "asyncio",
        cancel_pending=_cancel_check(loop) or scope_cancelled,
        loop_turn=_asyncio_turn,
        shielded_turn=_shielded_turn(),
        call_soon=call_soon,
        call_soon_threadsafe=call_soon_threadsafe,
        run_in_thread=_run_in_thread,
        new_batch_waiter=functools.partial(SteadfastFuture, loop=loop),
        shield=asyncio.shield,
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
    itself, and asyncio's own is asked for again with the task's count as it was (as ``_run_in_thread``
    does after its wait). anyio's shielded checkpoint (a cancel scope entered and left) costs a
    multiple of the turn itself (measured: see benchmarks/RESULTS.md, section "Figures the code
    relies on", F16)."""
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


async def _run_in_thread(function: Callable[[], T], limiter: anyio.CapacityLimiter) -> T:
    """``EventLoop.run_in_thread`` on asyncio (see the module)."""
    borrower = object()  # the token's holder: this call, whatever else the task holds
    await limiter.acquire_on_behalf_of(borrower)  # (cancelled here, nothing has started)
    try:
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(_worker_pool(), function)
        ended = SteadfastFuture(loop=loop)
        call.add_done_callback(lambda _: ended.set_result(None))
        try:
            await ended
        except asyncio.CancelledError:
            # The call has returned (the wait cannot end before): its outcome goes to the caller, and
            # the cancellation to the caller's next checkpoint. anyio delivers its scopes' again by
            # itself; asyncio's own is asked for again, its count left as it was.
            if not scope_cancelled():
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()
                task.cancel()
        return call.result()
    finally:
        limiter.release_on_behalf_of(borrower)


def _worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(_WORKERS, thread_name_prefix="adiskq-worker")
            pool = _pool
    return pool


def _forget_pool_in_child() -> None:
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)
