"""The Kafka gateway over a compressed stream: Fetch serves the values decompressed, and Produce
stores them compressed like the stream's own producers."""

from __future__ import annotations

import os
import pathlib
import warnings

import anyio
import pytest
from support.compression import order_events, trained_dictionary

import adiskq
from adiskq._sansio import codec
from adiskq._sansio.compression import COMPRESSED
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPythonPartition

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")


def stored_attributes(stream_path: str) -> list[int]:
    """The attributes of partition 0's records, as stored."""
    data = pathlib.Path(stream_path, PARTS_DIR, partition_dir_name(0), f"{0:020d}.data").read_bytes()
    return [data[extent.position + codec.ATTRIBUTES_AT] for extent in codec.scan_records(data)]


def test_kafka_python_reads_and_writes_a_compressed_stream(gateway, topic: str) -> None:
    """kafka-python fetches the values of a compressed stream as they were pushed, and what it
    produces there is stored compressed and read back the same."""
    events = order_events(20)
    stream_path = os.path.join(gateway.root, topic)

    async def push() -> None:
        async with adiskq.Producer(stream_path, compression="zstd", zstd_dictionary=trained_dictionary()) as producer:
            await producer.push_many(events[:10])

    anyio.run(push)
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap)
    try:
        for value in events[10:]:
            producer.send(topic, value=value, partition=0)
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
            got.append(message.value)
            if len(got) == len(events):
                break
    finally:
        consumer.close()
    assert got == events
    assert all(attributes & COMPRESSED for attributes in stored_attributes(stream_path))


def test_kafka_python_fetches_a_new_streams_plain_zstd_values(gateway, topic: str) -> None:
    """The values a compressed stream stores before its first dictionary (plain zstd frames) are
    fetched as they were pushed, with no dictionary file in the stream."""
    events = order_events(30)
    stream_path = os.path.join(gateway.root, topic)

    async def push() -> None:
        async with adiskq.Producer(stream_path, compression="zstd") as producer:
            for event in events:
                await producer.push(event)

    anyio.run(push)
    assert all(attributes & COMPRESSED for attributes in stored_attributes(stream_path))
    assert not os.path.exists(os.path.join(stream_path, "dictionaries", "zstd-00000001.dict"))
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        partition = KafkaPythonPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(events):
                break
    finally:
        consumer.close()
    assert got == events
