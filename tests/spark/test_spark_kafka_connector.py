"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) reading and writing adiskq
streams through the Kafka gateway: batch reads with offset ranges and headers, data loss, an
AvailableNow streaming read that resumes from its checkpoint, and the sink.

The suite's one Spark session carries the connector's pinned jars (``spark.jars``, tests/conftest.py).
Streams are written with the storage layer before the gateway first serves them, and the sink's
output is read back with the library, so each side of the gateway is judged by the other.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from collections.abc import Iterator

import pytest
from anyio.from_thread import start_blocking_portal
from pyspark.sql import DataFrame, SparkSession
from support.spark import T0_NS, delete_oldest_segment, fill, read_all, write_messages

from adiskq.kafka import KafkaGateway


@dataclasses.dataclass
class Gateway:
    """A gateway serving a root folder from a thread."""

    root: str
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def path(self, topic: str) -> str:
        return os.path.join(self.root, topic)


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway on a free port over an empty root (one per module and backend); new topics get 2 partitions."""
    root = str(tmp_path_factory.mktemp("spark-kafka-root"))
    with start_blocking_portal(backend=str(request.param)) as portal:
        served = KafkaGateway(root, port=0, partitions=2)
        with portal.wrap_async_context_manager(served):
            yield Gateway(root, served.port)


def kafka_read(spark: SparkSession, gateway: Gateway, topic: str, **options: str) -> DataFrame:
    """A batch read of ``topic`` through the gateway with Spark's Kafka connector."""
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", gateway.bootstrap)
    return reader.option("subscribe", topic).options(**options).load()


def offsets(topic: str, by_partition: dict[int, int]) -> str:
    """The connector's JSON offsets: ``{"topic": {"0": 2, ...}}`` (-2 earliest, -1 latest)."""
    return json.dumps({topic: {str(p): offset for p, offset in by_partition.items()}})


def test_a_batch_read_gives_each_message_with_its_kafka_columns(spark: SparkSession, gateway: Gateway) -> None:
    """key, value, topic, partition, offset, timestamp and (includeHeaders) headers of each message."""
    topic = "batch-columns"
    write_messages(
        gateway.path(topic),
        [
            (0, b"alice", b"hello", T0_NS + 1_234_000_000, {"type": b"greeting", "n": b"\x00\x01"}),
            (1, b"bob", b"", T0_NS, None),
        ],
    )
    df = kafka_read(spark, gateway, topic, includeHeaders="true").selectExpr("*", "unix_millis(timestamp) AS millis")
    got = {row.partition: row for row in df.collect()}
    assert sorted(got) == [0, 1]
    first, second = got[0], got[1]
    assert (bytes(first.key), bytes(first.value), first.topic, first.offset) == (b"alice", b"hello", topic, 0)
    assert first.millis == (T0_NS + 1_234_000_000) // 1_000_000
    assert first.timestampType == 0  # CreateTime: the producer's timestamp, kept by the stream
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("type", b"greeting"), ("n", b"\x00\x01")]
    assert (bytes(second.key), bytes(second.value), second.headers) == (b"bob", b"", None)  # as from Kafka


def test_starting_and_ending_offsets_choose_each_partitions_range(spark: SparkSession, gateway: Gateway) -> None:
    """startingOffsets/endingOffsets as JSON per partition (-2 earliest, -1 latest); the end is exclusive."""
    topic = "batch-ranges"
    fill(gateway.path(topic), [10, 6])
    df = kafka_read(
        spark,
        gateway,
        topic,
        startingOffsets=offsets(topic, {0: 3, 1: -2}),
        endingOffsets=offsets(topic, {0: 5, 1: -1}),
    )
    got = sorted((r.partition, r.offset, bytes(r.value).decode()) for r in df.collect())
    assert got == [(0, 3, "v0-3"), (0, 4, "v0-4")] + [(1, i, f"v1-{i}") for i in range(6)]


def test_offsets_deleted_by_retention_fail_the_read_unless_fail_on_data_loss_is_off(
    spark: SparkSession, gateway: Gateway
) -> None:
    """A range starting before the oldest offset still stored fails (failOnDataLoss, the default),
    or is read from that oldest offset on with failOnDataLoss=false."""
    topic = "batch-data-loss"
    fill(gateway.path(topic), [200], segment_size_bytes=1024)
    oldest = delete_oldest_segment(gateway.path(topic))
    assert oldest > 0
    from_zero = offsets(topic, {0: 0})
    with pytest.raises(Exception, match=r"(?i)data may have been lost"):
        kafka_read(spark, gateway, topic, startingOffsets=from_zero).collect()
    df = kafka_read(spark, gateway, topic, startingOffsets=from_zero, failOnDataLoss="false")
    assert sorted(r.offset for r in df.collect()) == list(range(oldest, 200))


def test_an_available_now_stream_reads_everything_once_and_resumes_from_its_checkpoint(
    spark: SparkSession, gateway: Gateway, tmp_path: pathlib.Path
) -> None:
    """Each AvailableNow run reads what is there when it starts, at most 7 offsets a micro-batch,
    and the next run with the same checkpoint reads only what came after."""
    topic = "stream-resume"
    fill(gateway.path(topic), [9, 5])
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run() -> list[tuple[int, int]]:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", gateway.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "7")
            .load()
            .select("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", output)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "the AvailableNow query did not finish in 180 s"
        assert query.exception() is None
        return sorted((r.partition, r.offset) for r in spark.read.parquet(output).collect())

    assert run() == [(0, i) for i in range(9)] + [(1, i) for i in range(5)]
    more = spark.createDataFrame([(0, b"late-a"), (1, b"late-b")], "partition int, value binary")
    more.write.format("kafka").option("kafka.bootstrap.servers", gateway.bootstrap).option("topic", topic).save()
    assert run() == [(0, i) for i in range(10)] + [(1, i) for i in range(6)]  # each offset once


def test_the_sink_writes_rows_the_library_reads_back(spark: SparkSession, gateway: Gateway) -> None:
    """A DataFrame written with format("kafka") lands in the stream: chosen partitions, keys, values and
    headers, in the DataFrame's order; a null key is the gateway's empty key plus its marker header,
    and comes back to the connector as null."""
    topic = "sink-rows"
    rows = [(i % 2, f"k{i}".encode() if i else None, f"v{i}".encode(), [("n", str(i).encode())]) for i in range(20)]
    schema = "partition int, key binary, value binary, headers array<struct<key: string, value: binary>>"
    df = spark.createDataFrame(rows, schema).coalesce(1)  # one task: the stream's order is the rows' order
    df.write.format("kafka").option("kafka.bootstrap.servers", gateway.bootstrap).option("topic", topic).save()
    got = [
        (m.partition, m.offset, bytes(m.key), bytes(m.value), dict(m.headers)) for m in read_all(gateway.path(topic))
    ]
    expected = [
        (p, i // 2, key or b"", value, {"n": str(i).encode()} | ({} if key else {"adiskq.kafka.null": b"key"}))
        for p in (0, 1)
        for i, (partition, key, value, _) in enumerate(rows)
        if partition == p
    ]
    assert got == expected
    first = kafka_read(spark, gateway, topic, endingOffsets=offsets(topic, {0: 1, 1: 0})).collect()
    assert [(r.key, bytes(r.value)) for r in first] == [(None, b"v0")]
