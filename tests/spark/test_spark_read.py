"""Batch reads through Spark: ``spark.read.format("adiskq").load(path)`` on a real local Spark."""

from __future__ import annotations

import os

import anyio
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.types import BinaryType, IntegerType, LongType, MapType, StringType, TimestampType
from support.compression import order_events, trained_dictionary
from support.spark import T0_NS, data_files, delete_oldest_segment, fill, write_messages

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter


def rows(spark: SparkSession, path: str, **options: str) -> list[tuple[int, int, str]]:
    """``(partition, offset, value)`` of every row the read gives, sorted."""
    df = spark.read.format("adiskq").options(**options).load(path)
    return sorted((r.partition, r.offset, bytes(r.value).decode()) for r in df.collect())


def test_a_read_has_the_documented_columns(spark: SparkSession, stream_path: str) -> None:
    """partition int, offset long, timestamp, key binary, value binary, headers map<string,binary>, tag string."""
    fill(stream_path, [1])
    fields = spark.read.format("adiskq").load(stream_path).schema.fields
    assert [(f.name, f.dataType) for f in fields] == [
        ("partition", IntegerType()),
        ("offset", LongType()),
        ("timestamp", TimestampType()),
        ("key", BinaryType()),
        ("value", BinaryType()),
        ("headers", MapType(StringType(), BinaryType())),
        ("tag", StringType()),
    ]


def test_every_message_comes_back_with_its_fields(spark: SparkSession, stream_path: str) -> None:
    """Key, value, timestamp and headers of each message arrive in its row."""
    write_messages(
        stream_path,
        [
            (0, b"alice", b"hello", T0_NS + 1_234_000, {"type": b"greeting", "n": b"\x00\x01"}),
            (1, b"", b"", T0_NS, None),
        ],
    )
    df = spark.read.format("adiskq").load(stream_path).selectExpr("*", "unix_micros(timestamp) as micros")
    got = {r.partition: r for r in df.collect()}
    assert bytes(got[0].key) == b"alice"
    assert bytes(got[0].value) == b"hello"
    assert got[0].micros == (T0_NS + 1_234_000) // 1000  # microseconds, whatever the local time zone
    assert {k: bytes(v) for k, v in got[0].headers.items()} == {"type": b"greeting", "n": b"\x00\x01"}
    assert (bytes(got[1].key), bytes(got[1].value), got[1].headers) == (b"", b"", {})


def test_a_read_gives_all_partitions_from_earliest_to_latest(spark: SparkSession, stream_path: str) -> None:
    """By default every message of every partition is read once."""
    fill(stream_path, [5, 3])
    assert rows(spark, stream_path) == [(0, i, f"v0-{i}") for i in range(5)] + [(1, i, f"v1-{i}") for i in range(3)]


def test_json_offsets_choose_a_range_with_an_exclusive_end(spark: SparkSession, stream_path: str) -> None:
    """startingOffsets/endingOffsets as JSON; -2 is earliest, -1 latest; the end is exclusive."""
    fill(stream_path, [10, 10])
    got = rows(spark, stream_path, startingOffsets='{"0": 2, "1": -2}', endingOffsets='{"0": 4, "1": -1}')
    assert got == [(0, 2, "v0-2"), (0, 3, "v0-3")] + [(1, i, f"v1-{i}") for i in range(10)]


def test_starting_at_latest_reads_nothing(spark: SparkSession, stream_path: str) -> None:
    """startingOffsets=latest on a batch read is an empty range."""
    fill(stream_path, [4])
    assert rows(spark, stream_path, startingOffsets="latest") == []


def test_starting_timestamp_starts_at_the_first_message_at_or_after_it(spark: SparkSession, stream_path: str) -> None:
    """startingTimestamp (ms since the epoch) picks each partition's first message at or after it."""
    fill(stream_path, [10, 2])
    start_ms = (T0_NS + 7_000_000) // 1_000_000  # messages are 1 ms apart
    assert rows(spark, stream_path, startingTimestamp=str(start_ms)) == [(0, i, f"v0-{i}") for i in (7, 8, 9)]


def test_the_partitions_option_reads_only_those(spark: SparkSession, stream_path: str) -> None:
    """partitions=1,2 leaves partition 0 out."""
    fill(stream_path, [2, 1, 1])
    assert rows(spark, stream_path, partitions="1,2") == [(1, 0, "v1-0"), (2, 0, "v2-0")]


