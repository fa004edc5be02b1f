"""Waiting for a lock of ``locks/`` from a task: bounded by the producer's ``lock_timeout`` and cut
short by the task's cancel scope, on asyncio and Trio alike.

The blocking ``flock`` runs in the lock's own wait thread (``flocks.LockWait``); the task sleeps on
an ``anyio.Event`` the thread sets through the event loop's thread-safe entry (``EventLoop``). A task that gives up
(timed out or cancelled) leaves the thread blocked, and the thread lets go of a lock it takes once
nobody waits for it: a stopped holder costs a thread, never a lock held by nobody.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import anyio

from .._storage.flocks import FileLock

__all__ = ["take_lock"]


async def take_lock(
    lock: FileLock, timeout_seconds: float, call_soon_threadsafe: Callable[[Callable[[], None]], None]
) -> None:
    """Take ``lock`` (held by this process's ``FileLock`` once this returns), waiting at most
    ``timeout_seconds`` (``LockTimeoutError`` naming the holder), cancellable at any point.
    ``call_soon_threadsafe`` is the event loop's (``EventLoop.call_soon_threadsafe``): how the wait
    thread wakes the task."""
    started = time.monotonic()
    deadline = started + timeout_seconds
    while not (lock.held or lock.try_acquire()):
        if time.monotonic() >= deadline:
            raise lock.timeout_error(time.monotonic() - started)
        wait = lock.wait()
        woken = anyio.Event()
        try:
            wait.on_done(functools.partial(call_soon_threadsafe, woken.set))
            with anyio.move_on_after(deadline - time.monotonic()):
                await woken.wait()
            if wait.claim():
                return
        finally:
            wait.leave()
        # Timed out (raised above at the loop's top), or another task of this process claimed the
        # lock this wait took and has let it go since: wait again.
