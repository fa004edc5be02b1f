"""aiokafka, kafka-python and FastStream's Kafka broker producing to and consuming from the gateway.

aiokafka and FastStream run on asyncio only: each test runs its client in an asyncio loop of its
own, against the gateway on each backend (the ``gateway`` fixture).
"""

from __future__ import annotations

import asyncio
import warnings

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPythonPartition

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")


def test_aiokafka_produce_and_consume(gateway, topic: str) -> None:
    """aiokafka writes keyed records with headers and reads them back from offset 0."""

    async def run() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]]:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(
                    topic,
                    b"value %d" % i,
                    key=b"k%d" % i,
                    partition=0,
                    headers=[("n", b"%d" % i)],
                    timestamp_ms=1_700_000_000_000 + i,
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=gateway.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            got = []
            while len(got) < 10:
                batch = await asyncio.wait_for(consumer.getmany(partition, timeout_ms=1000), 30)
                got += [(m.key, m.value, list(m.headers), m.timestamp) for m in batch.get(partition, [])]
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert got == [(b"k%d" % i, b"value %d" % i, [("n", b"%d" % i)], 1_700_000_000_000 + i) for i in range(10)]


def test_aiokafka_idempotent_producer(gateway, topic: str) -> None:
    """aiokafka's idempotent producer (InitProducerId, sequences) writes each record once."""

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            batch = [producer.send(topic, b"%d" % i, partition=0) for i in range(50)]
            for sent in batch:
                await (await sent)
        finally:
            await producer.stop()

    asyncio.run(run())
    from adiskq import stats

    assert stats(gateway.path(topic)).message_count == 50


def test_kafka_python_produce_and_consume(gateway, topic: str) -> None:
    """kafka-python writes records (a null key among them) and reads them back with assign()."""
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)
    try:
        for i in range(10):
            producer.send(topic, value=b"v%d" % i, key=None if i % 2 else b"k%d" % i, partition=0)
        producer.flush(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        partition = KafkaPythonPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        got = []
        for message in consumer:
            got.append((message.offset, message.key, message.value))
            if len(got) == 10:
                break
    finally:
        consumer.close()
    assert got == [(i, None if i % 2 else b"k%d" % i, b"v%d" % i) for i in range(10)]


def test_faststream_publish_and_subscribe(gateway, topic: str) -> None:
    """A FastStream KafkaBroker publishes to the gateway and its subscriber receives the messages."""
    from faststream.kafka import KafkaBroker

    async def run() -> list[str]:
        broker = KafkaBroker(gateway.bootstrap)
        received: list[str] = []
        done = asyncio.Event()

        @broker.subscriber(topic, auto_offset_reset="earliest")
        async def handle(body: str) -> None:
            received.append(body)
            if len(received) == 3:
                done.set()

        async with broker:
            await broker.start()
            for text in ("one", "two", "three"):
                await broker.publish(text, topic)
            await asyncio.wait_for(done.wait(), 30)
        return received

    assert asyncio.run(run()) == ["one", "two", "three"]