def test_long_ranges_are_split_into_spark_partitions(spark: SparkSession, stream_path: str) -> None:
    """maxRecordsPerPartition cuts a partition's range into tasks; each message is read once."""
    fill(stream_path, [25, 5], segment_size_bytes=1024)
    df = spark.read.format("adiskq").option("maxRecordsPerPartition", "10").load(stream_path)
    assert df.rdd.getNumPartitions() == 4  # 10 + 10 + 5, and 5
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(0, i) for i in range(25)] + [
        (1, i) for i in range(5)
    ]


def test_asking_for_vacuumed_offsets_fails_by_default(spark: SparkSession, stream_path: str) -> None:
    """failOnDataLoss defaults to true: offsets retention deleted make the read fail, saying how to go on."""
    fill(stream_path, [60], segment_size_bytes=1024)
    delete_oldest_segment(stream_path)
    with pytest.raises(PySparkException, match="failOnDataLoss=false"):
        rows(spark, stream_path, startingOffsets='{"0": 0}')


def test_without_fail_on_data_loss_vacuumed_offsets_are_skipped(spark: SparkSession, stream_path: str) -> None:
    """failOnDataLoss=false reads from the oldest offset still there."""
    fill(stream_path, [60], segment_size_bytes=1024)
    oldest = delete_oldest_segment(stream_path)
    got = rows(spark, stream_path, startingOffsets='{"0": 0}', failOnDataLoss="false")
    assert [offset for _, offset, _ in got] == list(range(oldest, 60))


def test_a_bad_option_is_refused_with_what_it_takes(spark: SparkSession, stream_path: str) -> None:
    """An unusable option value fails the query with a message naming the option."""
    fill(stream_path, [1])
    with pytest.raises(PySparkException, match="maxRecordsPerPartition='lots': give a whole number"):
        rows(spark, stream_path, maxRecordsPerPartition="lots")


def test_reading_a_missing_stream_says_so_and_creates_nothing(spark: SparkSession, stream_path: str) -> None:
    """A path without a stream fails with 'no adiskq stream' and is left absent."""
    with pytest.raises(PySparkException, match="no adiskq stream"):
        rows(spark, stream_path)
    assert not os.path.exists(stream_path)


def test_a_damaged_record_fails_the_read_with_its_file_and_position(spark: SparkSession, stream_path: str) -> None:
    """A flipped bit inside committed data raises CorruptRecordError naming the file and byte."""
    fill(stream_path, [3])
    path = data_files(stream_path, 0)[0]
    with open(path, "r+b") as data:
        data.seek(30)
        byte = data.read(1)
        data.seek(30)
        data.write(bytes([byte[0] ^ 0x40]))
    with pytest.raises(PySparkException, match=f"corrupt record in {path} at byte 0: CRC-32C mismatch"):
        rows(spark, stream_path)


def test_a_compressed_stream_reads_back_its_values(spark: SparkSession, stream_path: str) -> None:
    """Values of a stream made with compression="zstd" arrive decompressed, the plain ones beside them too."""
    events = order_events(30)

    async def push() -> None:
        async with adiskq.Producer(stream_path, compression="zstd", zstd_dictionary=trained_dictionary()) as producer:
            await producer.push_many(events)

    anyio.run(push)
    plain = StreamWriter.open(stream_path)  # a record written as it is, by the storage layer
    try:
        plain.partitions[0].append([encode_record(b"plain", b"k", T0_NS)], [T0_NS])
    finally:
        plain.close()
    assert [value for _, _, value in rows(spark, stream_path)] == [e.decode() for e in events] + ["plain"]


def test_a_new_compressed_streams_plain_zstd_values_read_back(spark: SparkSession, stream_path: str) -> None:
    """The values a compressed stream stores before its first dictionary (plain zstd frames, naming
    none) arrive decompressed, with no dictionary file in the stream."""
    events = order_events(30)

    async def push() -> None:
        async with adiskq.Producer(stream_path, compression="zstd") as producer:
            for event in events:
                await producer.push(event)

    anyio.run(push)
    assert not os.path.exists(os.path.join(stream_path, "dictionaries", "zstd-00000001.dict"))
    assert [value for _, _, value in rows(spark, stream_path)] == [e.decode() for e in events]
