"""A named group's lag, offsets and deletion from Python (``group.lag()``, ``adiskq.lag``,
``adiskq.reset_offsets``, ``adiskq.delete_group``), and ``group.seek`` inside a member.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
lag, reset_offsets, delete_group and seek map, on Kafka's committed offsets). The others stay on a
local stream: they write to chosen partitions of several (a stream's writer; Kafka places by key),
use tags= (refused on Kafka), count lag from where a group started before any commit (a Kafka
group's lag leaves such partitions out), or name the holder's pid (a local group's lock file)."""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING

import anyio
import pytest
from support.blocked import wait_all_tasks_blocked
from support.cli import invoke
from support.consumer import Writer, read_and_commit

import adiskq

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


def fill(stream_path: str, per_partition: int, partitions: int = 2, *, tag: str | None = None) -> None:
    with Writer(stream_path, partitions=partitions) as writer:
        for partition in range(partitions):
            writer.append([b"v%d" % i for i in range(per_partition)], partition=partition)


async def fill_one(where: Where, count: int) -> str:
    """A new one-partition stream or topic holding ``count`` messages."""
    place = where.new()
    async with adiskq.Producer(place, partitions=1) as producer:
        await producer.push_many([b"v%d" % i for i in range(count)])
    return place


async def test_group_lag_counts_the_messages_left_past_its_commits(stream_path: str) -> None:
    """``await group.lag()`` is next offset minus committed, per partition, own pending commits included."""
    fill(stream_path, 10)
    async with adiskq.ConsumerGroup(stream_path, "billing") as group:
        assert await group.lag() == {0: 10, 1: 10}  # where it began each partition it holds
        with anyio.fail_after(10):
            message = await group.__anext__()
        group.commit(message)
        lag = await group.lag()
    assert lag[message.partition] == 9
    assert sum(lag.values()) == 19


async def test_adiskq_lag_reads_the_stored_offsets_synchronously(stream_path: str) -> None:
    """``adiskq.lag(path, group)`` gives the same figures from what the group stored."""
    fill(stream_path, 10)
    assert adiskq.lag(stream_path, "billing") == {}
    got = await read_and_commit(stream_path, "billing", 4)
    committed: dict[int, int] = {}
    for message in got:
        committed[message.partition] = message.offset + 1
    # A partition it never committed in counts from where it started (stored when it opened).
    assert adiskq.lag(stream_path, "billing") == {p: 10 - committed.get(p, 0) for p in (0, 1)}


async def test_a_tagged_groups_lag_counts_only_its_tags(stream_path: str) -> None:
    """A group opened with ``tags=`` counts only the messages left with one of them."""
    async with adiskq.Producer(stream_path) as producer:
        for i in range(10):
            await producer.push(b"v", tag="paid" if i % 3 == 0 else "created")
    async with adiskq.ConsumerGroup(stream_path, "payments", tags=["paid"]) as group:
        assert await group.lag() == {0: 4}
        with anyio.fail_after(10):
            group.commit(await group.__anext__())
        assert await group.lag() == {0: 3}
    assert adiskq.lag(stream_path, "payments") == {0: 3}


async def test_lag_needs_a_named_group(stream_path: str) -> None:
    """An unnamed group has no commits to measure from: InvalidArgumentError says to name it."""
    fill(stream_path, 1)
    async with adiskq.ConsumerGroup(stream_path) as group:
        with pytest.raises(adiskq.InvalidArgumentError, match="named group"):
            await group.lag()


async def test_reset_offsets_to_oldest_replays_and_to_newest_skips(stream_path: str) -> None:
    """``reset_offsets`` moves the stored offsets; the group reads from there when it next opens."""
    fill(stream_path, 5)
    await read_and_commit(stream_path, "g", 10)
    assert adiskq.reset_offsets(stream_path, "g", "oldest") == {0: 0, 1: 0}
    assert len(await read_and_commit(stream_path, "g", 10, end="close")) == 10
    assert adiskq.reset_offsets(stream_path, "g", "newest", partition=1) == {1: 5}
    assert adiskq.reset_offsets(stream_path, "g", 3, partition=0) == {0: 3}
    again = await read_and_commit(stream_path, "g", 2, end="close")
    assert [(m.partition, m.offset) for m in again] == [(0, 3), (0, 4)]


async def test_reset_offsets_to_a_time(stream_path: str) -> None:
    """A datetime names each partition's first message at or after it."""
    base = 1_700_000_000_000_000_000
    with Writer(stream_path) as writer:
        for i in range(5):
            writer.append([b"v"], timestamp_ns=base + i * 1_000_000_000)
    when = dt.datetime.fromtimestamp(base / 1e9 + 2, tz=dt.UTC)
    assert adiskq.reset_offsets(stream_path, "g", when) == {0: 2}


async def test_reset_offsets_is_refused_while_a_member_runs(stream_path: str) -> None:
    """A live member would overwrite the new offsets: GroupInUseError, and nothing is stored."""
    fill(stream_path, 5)
    async with adiskq.ConsumerGroup(stream_path, "g") as group:
        group.commit(await group.__anext__())
        await group.flush()
        before = adiskq.lag(stream_path, "g")
        with pytest.raises(adiskq.GroupInUseError, match="in use") as caught:
            adiskq.reset_offsets(stream_path, "g", "oldest")
        assert f"pid {os.getpid()}" in str(caught.value)
        with pytest.raises(adiskq.GroupInUseError):
            adiskq.delete_group(stream_path, "g")
    assert adiskq.lag(stream_path, "g") == before


