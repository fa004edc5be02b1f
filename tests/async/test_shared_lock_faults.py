"""Shared producers let go of their locks on every fault path: a failed look at a lock's queue
(``flock`` itself failing, e.g. ``ENOLCK``) neither hangs the other writers nor fails a push.

Local stream only: the locks of shared=True are a stream's files (README's capability table:
shared=True)."""

from __future__ import annotations

import errno
import fcntl
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest
from support.blocked import wait_all_tasks_blocked

import adiskq
from adiskq._storage.flocks import partition_lock

pytestmark = pytest.mark.anyio


def fail_lock_probes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on every ``flock(LOCK_SH | LOCK_NB)`` (the look at a queue) fails with ENOLCK;
    returns the list the failed probes' descriptors are appended to."""
    real: Callable[..., Any] = fcntl.flock
    failed: list[int] = []

    def flock(fd: int, operation: int) -> None:
        if operation == fcntl.LOCK_SH | fcntl.LOCK_NB:
            failed.append(fd)
            raise OSError(errno.ENOLCK, "No locks available (injected)")
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock)
    return failed


async def wait_for_partition_lock(stream_path: str, partition: int) -> None:
    """Take and drop the partition's lock as another writer would; fails if it does not come free."""
    other = partition_lock(stream_path, partition)
    try:
        with anyio.fail_after(5):  # the producer's task waits here: its lock must come free
            await anyio.to_thread.run_sync(other.acquire, abandon_on_cancel=True)
    finally:
        other.close()


async def test_a_failed_look_at_the_lock_at_the_loops_turn_lets_the_partition_go(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lane's look at its lock at the loop's next turn fails: it lets go instead of keeping the
    lock with no look to come (the other writers waited for it forever)."""
    async with adiskq.Producer(stream_path, partitions=1, shared=True) as producer:
        await producer.push(b"x")  # inline: the lane now holds the lock until a look lets it go
        failed = fail_lock_probes(monkeypatch)
        pushed = 1
        with anyio.fail_after(5):
            while not failed:  # pushing, the lane keeps the lock, and looks at its queue in time
                await producer.push(b"y")
                pushed += 1
        await wait_for_partition_lock(stream_path, 0)
        monkeypatch.undo()
        assert (await producer.push(b"z")).offset == pushed


async def test_pushes_go_on_while_every_look_at_a_lock_queue_fails(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group-committed pushes (``flush="sync"``) and inline ones all return, and the partition's
    lock comes free after them, while every look at a lock's queue fails."""
    offsets: list[tuple[int, int]] = []
    async with (
        adiskq.Producer(stream_path, partitions=2, shared=True, flush="sync") as synced,
        adiskq.Producer(stream_path, shared=True) as inline,
    ):
        failed = fail_lock_probes(monkeypatch)

        async def push(producer: adiskq.Producer, value: bytes) -> None:
            partition, offset = await producer.push(value, key=b"k")
            offsets.append((partition, offset))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for i in range(20):
                    group.start_soon(push, synced if i % 2 else inline, b"%d" % i)
        partition = offsets[0][0]
        await wait_for_partition_lock(stream_path, partition)
        assert failed
    assert sorted(offsets) == [(partition, offset) for offset in range(20)]


async def test_a_push_cancelled_while_waiting_for_the_lock_is_not_written_and_lets_it_go(stream_path: str) -> None:
    """A push waiting for another writer's partition lock is cancelled: the wait ends at once,
    nothing of it is written, and the producer does not keep the lock once it comes free."""
    async with adiskq.Producer(stream_path, partitions=1, shared=True) as producer:
        other = partition_lock(stream_path, 0)
        scopes: list[anyio.CancelScope] = []
        finished = anyio.Event()

        async def cancelled_push() -> None:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await producer.push(b"cancelled")
            finished.set()

        try:
            other.acquire()  # another writer holds the partition
            with anyio.fail_after(5):
                async with anyio.create_task_group() as group:
                    group.start_soon(cancelled_push)
                    await wait_all_tasks_blocked()  # the push waits for the lock
                    scopes[0].cancel()
                    await finished.wait()  # ended while the lock is still held by the other
                    assert scopes[0].cancelled_caught
            other.release()
        finally:
            other.close()
        await wait_for_partition_lock(stream_path, 0)
        assert (await producer.push(b"after")).offset == 0
    assert adiskq.read(stream_path, 0, 0).value == b"after"
