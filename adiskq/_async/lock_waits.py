"""Waiting for a lock of ``locks/`` from a task: bounded by the producer's ``lock_timeout`` and cut
short by the task's cancel scope, on asyncio and Trio alike.

The blocking ``flock`` runs in the lock's own wait thread (``flocks.LockWait``); the task sleeps on
an ``anyio.Event`` the thread sets through the event loop's thread-safe entry. A task that gives up
(timed out or cancelled) leaves the thread blocked, and the thread lets go of a lock it takes once
nobody waits for it: a stopped holder costs a thread, never a lock held by nobody.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable

import anyio

from .._storage.flocks import FileLock
from .event_loop import running_on_trio

__all__ = ["take_lock"]


def _thread_safe_call_soon() -> Callable[[Callable[[], None]], None]:
    """Run a callback in the running event loop's thread, from any thread; a loop that has ended
    meanwhile has nobody left to wake, so the call is then dropped."""
    if running_on_trio():
        import trio

        token = trio.lowlevel.current_trio_token()

        def call_trio(callback: Callable[[], None]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(callback)

        return call_trio
    import asyncio  # the loop is asyncio's, so asyncio is imported already (Trio never imports it)

    loop = asyncio.get_running_loop()

    def call_asyncio(callback: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed
            loop.call_soon_threadsafe(callback)

    return call_asyncio


async def take_lock(lock: FileLock, timeout_seconds: float) -> None:
    """Take ``lock`` (held by this process's ``FileLock`` once this returns), waiting at most
    ``timeout_seconds`` (``LockTimeoutError`` naming the holder), cancellable at any point."""
    started = time.monotonic()
    deadline = started + timeout_seconds
    call_soon: Callable[[Callable[[], None]], None] | None = None
    while not (lock.held or lock.try_acquire()):
        if time.monotonic() >= deadline:
            raise lock.timeout_error(time.monotonic() - started)
        if call_soon is None:
            call_soon = _thread_safe_call_soon()
        wait = lock.wait()
        woken = anyio.Event()
        try:
            wait.on_done(functools.partial(call_soon, woken.set))
            with anyio.move_on_after(deadline - time.monotonic()):
                await woken.wait()
            if wait.claim():
                return
        finally:
            wait.leave()
        # Timed out (raised above at the loop's top), or another task of this process claimed the
        # lock this wait took and has let it go since: wait again.
