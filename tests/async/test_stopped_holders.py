"""A shared producer stopped (SIGSTOP, a debugger, a frozen container) while it holds a lock of
``locks/`` never hangs the others: every wait ends after ``lock_timeout`` with ``LockTimeoutError``
naming it, or when the caller's cancel scope says so, and closing never waits on it for long.

Local stream only: the locks of shared=True are a stream's files (README's capability table:
shared=True)."""

from __future__ import annotations

import time

import anyio
import pytest
from support.stopped import stopped_holder

import adiskq
from adiskq._storage.flocks import partition_lock

pytestmark = pytest.mark.anyio


async def make_stream(stream_path: str, partitions: int = 1) -> None:
    async with adiskq.Producer(stream_path, partitions=partitions, shared=True) as producer:
        await producer.push(b"first")


@pytest.mark.parametrize("lock", ["setup", "vacuum", "partition-0"])
async def test_opening_beside_a_stopped_holder_fails_after_lock_timeout_naming_it(stream_path: str, lock: str) -> None:
    """Opening a shared producer while a stopped one holds the setup, vacuum or a partition's lock
    fails after ``lock_timeout`` with ``LockTimeoutError`` naming the holder's pid and that it is stopped."""
    await make_stream(stream_path)
    with stopped_holder(stream_path, lock) as holder:
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(adiskq.LockTimeoutError) as raised:
            async with adiskq.Producer(stream_path, shared=True, lock_timeout=0.5):
                pass
        assert time.monotonic() - started < 5
    assert f"pid {holder.pid} on host" in str(raised.value)
    assert "(stopped)" in str(raised.value)
    assert isinstance(raised.value, adiskq.StreamLockedError)


async def test_opening_beside_a_stopped_holder_ends_with_the_callers_scope(stream_path: str) -> None:
    """A cancel scope around opening ends the wait for a stopped holder's lock, whatever lock_timeout
    says, and leaves nothing held: the stream opens at once after the holder let go."""
    await make_stream(stream_path)
    with stopped_holder(stream_path, "partition-0") as holder:
        with anyio.fail_after(10):
            with anyio.move_on_after(0.3) as scope:
                async with adiskq.Producer(stream_path, shared=True, lock_timeout=60):
                    pytest.fail("opened while the partition's lock is held")
            assert scope.cancelled_caught
        holder.resume_and_release()
    with anyio.fail_after(5):
        async with adiskq.Producer(stream_path, shared=True) as producer:
            assert await producer.push(b"second") == adiskq.Receipt(0, 1)


@pytest.mark.parametrize("lock", ["turn", "partition-0"])
async def test_a_push_beside_a_stopped_holder_fails_after_lock_timeout_and_closing_does_not_wait(
    stream_path: str, lock: str
) -> None:
    """A push while a stopped producer holds the turn or the partition's lock fails after
    ``lock_timeout`` with ``LockTimeoutError``, writes nothing, and leaving ``async with`` is quick."""
    await make_stream(stream_path)
    async with adiskq.Producer(stream_path, shared=True, lock_timeout=0.5) as producer:
        with stopped_holder(stream_path, lock) as holder:
            with anyio.fail_after(10), pytest.raises(adiskq.LockTimeoutError, match=f"pid {holder.pid} "):
                await producer.push(b"not written")
            started = time.monotonic()
            with anyio.fail_after(10):
                await producer.aclose()
            assert time.monotonic() - started < 5
    assert adiskq.stats(stream_path).partitions[0].next_offset == 1


async def test_a_push_beside_a_stopped_holder_ends_with_the_callers_scope(stream_path: str) -> None:
    """A cancel scope around a push ends its wait for a stopped holder's lock (nothing is written),
    and once the holder lets go the producer pushes again at the next offset."""
    await make_stream(stream_path)
    async with adiskq.Producer(stream_path, shared=True, lock_timeout=60) as producer:
        with stopped_holder(stream_path, "partition-0") as holder:
            with anyio.fail_after(10):
                with anyio.move_on_after(0.3) as scope:
                    await producer.push(b"cancelled")
                assert scope.cancelled_caught
                with anyio.move_on_after(0.3) as scope:
                    await producer.push_many([b"cancelled too", b"and this"])
                assert scope.cancelled_caught
            holder.resume_and_release()
        with anyio.fail_after(10):
            assert await producer.push(b"second") == adiskq.Receipt(0, 1)
    assert [adiskq.read(stream_path, 0, offset).value for offset in (0, 1)] == [b"first", b"second"]


async def test_a_wait_given_up_lets_go_of_the_lock_it_takes_later(stream_path: str) -> None:
    """A wait that timed out leaves its thread blocked; when the stopped holder resumes and lets
    go, that thread takes the lock and lets go at once: another process's writer gets it."""
    await make_stream(stream_path)
    async with adiskq.Producer(stream_path, shared=True, lock_timeout=0.3) as producer:
        with stopped_holder(stream_path, "partition-0") as holder:
            for _ in range(3):  # every wait joins the one blocked thread
                with anyio.fail_after(10), pytest.raises(adiskq.LockTimeoutError):
                    await producer.push(b"not written")
            holder.resume_and_release()
        other = partition_lock(stream_path, 0)
        try:
            other.acquire(timeout=10)  # taken, in another object as another process would
            assert other.held
        finally:
            other.close()
        with anyio.fail_after(10):
            assert await producer.push(b"second") == adiskq.Receipt(0, 1)


async def test_closing_the_last_producer_beside_a_stopped_opener_is_quick(stream_path: str) -> None:
    """Closing a shared producer while a stopped process holds the setup lock (it was opening)
    takes at most a moment: the clean-close record is given up, never the close."""
    async with adiskq.Producer(stream_path, shared=True) as producer:
        await producer.push(b"first")
        with stopped_holder(stream_path, "setup"):
            started = time.monotonic()
            with anyio.fail_after(10):
                await producer.aclose()
            assert time.monotonic() - started < 5
    assert adiskq.read(stream_path, 0, 0).value == b"first"
