"""Transactions as aiokafka sees them, on the gateway and on Apache Kafka (differential.py): commit
and abort with an open transaction holding back ``read_committed``, a zombie fenced by a new
instance of its transactional id, and consume-transform-produce with ``send_offsets_to_transaction``.

Each scenario returns what aiokafka observed: send offsets, what a ``read_committed`` and a
``read_uncommitted`` consumer are given up to the end offsets aiokafka's ListOffsets answers for its
isolation level (the last stable offset, the high watermark), committed group offsets and the
exceptions the producer raises. aiokafka runs on asyncio: each scenario runs in an asyncio loop of
its own, against the gateway on each backend.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from differential import Differential, Side

COMMITTED = "read_committed"
UNCOMMITTED = "read_uncommitted"
DEADLINE = 60.0  # seconds any one wait of a scenario may take before it fails


async def create(side: Side, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with aiokafka's admin client."""
    admin = AIOKafkaAdminClient(bootstrap_servers=side.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def started_producer(side: Side, transactional_id: str) -> AIOKafkaProducer:
    """A transactional producer whose ``start`` (InitProducerId) has returned."""
    producer = AIOKafkaProducer(bootstrap_servers=side.bootstrap, transactional_id=transactional_id, linger_ms=0)
    await asyncio.wait_for(producer.start(), DEADLINE)
    return producer


async def send_all(producer: AIOKafkaProducer, topic: str, values: list[bytes]) -> list[int]:
    """Send ``values`` to partition 0 and wait for each answer; their offsets."""
    return [(await producer.send_and_wait(topic, value, key=b"k", partition=0)).offset for value in values]


async def read_to_end(side: Side, topic: str, isolation: str) -> dict[str, Any]:
    """What a consumer of ``isolation`` is given of partition 0 from offset 0 up to the end offset
    its ListOffsets answers, and that end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=side.bootstrap, enable_auto_commit=False, isolation_level=isolation)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        end = (await consumer.end_offsets([partition]))[partition]
        consumer.seek(partition, 0)
        seen: list[tuple[int, bytes | None]] = []

        async def reading() -> None:
            while await consumer.position(partition) < end:
                batch = await consumer.getmany(partition, timeout_ms=200)
                seen.extend((m.offset, m.value) for m in batch.get(partition, []))

        await asyncio.wait_for(reading(), DEADLINE)
        return {"records": seen, "end": end}
    finally:
        await consumer.stop()


async def both_readers(side: Side, topic: str) -> dict[str, Any]:
    """What each isolation level's consumer is given, and its end offset."""
    return {
        COMMITTED: await read_to_end(side, topic, COMMITTED),
        UNCOMMITTED: await read_to_end(side, topic, UNCOMMITTED),
    }


def test_aiokafka_commit_abort_and_an_open_transaction(differential: Differential) -> None:
    """A committed then an aborted transaction, then one left open: ``read_committed`` is given the
    committed records and stops at the open one's first record (its end offset is the last stable
    offset), ``read_uncommitted`` reads every record; once the open one commits, both read it."""

    async def run(side: Side) -> dict[str, Any]:
        topic = side.name()
        await create(side, topic)
        producer = await started_producer(side, side.name("txn"))
        try:
            produced = []
            async with producer.transaction():
                produced.append(await send_all(producer, topic, [b"a0", b"a1"]))
            await producer.begin_transaction()
            produced.append(await send_all(producer, topic, [b"b0"]))
            await producer.abort_transaction()
            await producer.begin_transaction()
            produced.append(await send_all(producer, topic, [b"c0", b"c1"]))
            while_open = await both_readers(side, topic)
            await producer.commit_transaction()
            return {"produced": produced, "while_open": while_open, "after_commit": await both_readers(side, topic)}
        finally:
            await producer.stop()

    seen = differential.compare(lambda side: asyncio.run(run(side)))
    assert seen["produced"] == [[0, 1], [3], [5, 6]]
    assert seen["while_open"] == {
        COMMITTED: {"records": [(0, b"a0"), (1, b"a1")], "end": 5},
        UNCOMMITTED: {"records": [(0, b"a0"), (1, b"a1"), (3, b"b0"), (5, b"c0"), (6, b"c1")], "end": 7},
    }
    assert seen["after_commit"] == {
        COMMITTED: {"records": [(0, b"a0"), (1, b"a1"), (5, b"c0"), (6, b"c1")], "end": 8},
        UNCOMMITTED: {"records": [(0, b"a0"), (1, b"a1"), (3, b"b0"), (5, b"c0"), (6, b"c1")], "end": 8},
    }


def test_aiokafka_zombie_is_fenced(differential: Differential) -> None:
    """A second producer of the same transactional id fences the first: the first's open transaction
    is aborted and its commit raises ProducerFenced; ``read_committed`` is given only the second's."""

    async def run(side: Side) -> dict[str, Any]:
        topic = side.name()
        await create(side, topic)
        zombie = await started_producer(side, side.name("txn"))
        fresh: AIOKafkaProducer | None = None
        try:
            await zombie.begin_transaction()
            zombie_offsets = await send_all(zombie, topic, [b"zombie"])
            fresh = await started_producer(side, side.name("txn"))
            async with fresh.transaction():
                fresh_offsets = await send_all(fresh, topic, [b"fresh"])
            try:
                await asyncio.wait_for(zombie.commit_transaction(), DEADLINE)
                zombie_commit = None
            except KafkaError as error:
                zombie_commit = type(error).__name__
            return {
                "produced": [zombie_offsets, fresh_offsets],
                "zombie_commit": zombie_commit,
                **await both_readers(side, topic),
            }
        finally:
            await zombie.stop()
            if fresh is not None:
                await fresh.stop()

    seen = differential.compare(lambda side: asyncio.run(run(side)))
    assert seen["produced"] == [[0], [2]]
    assert seen["zombie_commit"] == "ProducerFenced"
    assert seen[COMMITTED] == {"records": [(2, b"fresh")], "end": 4}
    assert seen[UNCOMMITTED] == {"records": [(0, b"zombie"), (2, b"fresh")], "end": 4}


def test_aiokafka_consume_transform_produce(differential: Differential) -> None:
    """A group member reads an input topic; a transactional producer writes what it read, upper-cased,
    and the group's offsets (``send_offsets_to_transaction``): a committed round commits the offsets,
    an aborted one leaves them; ``read_committed`` is given only the committed round's output."""

    async def run(side: Side) -> dict[str, Any]:
        source, sink, group = side.name("in"), side.name("out"), side.name("g")
        await create(side, source)
        await create(side, sink)
        plain = AIOKafkaProducer(bootstrap_servers=side.bootstrap)
        await plain.start()
        member = AIOKafkaConsumer(
            source,
            bootstrap_servers=side.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=COMMITTED,
        )
        await member.start()
        producer = await started_producer(side, side.name("txn"))
        partition = TopicPartition(source, 0)
        try:

            async def round_(inputs: list[bytes], commit: bool) -> dict[str, Any]:
                for value in inputs:
                    await plain.send_and_wait(source, value, partition=0)
                got: list[bytes] = []
                while len(got) < len(inputs):
                    batch = await asyncio.wait_for(member.getmany(timeout_ms=500), DEADLINE)
                    got += [m.value for messages in batch.values() for m in messages]
                await producer.begin_transaction()
                await send_all(producer, sink, [value.upper() for value in got])
                await producer.send_offsets_to_transaction({partition: await member.position(partition)}, group)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
                return {"read": got, "committed_after_end": await asyncio.wait_for(settled(), DEADLINE)}

            async def settled() -> int | None:
                # Kafka answers EndTxn before it writes the markers that make the offsets committed, and
                # aiokafka's OffsetFetch does not ask for stable offsets: ask until some are committed.
                while (offset := await member.committed(partition)) is None:
                    pass
                return offset

            first = await round_([b"a", b"b", b"c"], commit=True)
            second = await round_([b"d", b"e"], commit=False)
        finally:
            await producer.stop()
            await member.stop()
            await plain.stop()
        return {"first": first, "second": second, **await both_readers(side, sink)}

    seen = differential.compare(lambda side: asyncio.run(run(side)))
    assert seen["first"] == {"read": [b"a", b"b", b"c"], "committed_after_end": 3}
    assert seen["second"] == {"read": [b"d", b"e"], "committed_after_end": 3}
    assert seen[COMMITTED] == {"records": [(0, b"A"), (1, b"B"), (2, b"C")], "end": 7}
    assert seen[UNCOMMITTED]["records"] == [(0, b"A"), (1, b"B"), (2, b"C"), (4, b"D"), (5, b"E")]
