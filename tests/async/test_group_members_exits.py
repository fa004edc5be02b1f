"""A member that dies cannot ring: the others watch its process exit (pidfd), or find it at their interval.

Local stream only: a local member's leases and process watch; a Kafka member that dies is
found by the coordinator's session timeout (README's capability table: Kafka's coordinator assigns
the partitions)."""

from __future__ import annotations

import functools
import os
import pathlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import anyio
import anyio.to_thread
import pytest
from support.consumer import Writer
from support.group_workers import Worker, wait_until

import adiskq
from adiskq._async import exits
from adiskq._async.exits import ExitWatch
from adiskq._async.wakeup import Waiter

pytestmark = pytest.mark.anyio


async def until_assigned(group: adiskq.ConsumerGroup, condition: Callable[[tuple[int, ...]], bool], what: str) -> None:
    """Wait (10 s at most) until the group's assignment meets ``condition``, woken by its changes."""
    with anyio.fail_after(10, reason=f"waiting for {what}"):
        async for assignment in group.assignments():
            if condition(assignment):
                return


async def until_worker(worker: Worker, condition: Callable[[], bool], what: str) -> None:
    """Wait (10 s at most) until ``condition`` holds of the worker's reports, woken as they are written."""
    await anyio.to_thread.run_sync(functools.partial(wait_until, condition, what, [worker], timeout=10))


async def read(group: adiskq.ConsumerGroup) -> None:
    async for message in group:
        group.commit(message)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process that sleeps until killed."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


async def test_a_watched_process_that_exits_wakes_its_waiter(sleeper: subprocess.Popen[bytes]) -> None:
    """ExitWatch wakes a waiter once the process it watches exits, and forgets the process then."""
    watch = ExitWatch()
    waiter = Waiter()
    waiter.arm()
    watch.watch_only({sleeper.pid}, waiter)
    assert watch.watched() == {sleeper.pid}
    assert not waiter.fired
    sleeper.kill()
    with anyio.fail_after(10):
        await waiter.wait_event()
    assert waiter.fired
    assert watch.watched() == set()  # forgotten before its waiters were woken


@pytest.fixture
def gone_pid() -> int:
    """The pid of a process that exited and was reaped: it names nothing now."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


async def test_a_process_gone_already_wakes_at_once(gone_pid: int) -> None:
    """Watching a pid with no process behind it wakes the waiter at once."""
    waiter = Waiter()
    waiter.arm()
    ExitWatch().watch_only({gone_pid}, waiter)
    assert waiter.fired


async def test_unwatching_forgets_the_process(sleeper: subprocess.Popen[bytes]) -> None:
    """A waiter that unwatches is not woken, and a process nobody waits for is not watched."""
    watch = ExitWatch()
    waiter = Waiter()
    watch.watch_only({sleeper.pid}, waiter)
    watch.unwatch(waiter)
    assert watch.watched() == set()


async def test_a_disabled_watch_watches_nothing(sleeper: subprocess.Popen[bytes]) -> None:
    """ExitWatch(enabled=False) (ADISKQ_EXIT_WATCH=off) watches no process."""
    watch = ExitWatch(enabled=False)
    watch.watch_only({sleeper.pid}, Waiter())
    assert watch.watched() == set()


async def test_the_environment_can_turn_the_watch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """ADISKQ_EXIT_WATCH=off makes the process's exit watch a disabled one."""
    monkeypatch.setattr(exits, "_exit_watch", None)
    monkeypatch.setenv("ADISKQ_EXIT_WATCH", "off")
    assert not exits.get_exit_watch().available
    monkeypatch.setattr(exits, "_exit_watch", None)
    monkeypatch.setenv("ADISKQ_EXIT_WATCH", "")
    assert exits.get_exit_watch().available


async def survive_a_kill(stream_path: str, folder: pathlib.Path, backend: str, rebalance_interval: float) -> None:
    """A member here shares two partitions with one in a worker process, which is killed: this one takes both."""
    with Writer(stream_path, partitions=2):
        pass
    async with (
        adiskq.ConsumerGroup(stream_path, name="g", rebalance_interval=rebalance_interval) as here,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, here)
        worker = Worker(stream_path, "g", os.fspath(folder), "other", backend=backend, rebalance_interval=0.05)
        try:
            await until_worker(worker, lambda: len(worker.assignment() or ()) == 1, "the worker's partition")
            await until_assigned(here, lambda assignment: len(assignment) == 1, "a partition each")
            worker.process.send_signal(signal.SIGKILL)
            await until_assigned(here, lambda assignment: assignment == (0, 1), "the dead worker's partitions")
        finally:
            worker.ensure_dead()
        tg.cancel_scope.cancel()


async def test_a_killed_members_partitions_move_without_waiting_for_the_interval(
    stream_path: str, tmp_path: pathlib.Path, anyio_backend: str
) -> None:
    """With the exit watch, a member takes a killed one's partitions although its interval is an hour."""
    await survive_a_kill(stream_path, tmp_path, anyio_backend, rebalance_interval=3600)


async def test_without_the_exit_watch_the_interval_finds_a_killed_member(
    stream_path: str, tmp_path: pathlib.Path, anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where process exits cannot be watched, a member finds a killed one at its next look."""
    monkeypatch.setattr(exits, "_exit_watch", ExitWatch(enabled=False))
    await survive_a_kill(stream_path, tmp_path, anyio_backend, rebalance_interval=0.05)
