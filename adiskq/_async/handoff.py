"""Run a short blocking call (a batch's fdatasync, roll or large write) in a worker thread, for a task
that must not be interrupted while it waits.

A sync batch hands its fdatasync to a thread once per batch, so the hand-off's own cost is paid by
every round of ``flush="sync"`` pushes. On Trio, ``anyio.to_thread.run_sync`` goes through
``trio.to_thread.run_sync``: a capacity limiter whose ``acquire`` yields a turn of the loop even when
a token is free, a copied context, a thread name formatted from the task's, the thread registered
for ``from_thread`` calls, two ``outcome`` wrappings. Here the same limiter token is taken without
waiting, the call goes to Trio's own thread cache (``start_thread_soon``), and the thread hands its
result back to the task with ``run_sync_soon(reschedule)``: one wake-up of the loop, as before, and
nothing else. In W3 (32 tasks pushing, ``benchmarks/RESULTS.md``) that took the process's CPU time
per push from ~15 to ~12.7 µs (~75 µs per batch of 32).

The wait cannot be aborted: a cancellation meanwhile is delivered at the caller's next checkpoint,
after the call has returned, so the caller always learns what the call did. On Trio that is
``wait_task_rescheduled`` without an abort (its caller, a batch's leader, runs in a shielded scope
anyway); when no limiter token is free there, it is ``anyio.to_thread.run_sync``, waiting for a token
as usual. On asyncio, where ``to_thread.run_sync`` gives way to asyncio's own ``task.cancel()`` (the
loop's shutdown cancels every task, a batch's too) and returns while the thread still writes, the call
goes to adiskq's own worker threads (not the loop's default executor, which the application may have
made small or keep busy) and is waited for with a ``SteadfastFuture``; a cancellation that came
meanwhile is asked for again once the call has returned. The call runs without the caller's context
variables: pass only calls that need none.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NoReturn, TypeVar

import anyio
import anyio.to_thread

from .cancellation import scope_cancelled

if TYPE_CHECKING:
    import concurrent.futures

    import outcome
    import trio.lowlevel

__all__ = ["cannot_abort", "run_in_thread"]

T = TypeVar("T")

# asyncio's worker threads, made on first use. Each producer's limiter bounds its calls (4 at a
# time), so the pool is rarely full; a forked child makes its own (the parent's threads are not there).
_WORKERS: Final = 32
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        import concurrent.futures  # asyncio imported it already

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


async def run_in_thread(function: Callable[[], T], limiter: anyio.CapacityLimiter, *, on_trio: bool) -> T:
    """``function()`` in a worker thread, holding one of ``limiter``'s tokens; its result or its error."""
    borrower = object()  # the token's holder: this call, whatever else the task holds
    if not on_trio:
        await limiter.acquire_on_behalf_of(borrower)  # (cancelled here, nothing has started)
        try:
            return await _run_on_asyncio(function)
        finally:
            limiter.release_on_behalf_of(borrower)
    try:
        limiter.acquire_on_behalf_of_nowait(borrower)
    except anyio.WouldBlock:
        return await anyio.to_thread.run_sync(function, limiter=limiter)
    try:
        return await _run_on_trio(function)
    finally:
        limiter.release_on_behalf_of(borrower)


async def _run_on_asyncio(function: Callable[[], T]) -> T:
    import asyncio  # the loop is asyncio's, so asyncio is imported already (Trio never imports it)

    from .steadfast import SteadfastFuture

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


async def _run_on_trio(function: Callable[[], T]) -> T:
    import trio
    import trio.lowlevel

    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def deliver(result: outcome.Outcome[T]) -> None:  # in the worker thread, once function returned
        with contextlib.suppress(trio.RunFinishedError):  # as Trio's own: a run that ended has no task to wake
            token.run_sync_soon(trio.lowlevel.reschedule, task, result)

    trio.lowlevel.start_thread_soon(function, deliver)
    result: T = await trio.lowlevel.wait_task_rescheduled(cannot_abort)
    return result


def cannot_abort(raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
    """For ``trio.lowlevel.wait_task_rescheduled``: the wait is not aborted; a cancellation meanwhile
    is delivered at the task's next checkpoint."""
    import trio.lowlevel

    return trio.lowlevel.Abort.FAILED
