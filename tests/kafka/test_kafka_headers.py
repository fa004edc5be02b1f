"""Headers as Kafka has them through the gateway: a null header value and a repeated header name are
stored (format adiskq/5) and served back in order to a Kafka client, with the batch's other records
untouched; a topic whose stream is of an older format refuses such a batch and says to upgrade."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os

import anyio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from confluent_kafka import KafkaError, Producer
from conftest import call
from kafka_support import consume, produce_all
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName

import adiskq
from adiskq.kafka.wire.batch import KafkaRecord, encode_batch


def test_null_values_and_repeated_names_round_trip_in_order(gateway, topic: str) -> None:
    """librdkafka's headers come back as they were sent, and a library reader sees them as Headers."""
    records = [
        (b"k", b"v", [("a", None), ("a", b"1"), ("b", b"2"), ("a", b"3")], 1_700_000_000_000),
        (None, None, [("n", None)], 1_700_000_000_001),  # a null key and value as well
        (b"k", b"plain", [("h", b"x")], 1_700_000_000_002),
    ]
    produce_all(gateway.bootstrap, topic, records, retries=0)
    got = consume(gateway.bootstrap, topic, 0, len(records))
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == records
    first = adiskq.read(gateway.path(topic), 0, 0)
    assert type(first.headers) is adiskq.Headers
    assert first.header_list == (("a", None), ("a", b"1"), ("b", b"2"), ("a", b"3"))
    assert first.headers["a"] == b"3"


def test_a_batch_with_one_null_header_fails_no_record(gateway, topic: str) -> None:
    """Ten records lingered into one batch, the sixth with a null header value: all ten are stored."""
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 50})
    for i in range(10):
        headers = [("n", None)] if i == 5 else [("h", b"x")]
        producer.produce(topic, b"v%d" % i, partition=0, headers=headers, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert failures == []
    got = consume(gateway.bootstrap, topic, 0, 10)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(10)]
    assert [m.headers() for m in got] == [[("n", None)] if i == 5 else [("h", b"x")] for i in range(10)]


def test_an_older_format_topic_refuses_them_and_says_to_upgrade(gateway, topic: str) -> None:
    """A topic whose stream an older adiskq made (format adiskq/4 here) keeps its format: such a batch
    is refused whole with INVALID_RECORD (not retried), nothing of it is written, and plain records
    are still taken."""
    path = gateway.path(topic)

    async def create() -> None:
        async with adiskq.Producer(path) as producer:
            await producer.push(b"old")

    anyio.run(create)
    settings_path = os.path.join(path, "settings.json")
    with open(settings_path) as file:
        stored = json.load(file)
    with open(settings_path, "w") as file:
        json.dump(stored | {"format": "adiskq/4", "stream_id": "0" * 32}, file)

    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "retries": 0})
    producer.produce(topic, b"null header", partition=0, headers=[("n", None)], on_delivery=delivered)
    assert producer.flush(30) == 0
    assert [error.code() for error in failures] == [KafkaError.INVALID_RECORD]
    # The answer's message (which librdkafka does not show) says what to do.
    batch = encode_batch(base_offset=0, records=[KafkaRecord(0, 1, b"k", b"v", [("n", None)])], base_timestamp_ms=1)
    request = ProduceRequest(
        acks=1,
        timeout=dt.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(name=TopicName(topic), partition_data=(PartitionProduceData(index=0, records=batch),)),
        ),
    )
    (answer,) = call(gateway.gateway.port, request).responses[0].partition_responses
    assert answer.error_code == 87  # INVALID_RECORD
    assert f"`adiskq upgrade {topic}`" in str(answer.error_message)
    produce_all(gateway.bootstrap, topic, [(None, b"plain", [("h", b"x")], 1_700_000_000_000)])
    assert adiskq.stats(path).message_count == 2
    assert adiskq.read(path, 0, 1).value == b"plain"


def test_aiokafka_sends_and_reads_null_values_and_repeated_names(gateway, topic: str) -> None:
    """aiokafka (its own record encoder and decoder, not librdkafka's) round-trips them too."""
    sent = [("a", None), ("a", b"1"), ("b", b"")]

    async def run() -> list[tuple[str, bytes | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"v", key=b"k", partition=0, headers=sent)  # type: ignore[arg-type]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=gateway.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            message = await asyncio.wait_for(consumer.getone(), 30)
            return list(message.headers)
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == sent
    assert adiskq.read(gateway.path(topic), 0, 0).header_list == tuple(sent)
