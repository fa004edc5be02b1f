"""The batch's hand-off to a worker thread (``EventLoop.run_in_thread``, asyncio's and Trio's): the
call's result or error, a limiter token held while it runs, a wait for a token when none is free,
and no abandoning on cancellation (a sync batch's fdatasync must finish, and be reported, whatever
happens to the leader's task meanwhile).

Local stream only: the local producer's hand-off (a Kafka backend calls its client from AnyIO's
worker threads: README's capability table, kafka=)."""

from __future__ import annotations

import asyncio
import pathlib
import sys
import threading

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from adiskq._async.event_loop import running_loop

pytestmark = pytest.mark.anyio

WAIT_S = 10.0  # a bound on waits that end at once when all is well


async def test_the_call_runs_in_another_thread_holding_a_token_and_returns_its_result() -> None:
    limiter = anyio.CapacityLimiter(2)
    loop_thread = threading.get_ident()

    def call() -> tuple[int, int]:
        return threading.get_ident(), limiter.borrowed_tokens

    thread, borrowed = await running_loop().run_in_thread(call, limiter)
    assert thread != loop_thread
    assert borrowed == 1
    assert limiter.borrowed_tokens == 0


async def test_the_calls_error_is_raised_and_its_token_returned() -> None:
    limiter = anyio.CapacityLimiter(1)

    def failing() -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):
        await running_loop().run_in_thread(failing, limiter)
    assert limiter.borrowed_tokens == 0


async def test_with_no_free_token_the_call_waits_for_one() -> None:
    limiter = anyio.CapacityLimiter(1)
    ran = threading.Event()
    done = anyio.Event()

    async def call_when_free() -> None:
        await running_loop().run_in_thread(ran.set, limiter)
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


class HeldCall:
    """A call for the worker thread that runs until ``release`` is set (``started``: it runs)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        self.started.set()
        assert self.release.wait(WAIT_S)
        return "synced"


async def test_a_cancellation_meanwhile_lets_the_call_finish_and_is_delivered_after() -> None:
    limiter = anyio.CapacityLimiter(1)
    slow = HeldCall()
    returned: list[str] = []

    async def cancel_once_started(scope: anyio.CancelScope) -> None:
        assert await anyio.to_thread.run_sync(slow.started.wait, WAIT_S)
        scope.cancel()
        slow.release.set()

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            with anyio.CancelScope() as scope:
                group.start_soon(cancel_once_started, scope)
                returned.append(await running_loop().run_in_thread(slow, limiter))
                await anyio.lowlevel.checkpoint()  # the cancellation is delivered here
                returned.append("not cancelled")
    assert returned == ["synced"]
    assert scope.cancelled_caught
    assert limiter.borrowed_tokens == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Trio has no cancellation but its scopes'
@pytest.mark.parametrize("how", ["task.cancel()", "asyncio.timeout"])
async def test_asyncios_own_cancellation_meanwhile_lets_the_call_finish_and_is_delivered_after(how: str) -> None:
    """``anyio.to_thread.run_sync`` gives way to asyncio's own ``task.cancel()`` and returns while its
    thread still runs; here the caller gets the call's result, and the cancellation (or the timeout it
    stands for: its count is kept) at its next checkpoint."""
    limiter = anyio.CapacityLimiter(1)
    slow = HeldCall()
    returned: list[str] = []

    async def caller() -> None:
        async with asyncio.timeout(None) as timeout:
            timeouts.append(timeout)
            returned.append(await running_loop().run_in_thread(slow, limiter))
            await anyio.lowlevel.checkpoint()  # the cancellation is delivered here
            returned.append("not cancelled")

    timeouts: list[asyncio.Timeout] = []
    task = asyncio.ensure_future(caller())
    assert await anyio.to_thread.run_sync(slow.started.wait, WAIT_S)
    if how == "task.cancel()":
        task.cancel()
    else:
        timeouts[0].reschedule(asyncio.get_running_loop().time())
    await anyio.wait_all_tasks_blocked()
    assert not task.done()  # the call still runs, and the caller waits for it
    slow.release.set()
    with anyio.fail_after(WAIT_S), pytest.raises(asyncio.CancelledError if how == "task.cancel()" else TimeoutError):
        await task
    assert returned == ["synced"]
    assert limiter.borrowed_tokens == 0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the loop's default executor is asyncio's
async def test_on_asyncio_the_call_does_not_queue_behind_the_loops_default_executor() -> None:
    """An application may keep the loop's default executor busy (or make it small): a batch's
    fdatasync does not wait behind that work."""
    loop = asyncio.get_running_loop()
    release = threading.Event()
    # Every worker of the default executor, and a queue behind them, held for 2 s at most (the wait
    # for the call cannot be cut short, so this bounds the test if the call queued behind them).
    busy = [loop.run_in_executor(None, release.wait, 2.0) for _ in range(40)]
    try:
        assert await running_loop().run_in_thread(threading.current_thread, anyio.CapacityLimiter(1))
        assert not any(call.done() for call in busy)  # the call ran while they were all held
    finally:
        release.set()
        await asyncio.gather(*busy)


FORK_AND_PUSH = """
import asyncio, os, sys
import adiskq

async def push_sync(path):
    async with adiskq.Producer(path, flush="sync") as producer:
        await producer.push(b"x")

asyncio.run(push_sync(sys.argv[1]))  # the parent's worker threads exist now, idle
child = os.fork()
if child == 0:
    asyncio.run(push_sync(sys.argv[2]))
    os._exit(0)
_, status = os.waitpid(child, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the worker threads are asyncio's (Trio has its thread cache)
async def test_a_forked_child_gets_worker_threads_of_its_own(tmp_path: pathlib.Path) -> None:
    """A child forked after a sync batch has none of its parent's worker threads: its own batches
    must not queue calls for threads that are not there (they would wait forever)."""
    parent, child = tmp_path / "parent", tmp_path / "child"
    with anyio.fail_after(60):
        done = await anyio.run_process([sys.executable, "-c", FORK_AND_PUSH, str(parent), str(child)], check=False)
    assert done.returncode == 0, done.stderr.decode()