async def test_reset_offsets_refuses_an_offset_the_partition_lacks(where: Where) -> None:
    """An offset past the partition's next one raises OffsetOutOfRangeError naming the range."""
    stream_path = await fill_one(where, 5)
    with pytest.raises(adiskq.OffsetOutOfRangeError, match=r"offsets 0\.\.4 \((the )?next (offset is )?5\)"):
        adiskq.reset_offsets(stream_path, "g", 6)
    with pytest.raises(adiskq.InvalidArgumentError, match="to='latest'"):
        adiskq.reset_offsets(stream_path, "g", "latest")  # type: ignore[arg-type]


async def test_delete_group_forgets_its_offsets(where: Where) -> None:
    """After ``delete_group`` the group is gone from stats, and a new one starts from ``start``."""
    stream_path = await fill_one(where, 3)
    await read_and_commit(stream_path, "g", 3)
    assert adiskq.delete_group(stream_path, "g") is True
    if not where.kafka:  # stats() reads a stream's files
        assert "g" not in adiskq.stats(stream_path).groups
    assert adiskq.delete_group(stream_path, "g") is False
    assert len(await read_and_commit(stream_path, "g", 3, end="close")) == 3


async def test_seek_moves_where_a_member_reads_a_partition(where: Where) -> None:
    """``group.seek(p, offset)`` makes the next message of ``p`` the one at ``offset`` (back or ahead)."""
    stream_path = await fill_one(where, 10)
    async with adiskq.ConsumerGroup(stream_path, "g") as group:
        with anyio.fail_after(10):
            assert (await group.__anext__()).offset == 0
            group.seek(0, 7)
            assert (await group.__anext__()).offset == 7
            group.seek(0, 2)
            assert (await group.__anext__()).offset == 2


async def test_seek_wakes_a_member_waiting_for_new_messages(where: Where) -> None:
    """A member caught up and waiting reads again at once after a seek back."""
    stream_path = await fill_one(where, 3)
    async with adiskq.ConsumerGroup(stream_path, "g") as group:
        with anyio.fail_after(10):
            for _ in range(3):
                await group.__anext__()
            got: list[int] = []
            async with anyio.create_task_group() as tasks:

                async def read_one() -> None:
                    got.append((await group.__anext__()).offset)

                tasks.start_soon(read_one)
                await wait_all_tasks_blocked()
                group.seek(0, 1)
    assert got == [1]


async def seek_and_read(group: adiskq.ConsumerGroup, partition: int, offset: int) -> adiskq.Message:
    group.seek(partition, offset)
    return await group.__anext__()


async def test_seek_refuses_a_partition_not_held_or_an_offset_not_written(where: Where) -> None:
    """Seeking a partition this member lacks, or past the next offset, raises a clear error, and the
    member reads on from where it was. (A Kafka member checks an offset past the end its client last
    fetched at the next read, which raises it: README's capability table, seek.)"""
    stream_path = await fill_one(where, 3)
    async with adiskq.ConsumerGroup(stream_path, "g") as group:
        with anyio.fail_after(10):
            assert (await group.__anext__()).offset == 0  # a Kafka member holds nothing before its first rebalance
            with pytest.raises(adiskq.InvalidArgumentError, match="not held by this member"):
                group.seek(4, 0)
            with pytest.raises(adiskq.OffsetOutOfRangeError, match="not written yet") as refused:
                await seek_and_read(group, 0, 4)
            assert (refused.value.partition, refused.value.offset, refused.value.next_offset) == (0, 4, 3)
            assert [(await group.__anext__()).offset for _ in range(2)] == [1, 2]


async def test_seek_to_an_offset_written_since_the_last_read_is_allowed(where: Where) -> None:
    """An offset written after the member last read is there to seek to (the end is not the one
    the member saw last)."""
    stream_path = await fill_one(where, 3)
    async with adiskq.ConsumerGroup(stream_path, "g") as group:
        with anyio.fail_after(10):
            assert (await group.__anext__()).offset == 0
            async with adiskq.Producer(stream_path) as producer:
                await producer.push_many([b"v3", b"v4"])
            message = await seek_and_read(group, 0, 4)
    assert (message.offset, message.value) == (4, b"v4")


async def test_lag_counts_a_backlog_the_group_never_committed_in(stream_path: str) -> None:
    """A member that opens and stops before its first commit leaves the backlog counted: adiskq.lag(),
    a live member's lag() and Prometheus's series all count from where the group starts."""
    fill(stream_path, 10)
    assert adiskq.lag(stream_path, "billing") == {}  # no member ever opened: nothing to count from
    async with adiskq.ConsumerGroup(stream_path, "billing", commit_interval=3600) as group:
        with anyio.fail_after(10):
            await group.__anext__()  # a worker that crashes on its first message
        assert adiskq.lag(stream_path, "billing") == {0: 10, 1: 10}
        assert await group.lag() == {0: 10, 1: 10}
    assert adiskq.lag(stream_path, "billing") == {0: 10, 1: 10}
    prometheus = invoke("stats", stream_path, "--prometheus").output
    for partition in (0, 1):
        assert (
            f'adiskq_consumer_lag{{group="billing",partition="{partition}",stream="{stream_path}"}} 10.0' in prometheus
        )
    async with adiskq.ConsumerGroup(stream_path, "billing", start="newest") as other:
        assert await other.lag() == {0: 10, 1: 10}  # the group's start was stored: newest is not re-read
