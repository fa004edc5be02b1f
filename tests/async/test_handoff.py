"""The batch's hand-off to a worker thread: the call's result or error, a limiter token held while it
runs, a wait for a token when none is free, and no abandoning on cancellation (a sync batch's
fdatasync must finish, and be reported, whatever happens to the leader's task meanwhile)."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from adiskq._async.cancellation import running_on_trio
from adiskq._async.handoff import run_in_thread

pytestmark = pytest.mark.anyio

WAIT_S = 10.0  # a bound on waits that end at once when all is well


async def test_the_call_runs_in_another_thread_holding_a_token_and_returns_its_result() -> None:
    limiter = anyio.CapacityLimiter(2)
    loop_thread = threading.get_ident()

    def call() -> tuple[int, int]:
        return threading.get_ident(), limiter.borrowed_tokens

    thread, borrowed = await run_in_thread(call, limiter, on_trio=running_on_trio())
    assert thread != loop_thread
    assert borrowed == 1
    assert limiter.borrowed_tokens == 0


async def test_the_calls_error_is_raised_and_its_token_returned() -> None:
    limiter = anyio.CapacityLimiter(1)

    def failing() -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):
        await run_in_thread(failing, limiter, on_trio=running_on_trio())
    assert limiter.borrowed_tokens == 0


async def test_with_no_free_token_the_call_waits_for_one() -> None:
    limiter = anyio.CapacityLimiter(1)
    ran = threading.Event()
    done = anyio.Event()

    async def call_when_free() -> None:
        await run_in_thread(ran.set, limiter, on_trio=running_on_trio())
        done.set()

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            await limiter.acquire()
            group.start_soon(call_when_free)
            await anyio.wait_all_tasks_blocked()
            assert not ran.is_set()  # waiting for the token this task holds
            limiter.release()
            await done.wait()
    assert ran.is_set()
    assert limiter.borrowed_tokens == 0


async def test_a_cancellation_meanwhile_lets_the_call_finish_and_is_delivered_after() -> None:
    limiter = anyio.CapacityLimiter(1)
    started, release = threading.Event(), threading.Event()
    returned: list[str] = []

    def slow() -> str:
        started.set()
        assert release.wait(WAIT_S)
        return "synced"

    async def cancel_once_started(scope: anyio.CancelScope) -> None:
        assert await anyio.to_thread.run_sync(started.wait, WAIT_S)
        scope.cancel()
        release.set()

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            with anyio.CancelScope() as scope:
                group.start_soon(cancel_once_started, scope)
                returned.append(await run_in_thread(slow, limiter, on_trio=running_on_trio()))
                await anyio.lowlevel.checkpoint()  # the cancellation is delivered here
                returned.append("not cancelled")
    assert returned == ["synced"]
    assert scope.cancelled_caught
    assert limiter.borrowed_tokens == 0
