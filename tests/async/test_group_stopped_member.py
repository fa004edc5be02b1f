"""A member of a named group stopped (SIGSTOP, a debugger) while it stores its commits holds the
group's offsets lock: the other members keep delivering, and close within a bound.

Local stream only: the offsets lock is a file of the stream's folder (README's capability table:
a Kafka group's commits are Kafka's committed offsets)."""

from __future__ import annotations

import time

import anyio
import pytest
from support.stopped import stopped_holder

import adiskq
from adiskq._storage.offsets import load_offsets

pytestmark = pytest.mark.anyio


async def fill(stream_path: str, count: int) -> None:
    async with adiskq.Producer(stream_path, partitions=2) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, key=b"%d" % i) for i in range(count)])


async def read_and_commit(group: adiskq.ConsumerGroup, count: int) -> list[bytes]:
    got: list[bytes] = []
    async for message in group:
        group.commit(message)
        got.append(message.value)
        if len(got) == count:
            break
    return got


async def test_a_member_keeps_delivering_and_closes_while_another_is_stopped_storing(stream_path: str) -> None:
    """While a stopped member holds the group's offsets lock, a member delivers every message of
    its partitions (its periodic stores do not wait), and leaving ``async with`` takes a bounded time."""
    await fill(stream_path, 20)
    group = adiskq.ConsumerGroup(stream_path, "g", commit_interval=0.01)
    async with group:
        with stopped_holder(stream_path, "offsets-g"):
            with anyio.fail_after(10):
                got = await read_and_commit(group, 20)
            started = time.monotonic()
            with anyio.fail_after(10):
                await group.aclose()
            assert time.monotonic() - started < 5
    assert sorted(got) == sorted(b"%d" % i for i in range(20))


async def test_commits_held_back_by_a_stopped_member_are_stored_once_it_lets_go(stream_path: str) -> None:
    """Commits made while another member was stopped holding the offsets' lock stay pending and are
    stored once it lets go."""
    await fill(stream_path, 20)
    async with adiskq.ConsumerGroup(stream_path, "g", commit_interval=0.01) as group:
        with stopped_holder(stream_path, "offsets-g") as holder:
            with anyio.fail_after(10):
                await read_and_commit(group, 20)
            assert load_offsets(stream_path, "g") == {0: 0, 1: 0}  # only where it started, stored as it opened
            holder.resume_and_release()
        with anyio.fail_after(10):
            await group.flush()
        committed = group.committed
    assert load_offsets(stream_path, "g") == committed
    assert sum(committed.values()) == 20
