"""Test support: wait until every other task of the event loop sleeps, exactly, on both backends.

``anyio.wait_all_tasks_blocked()`` samples on asyncio: it looks at each task's future and, when one
is finished (its task is woken and has not run yet), sleeps 0.1 s and looks again. A task a timer
wakes every 0.1 s / n, such as a consumer polling every 50 ms, is then woken in the very loop
iteration that ends the sample's sleep (epoll rounds timeouts up to whole milliseconds, so both
timers fall due together, and the sample's runs first), look after look: the wait goes on for
seconds, or for ever, although that task sleeps on a pending future all the time between two
polls. Here a woken task is let run instead (one turn of the loop), and the wait ends once every
task sleeps on a pending future. Trio's own wait, run by its scheduler, is exact already.
"""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel


async def wait_all_tasks_blocked() -> None:
    """Until every other task of this event loop sleeps on something not yet done."""
    if not isinstance(anyio.lowlevel.current_token().native_token, asyncio.AbstractEventLoop):
        await anyio.wait_all_tasks_blocked()
        return
    this_task = asyncio.current_task()
    await asyncio.sleep(0)
    # No event says "every task sleeps": the scheduler's state is looked at once a turn of the loop,
    # in which the tasks woken run until they sleep again.
    while not all(_sleeps(task) for task in asyncio.all_tasks() if task is not this_task):  # noqa: ASYNC110
        await asyncio.sleep(0)


def _sleeps(task: asyncio.Task[object]) -> bool:
    """True when ``task`` waits on a future that is not done (None: it is runnable, or running)."""
    waiter: asyncio.Future[object] | None = getattr(task, "_fut_waiter", None)
    return waiter is not None and not waiter.done()
