"""The Spark data source's reads (``read_range``, what batch and streaming reads run on executors)
and Kafka transactions: a committed transaction's records are rows, an aborted one's and the
markers never are, a batch read to the end of what is there stops before a transaction still open,
a range asked past one fails clearly instead of leaving out what comes after it, and a streaming
query waits at one (each micro-batch ends at the last stable offset) and goes on after its marker."""

from __future__ import annotations

import os
import pathlib

import anyio
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import adiskq
from adiskq._async import partition_writes
from adiskq._storage.cursors import PartitionCursor
from adiskq.spark import TransactionOpenError
from adiskq.spark._options import ReadOptions
from adiskq.spark._reader import AdiskqBatchReader, OffsetRange, read_range
from adiskq.spark._stream_reader import AdiskqStreamReader

A = (1000, 0)
B = (2000, 0)


async def _write(path: str, *, end_b: bool) -> None:
    async with adiskq.Producer(path) as producer:
        await producer.push(b"p0")  # 0
        await partition_writes.write(producer, 0, [adiskq.Record(b"a1"), adiskq.Record(b"a2")], transaction=A)
        await partition_writes.write(producer, 0, [adiskq.Record(b"b3")], transaction=B)  # 3
        await producer.push(b"p4")  # 4
        await partition_writes.write_marker(producer, 0, *A, commit=True, coordinator_epoch=0)  # 5
        if end_b:
            await partition_writes.write_marker(producer, 0, *B, commit=False, coordinator_epoch=0)  # 6
        for value in (b"p7", b"p8"):
            await producer.push(value)


def _rows(path: str, start: int, end: int) -> list[tuple[int, bytes]]:
    rows = []
    for batch in read_range(path, OffsetRange(0, start, end), fail_on_data_loss=True):
        table = batch.to_pydict()
        rows += list(zip(table["offset"], table["value"], strict=True))
    return rows


def test_rows_are_the_committed_records_only(stream_path: str) -> None:
    anyio.run(lambda: _write(stream_path, end_b=True))
    expected = [(0, b"p0"), (1, b"a1"), (2, b"a2"), (4, b"p4"), (7, b"p7"), (8, b"p8")]
    assert _rows(stream_path, 0, 9) == expected
    assert _rows(stream_path, 2, 7) == [(2, b"a2"), (4, b"p4")]


def test_a_range_past_an_open_transaction_fails_clearly(stream_path: str) -> None:
    anyio.run(lambda: _write(stream_path, end_b=False))
    assert _rows(stream_path, 0, 3) == [(0, b"p0"), (1, b"a1"), (2, b"a2")]
    with pytest.raises(TransactionOpenError, match="offset 3 of partition 0 is a record of a Kafka transaction"):
        _rows(stream_path, 0, 8)


def test_a_batch_read_to_the_end_stops_before_a_transaction_still_open(stream_path: str) -> None:
    """``endingOffsets`` latest (the default) plans to the last stable offset: the rows before the
    open transaction, none of it or after it, and no TransactionOpenError."""
    anyio.run(lambda: _write(stream_path, end_b=False))
    reader = AdiskqBatchReader(ReadOptions.parse({"path": stream_path}, streaming=False))
    planned = [(r.partition, r.start, r.end) for r in reader.partitions()]
    assert planned == [(0, 0, 3)]
    rows = [row for r in reader.partitions() for row in _rows(stream_path, r.start, r.end)]
    assert rows == [(0, b"p0"), (1, b"a1"), (2, b"a2")]


# Streaming queries at a transaction still open: each micro-batch ends at the last stable offset.


async def _write_open(path: str) -> None:
    """0 p0, 1 a1 (A), 2 p2, 3 a3 (A), 4 p4: A left open."""
    async with adiskq.Producer(path) as producer:
        await producer.push(b"p0")
        await partition_writes.write(producer, 0, [adiskq.Record(b"a1")], transaction=A)
        await producer.push(b"p2")
        await partition_writes.write(producer, 0, [adiskq.Record(b"a3")], transaction=A)
        await producer.push(b"p4")


async def _end_a(path: str, *, commit: bool) -> None:
    """A's marker (5), then 6 p6."""
    async with adiskq.Producer(path) as producer:
        await partition_writes.write_marker(producer, 0, *A, commit=commit, coordinator_epoch=0)
        await producer.push(b"p6")


def _streaming_rows(spark: SparkSession, name: str) -> list[tuple[int, str]]:
    return sorted((row.offset, row.value) for row in spark.table(name).collect())


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_streaming_query_waits_at_an_open_transaction_and_goes_on_after_its_marker(
    spark: SparkSession, stream_path: str, tmp_path: pathlib.Path, commit: bool
) -> None:
    """The query delivers what precedes the open transaction, keeps running (no
    TransactionOpenError), and once the marker is written delivers the transaction's records if it
    committed (none if it aborted) and what came after: every row exactly once."""
    anyio.run(_write_open, stream_path)
    name = f"open_txn_{'commit' if commit else 'abort'}"
    query = (
        spark.readStream.format("adiskq")
        .option("startingOffsets", "earliest")
        .load(stream_path)
        .selectExpr("offset", "cast(value as string) as value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        assert query.isActive
        assert query.exception() is None
        assert _streaming_rows(spark, name) == [(0, "p0")]

        anyio.run(lambda: _end_a(stream_path, commit=commit))
        query.processAllAvailable()
        assert query.isActive
        assert query.exception() is None
        expected = [(0, "p0"), (1, "a1"), (2, "p2"), (3, "a3"), (4, "p4"), (6, "p6")]
        if not commit:
            expected = [row for row in expected if not row[1].startswith("a")]
        assert _streaming_rows(spark, name) == expected
    finally:
        query.stop()


def test_planning_a_micro_batch_scans_only_what_was_written_since(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """latestOffset stops at the open transaction's first record, moves on after its marker, and a
    planning that finds nothing new in the partition lists no folder and reads no record."""
    anyio.run(_write_open, stream_path)
    reader = AdiskqStreamReader(ReadOptions.parse({"path": stream_path}, streaming=True))
    try:
        assert reader.latestOffset({"0": 0}, ReadAllAvailable()) == {"0": 1}

        def no_reading(*args: object, **kwargs: object) -> None:
            raise AssertionError("planning with nothing new read the partition")

        with monkeypatch.context() as patched:
            patched.setattr(os, "scandir", no_reading)
            patched.setattr(os, "listdir", no_reading)
            patched.setattr(PartitionCursor, "peek_stored", no_reading)
            assert reader.latestOffset({"0": 1}, ReadAllAvailable()) == {"0": 1}
            assert reader.reportLatestOffset() == {"0": 5}
        anyio.run(lambda: _end_a(stream_path, commit=True))
        assert reader.latestOffset({"0": 1}, ReadAllAvailable()) == {"0": 7}
        assert reader.latestOffset({"0": 1}, ReadMaxRows(2)) == {"0": 3}
    finally:
        reader.stop()
