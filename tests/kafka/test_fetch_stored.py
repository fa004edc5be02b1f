"""A Fetch serves stored records straight as Kafka record batches, and reads Messages only off that path.

The plain path turns a run of stored records into one batch without a Message a record
(``kafka_batch_from_stored``); a damaged record takes the Messages' path, which fails the read that
reaches it, as every reader's does.
"""

from __future__ import annotations

import datetime as dt
import os

import anyio
import pytest
from confluent_kafka import Consumer, TopicPartition
from conftest import call
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import TopicName

import adiskq
from adiskq._storage import segment_reader
from adiskq.kafka.wire.batch import decode_batches

VALUE = b"v" * 100


def write(
    path: str,
    count: int,
    *,
    headers: dict[str, bytes] | None = None,
    segment_size_bytes: int | None = None,
    per_push: int = 10_000,
) -> None:
    """``count`` records with distinct keys, pushed by a library producer ``per_push`` at a time (a
    segment rolls between pushes)."""

    async def push() -> None:
        async with adiskq.Producer(path, partitions=1, segment_size_bytes=segment_size_bytes) as producer:
            for first in range(0, count, per_push):
                await producer.push_many(
                    [
                        adiskq.Record(VALUE, key=b"key-%05d" % i, headers=headers)
                        for i in range(first, min(count, first + per_push))
                    ]
                )

    anyio.run(push)


def fetch(gateway, topic: str, offset: int, partition_max_bytes: int = 2**20):  # type: ignore[no-untyped-def]
    """One raw Fetch v12 of partition 0, without waiting; the partition's answer."""
    request = FetchRequest(
        max_wait=dt.timedelta(0),
        min_bytes=1,
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes),),
            ),
        ),
        forgotten_topics_data=(),
    )
    return call(gateway.gateway.port, request).responses[0].partitions[0]


def test_a_partition_share_goes_out_as_one_batch(gateway, topic: str) -> None:
    """5,000 records of 100 bytes within a 1 MiB share are answered as one record batch of all of
    them (a client parses one batch header, not five), offsets and keys in order."""
    write(gateway.path(topic), 5000)
    answer = fetch(gateway, topic, 0)
    batches = decode_batches(answer.records)
    assert [(batch.base_offset, len(batch.records)) for batch in batches] == [(0, 5000)]
    assert [record.key for record in batches[0].records] == [b"key-%05d" % i for i in range(5000)]
    assert answer.high_watermark == 5000


def test_a_fetch_reads_on_across_segments(gateway, topic: str) -> None:
    """Records spread over many small segments come back in one Fetch, in order, one batch a
    segment's run at most, none skipped or repeated at a segment's end."""
    write(gateway.path(topic), 400, segment_size_bytes=4096, per_push=20)
    answer = fetch(gateway, topic, 0)
    batches = decode_batches(answer.records)
    assert len(batches) > 1
    offsets = [batch.base_offset + record.offset_delta for batch in batches for record in batch.records]
    keys = [record.key for batch in batches for record in batch.records]
    assert offsets == list(range(400))
    assert keys == [b"key-%05d" % i for i in range(400)]


def test_an_offset_retention_deleted_is_out_of_range(gateway, topic: str) -> None:
    """A Fetch at an offset retention deleted answers OFFSET_OUT_OF_RANGE with no records; one at
    the oldest offset left reads from there."""
    path = gateway.path(topic)
    write(path, 400, segment_size_bytes=4096, per_push=20)

    async def vacuum() -> None:
        async with adiskq.Producer(path) as producer:
            await producer.vacuum(adiskq.Retention(max_bytes=8192))

    anyio.run(vacuum)
    answer = fetch(gateway, topic, 0)
    assert (answer.error_code.value, answer.records) == (1, b"")
    oldest = adiskq.stats(path).partitions[0].oldest_offset
    assert oldest > 0
    batches = decode_batches(fetch(gateway, topic, oldest).records)
    assert batches[0].base_offset == oldest


def test_plain_records_are_served_without_decoding_messages(
    gateway, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A librdkafka consumer reads 3,000 records with headers while no stored record is decoded to a
    Message: the gateway's cost a message is one compiled pass over the stored bytes."""
    write(gateway.path(topic), 3000, headers={"h": b"1", "z": b""})
    decoded: list[int] = []
    original = segment_reader.SegmentReader.read_messages

    def counted(self: segment_reader.SegmentReader, offset: int, max_count: int, max_bytes: int | None = None) -> list:  # type: ignore[type-arg]
        decoded.append(offset)
        return original(self, offset, max_count, max_bytes)

    monkeypatch.setattr(segment_reader.SegmentReader, "read_messages", counted)
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < 3000:
        got += [m for m in consumer.consume(1000, 10) if m.error() is None]
    consumer.close()
    assert [(m.offset(), m.key(), m.value(), m.headers()) for m in got] == [
        (i, b"key-%05d" % i, VALUE, [("h", b"1"), ("z", b"")]) for i in range(3000)
    ]
    assert decoded == []


def test_a_damaged_record_fails_the_fetch_that_reaches_it(gateway, topic: str) -> None:
    """A damaged record is never served: the Fetch whose share reaches it fails (the connection
    closes, as with Messages read record by record), one that stops before it is answered, and a
    library reader names the damage at that offset."""
    path = gateway.path(topic)
    write(path, 100)
    partition = os.path.join(path, "parts", "000000")
    (data_file,) = [name for name in os.listdir(partition) if name.endswith(".data")]
    with open(os.path.join(partition, data_file), "r+b") as file:
        size = len(file.read()) // 100  # the records are all of one size
        file.seek(61 * size - 1)  # the last byte of record 60's value
        file.write(b"X")
    with pytest.raises(ConnectionError):
        fetch(gateway, topic, 0)
    batches = decode_batches(fetch(gateway, topic, 0, partition_max_bytes=30 * size).records)
    offsets = [batch.base_offset + record.offset_delta for batch in batches for record in batch.records]
    assert offsets == list(range(len(offsets)))
    assert 30 <= len(offsets) < 60
    with pytest.raises(adiskq.CorruptRecordError, match="CRC"):
        adiskq.read(path, 0, 60)
