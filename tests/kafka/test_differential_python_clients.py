"""aiokafka and kafka-python see the gateway as they see Apache Kafka: the same scenario runs against
both (differential.py) and what the client observed must be equal — produce answers, records,
ListOffsets, group assignments through rebalances, committed offsets with their metadata.

aiokafka runs on asyncio only: each scenario runs its client in an asyncio loop of its own, against
the gateway on each backend.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from differential import Differential, Side

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPythonPartition
    from kafka.structs import OffsetAndMetadata

pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

FIRST = 1_700_000_000_000


async def create(side: Side, topic: str, partitions: int) -> None:
    """Create ``topic`` with aiokafka's admin client."""
    admin = AIOKafkaAdminClient(bootstrap_servers=side.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


def test_aiokafka_records_and_offsets(differential: Differential) -> None:
    """aiokafka's produce answers (offset, timestamp, timestamp type), then the records read back
    with keys, null keys and values, headers and timestamps; then its ListOffsets answers:
    beginning, end, and offsets for times before, between and after the records."""

    async def run(side: Side) -> dict[str, Any]:
        topic = side.name()
        await create(side, topic, 1)
        producer = AIOKafkaProducer(bootstrap_servers=side.bootstrap)
        await producer.start()
        answers = []
        try:
            for i in range(6):
                key = None if i == 1 else b"k%d" % i
                value = None if i == 2 else b"v%d" % i
                headers = [("n", b"%d" % i), ("empty", b"")] if i % 2 == 0 else []
                sent = await producer.send_and_wait(
                    topic, value, key=key, partition=0, headers=headers, timestamp_ms=FIRST + 1000 * i
                )
                answers.append((sent.offset, sent.timestamp, sent.timestamp_type))
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=side.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            records: list[tuple[Any, ...]] = []
            while len(records) < 6:
                batch = await asyncio.wait_for(consumer.getmany(partition, timeout_ms=1000), 30)
                records += [
                    (m.offset, m.key, m.value, list(m.headers), m.timestamp, m.timestamp_type)
                    for m in batch.get(partition, [])
                ]
            times = await consumer.offsets_for_times({partition: FIRST - 1})
            between = await consumer.offsets_for_times({partition: FIRST + 2500})
            after = await consumer.offsets_for_times({partition: FIRST + 60_000})
            return {
                "produced": answers,
                "records": records,
                "beginning": (await consumer.beginning_offsets([partition]))[partition],
                "end": (await consumer.end_offsets([partition]))[partition],
                "for_times": [
                    None if found[partition] is None else tuple(found[partition]) for found in (times, between, after)
                ],
            }
        finally:
            await consumer.stop()

    differential.compare(lambda side: asyncio.run(run(side)))


class Recorder(ConsumerRebalanceListener):  # type: ignore[misc]
    """Records each assignment a member is given, as a sorted list of partition numbers."""

    def __init__(self) -> None:
        self.assignments: list[list[int]] = []

    async def on_partitions_revoked(self, revoked: Any) -> None:
        """Nothing to do before a rebalance."""

    async def on_partitions_assigned(self, assigned: Any) -> None:
        """Note the assignment."""
        self.assignments.append(sorted(partition.partition for partition in assigned))


async def until_assigned(member: AIOKafkaConsumer, recorder: Recorder, count: int) -> None:
    """Poll ``member`` as an application does until its latest assignment has ``count`` partitions."""

    async def polling() -> None:
        while not recorder.assignments or len(recorder.assignments[-1]) != count:
            await member.getmany(timeout_ms=100)

    await asyncio.wait_for(polling(), 60)


def test_aiokafka_group_rebalances(differential: Differential) -> None:
    """A group of aiokafka members on a topic of four partitions: the first member alone is given
    all four; a second joins and the round-robin assignor splits them, 0 and 2 to one, 1 and 3 to
    the other; the second leaves and the first is given all four again, on both sides."""

    async def run(side: Side) -> dict[str, Any]:
        topic = side.name()
        await create(side, topic, 4)
        settings = {
            "bootstrap_servers": side.bootstrap,
            "group_id": side.name("g"),
            "enable_auto_commit": False,
            "session_timeout_ms": 10_000,
            "heartbeat_interval_ms": 100,
        }
        first, second = Recorder(), Recorder()
        one = AIOKafkaConsumer(**settings)
        await one.start()
        try:
            one.subscribe([topic], listener=first)
            await until_assigned(one, first, 4)
            two = AIOKafkaConsumer(**settings)
            await two.start()
            try:
                two.subscribe([topic], listener=second)
                await asyncio.gather(until_assigned(one, first, 2), until_assigned(two, second, 2))
                split = sorted([first.assignments[-1], second.assignments[-1]])
            finally:
                await two.stop()
            await until_assigned(one, first, 4)
        finally:
            await one.stop()
        # Which member is given 0 and 2 depends on their random member ids: the split is compared
        # as a pair. How many rebalances a member passes through on the way is not compared: on a
        # loaded machine a late heartbeat adds one, on either side.
        return {"alone": first.assignments[0], "split": split, "after": first.assignments[-1]}

    differential.compare(lambda side: asyncio.run(run(side)))


def test_kafka_python_records_and_committed_metadata(differential: Differential) -> None:
    """kafka-python writes records with null keys, reads them back, commits offsets with metadata
    on two partitions and reads the commits back (metadata, and none for a partition never
    committed)."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        asyncio.run(create(side, topic, 2))
        producer = KafkaProducer(bootstrap_servers=side.bootstrap)
        try:
            futures = [
                producer.send(topic, value=b"v%d" % i, key=None if i % 2 else b"k%d" % i, partition=0,
                              timestamp_ms=FIRST + i)
                for i in range(6)
            ]  # fmt: skip
            producer.flush(30)
            produced = [(f.get(30).offset, f.get(30).timestamp) for f in futures]
        finally:
            producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=side.bootstrap,
            group_id=side.name("g"),
            enable_auto_commit=False,
            consumer_timeout_ms=10_000,
        )
        try:
            partition = KafkaPythonPartition(topic, 0)
            consumer.assign([partition, KafkaPythonPartition(topic, 1)])
            consumer.seek(partition, 0)
            records = []
            for message in consumer:
                records.append((message.offset, message.key, message.value, message.timestamp))
                if len(records) == 6:
                    break
            consumer.commit({partition: OffsetAndMetadata(4, "kafka-python", -1)})
            committed = consumer.committed(partition, metadata=True)
            never = consumer.committed(KafkaPythonPartition(topic, 1))
        finally:
            consumer.close()
        return {
            "produced": produced,
            "records": records,
            "committed": (committed.offset, committed.metadata),
            "never": never,
        }

    differential.compare(scenario)
