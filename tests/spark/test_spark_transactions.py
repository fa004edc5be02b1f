"""The Spark data source's reads (``read_range``, what batch and streaming reads run on executors)
and Kafka transactions: a committed transaction's records are rows, an aborted one's and the
markers never are, a batch read to the end of what is there stops before a transaction still open,
and a range asked past one fails clearly instead of leaving out what comes after it."""

from __future__ import annotations

import anyio
import pytest

import adiskq
from adiskq._async import partition_writes
from adiskq.spark import TransactionOpenError
from adiskq.spark._options import ReadOptions
from adiskq.spark._reader import AdiskqBatchReader, OffsetRange, read_range

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
