"""Consumer over every partition (the default) or one (``partition=N``): merged, each in order.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
``Consumer``'s partition, start and end map). The two on partitions added while a consumer reads
stay local: the table's ``Consumer`` row says a Kafka consumer reads those from its next open; so
does the one on turns, which a Kafka reader takes among the records fetched so far."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from support.backends import fill, key_for, write_to
from support.blocked import wait_all_tasks_blocked
from support.consumer import Writer

import adiskq

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


async def drain(consumer: adiskq.Consumer) -> list[adiskq.Message]:
    """Every message up to the consumer's end."""
    with anyio.fail_after(10):
        return [message async for message in consumer]


async def test_a_consumer_reads_every_partition_by_default(where: Where) -> None:
    """A bare Consumer delivers the messages of all partitions, each partition's in offset order."""
    stream_path = where.new()
    await fill(stream_path, {p: [b"p%d-%d" % (p, i) for i in range(5)] for p in range(3)}, partitions=3)
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        messages = await drain(consumer)
        assert consumer.assignment == (0, 1, 2)
        assert consumer.positions == {0: 5, 1: 5, 2: 5}
    assert len(messages) == 15
    for partition in range(3):
        mine = [m for m in messages if m.partition == partition]
        assert [m.offset for m in mine] == list(range(5))
        assert [m.value for m in mine] == [b"p%d-%d" % (partition, i) for i in range(5)]


async def test_partition_n_narrows_the_consumer_to_that_partition(where: Where) -> None:
    """``partition=1`` reads partition 1 alone."""
    stream_path = where.new()
    await fill(stream_path, {p: [b"p%d" % p] * 2 for p in range(3)}, partitions=3)
    async with adiskq.Consumer(stream_path, partition=1, end="close") as consumer:
        messages = await drain(consumer)
        assert consumer.position == 2
    assert {m.partition for m in messages} == {1}
    assert len(messages) == 2


async def test_a_busy_partition_does_not_hold_the_others_back(stream_path: str) -> None:
    """Partitions take turns: the first batches read come from different partitions.

    Local only: a Kafka reader's partitions take turns among the records fetched so far, and when a
    partition's first records arrive is up to the brokers' fetches (the table's ``Consumer`` row;
    tests/kafka_backend/test_reading_turns.py holds the turns)."""
    await fill(stream_path, {0: [b"a"] * 2000, 1: [b"b"] * 10}, partitions=2)
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        with anyio.fail_after(10):
            batches = consumer.batches(100)
            first = await batches.__anext__()
            second = await batches.__anext__()
    assert {first[0].partition, second[0].partition} == {0, 1}


async def test_a_consumer_of_every_partition_follows_new_messages_in_each(where: Where) -> None:
    """Following (``end="wait"``), messages appended to any partition later arrive."""
    stream_path = where.new()
    async with (
        adiskq.Producer(stream_path, partitions=2, partitioner="fnv1") as producer,
        adiskq.Consumer(stream_path, start="newest") as consumer,
    ):
        await producer.push(b"x", key=key_for(1, 2))
        await producer.push(b"y", key=key_for(0, 2))
        with anyio.fail_after(10):
            got = {(await consumer.__anext__()).value, (await consumer.__anext__()).value}
    assert got == {b"x", b"y"}


async def test_partitions_added_later_are_read_from_their_first_message(stream_path: str) -> None:
    """A partition a producer adds while the consumer follows is read, from offset 0."""
    async with adiskq.Producer(stream_path, partitions=1) as producer:
        await producer.push(b"first")
    async with adiskq.Consumer(stream_path) as consumer:
        with anyio.fail_after(10):
            assert (await consumer.__anext__()).value == b"first"
        async with adiskq.Producer(stream_path, partitions=2) as producer:
            for i in range(40):  # random keys: some land in the new partition
                await producer.push(b"m%d" % i)
        seen: list[adiskq.Message] = []
        with anyio.fail_after(10):
            while len(seen) < 40:
                seen.append(await consumer.__anext__())
    new = [m for m in seen if m.partition == 1]
    assert new, "random keys should have put some messages in partition 1"
    assert [m.offset for m in new] == list(range(len(new)))


async def test_position_asks_for_positions_when_several_partitions_are_read(where: Where) -> None:
    """``position`` is one partition's; a consumer of several says to use ``positions``."""
    stream_path = where.new()
    await write_to(stream_path, [], partitions=2)
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        with pytest.raises(adiskq.InvalidArgumentError, match="positions"):
            _ = consumer.position
        assert consumer.positions == {0: 0, 1: 0}


async def test_end_offset_and_start_apply_to_each_partition(where: Where) -> None:
    """``start=1, end=3`` reads offsets 1 and 2 of every partition."""
    stream_path = where.new()
    await fill(stream_path, {p: [b"v"] * 5 for p in range(2)}, partitions=2)
    async with adiskq.Consumer(stream_path, start=1, end=3) as consumer:
        messages = await drain(consumer)
    assert sorted((m.partition, m.offset) for m in messages) == [(0, 1), (0, 2), (1, 1), (1, 2)]


async def test_a_partition_the_stream_lacks_is_refused(where: Where) -> None:
    """``partition=5`` of a two-partition stream raises InvalidArgumentError at open."""
    stream_path = where.new()
    await write_to(stream_path, [], partitions=2)
    with pytest.raises(adiskq.InvalidArgumentError, match="no partition 5"):
        async with adiskq.Consumer(stream_path, partition=5):
            pass


async def test_a_partition_added_in_another_process_is_read_without_waiting_for_the_poll(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settings watch (inotify) wakes a consumer of every partition when a partition is added."""
    from adiskq._async import notify

    monkeypatch.setattr(notify, "BACKUP_POLL_SECONDS", 3600.0)  # only inotify can wake it in time
    with Writer(stream_path, partitions=1, notify=False) as writer:
        writer.append([b"first"])
    async with adiskq.Consumer(stream_path) as consumer:
        with anyio.fail_after(10):
            assert (await consumer.__anext__()).value == b"first"
            async with anyio.create_task_group() as tasks:
                got: list[adiskq.Message] = []

                async def read_one() -> None:
                    got.append(await consumer.__anext__())

                tasks.start_soon(read_one)
                await wait_all_tasks_blocked()
                with Writer(stream_path, partitions=2, notify=False) as writer:
                    writer.append([b"new"], partition=1)
    assert [(m.partition, m.value) for m in got] == [(1, b"new")]


async def test_a_failed_open_fails_again_rather_than_reading_nothing(where: Where) -> None:
    """A start past one partition's end fails every open, keeps nothing the failed open had opened,
    and a read after it says the consumer is not open: it never ends quietly."""
    stream_path = where.new()
    await write_to(stream_path, [b"v"] * 3, 0, partitions=2)
    consumer = adiskq.Consumer(stream_path, start=2, end="close")
    try:
        for _ in range(2):
            with pytest.raises(adiskq.OffsetOutOfRangeError, match="partition 1 ") as refused:
                await consumer.__aenter__()
            assert refused.value.partition == 1
            assert consumer.assignment == ()
            with pytest.raises(adiskq.ClosedError, match="not open"):
                await consumer.__anext__()
    finally:
        await consumer.aclose()
