"""Batch writes: ``df.write.format("adiskq").mode("append").save(path)``.

Tasks write as shared producers (``StreamWriter.open(shared=True)``), so a job appends beside a live
service's shared producers and beside its own other tasks. Each task encodes its rows first, then
opens the stream shared (waiting up to ``lockTimeout``, 60 s by default, while an exclusive producer
holds it), appends each partition's rows under that partition's lock, fsyncs and closes. A task that
cannot open in time fails with ``StreamLockedError``, which names the holder (pid and host). A task holding more than
``FLUSH_BYTES`` of encoded rows appends them and goes on, so its memory stays bounded.

Batch writes append; nothing appended is taken back. If a job fails, what its finished tasks wrote
stays in the stream (as with Spark's Kafka sink); streaming writes are exactly once (see ``_sink``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from .._errors import StreamNotFoundError
from .._sansio.codec import record_timestamp
from .._storage.disk_guard import DiskGuard
from .._storage.settings import require_tags
from .._storage.stream import StreamReader, StreamWriter
from ._encode import Columns, Grouped
from ._options import WriteOptions

__all__ = ["AdiskqBatchWriter", "AppendReceipt", "StreamFacts", "append_grouped", "prepare_stream"]

logger = logging.getLogger("adiskq.spark")

FLUSH_BYTES: Final = 64 * 2**20
# Records go to PartitionWriter.append in slices of about this size, so segments roll near their
# size limit even when one task appends much more than a segment holds.
APPEND_SLICE_BYTES: Final = 4 * 2**20


@dataclasses.dataclass(frozen=True, slots=True)
class StreamFacts:
    """What tasks need to know of the stream before they encode rows."""

    partition_count: int
    max_message_bytes: int


def prepare_stream(options: WriteOptions, *, tagged: bool = False) -> StreamFacts:
    """The stream's partition count and record limit, creating the stream if it is missing; rows
    with a ``tag`` column are refused, before any is written, by a stream whose format has no tags."""
    try:
        settings = StreamReader.open(options.path).settings
    except StreamNotFoundError:
        writer = StreamWriter.open(
            options.path, partitions=options.partition_count or 1, lock_timeout=options.lock_timeout, shared=True
        )
        settings = writer.settings
        writer.close()
    if tagged:
        require_tags(settings, options.path)
    return StreamFacts(settings.partition_count, settings.max_message_bytes)


def refuse_above_level(path: str, level: float | None) -> None:
    """``DiskUsageRefusedError`` if the stream's file system is fuller than ``level`` (a producer's
    ``refuse_writes_above``). One measurement per append: a task appends megabytes at a time."""
    if level is not None:
        DiskGuard(path, level).measure()


def _slices(records: Sequence[bytes]) -> Iterator[Sequence[bytes]]:
    start = size = 0
    for index, record in enumerate(records):
        size += len(record)
        if size >= APPEND_SLICE_BYTES:
            yield records[start : index + 1]
            start, size = index + 1, 0
    if start < len(records):
        yield records[start:]


def append_grouped(
    writer: StreamWriter, grouped: Mapping[int, Sequence[bytes]], skip: Mapping[int, int] | None = None
) -> None:
    """Append each partition's records (after the first ``skip[p]``); a shared writer must hold
    those partitions' locks (``StreamWriter.appending``)."""
    for partition in sorted(grouped):
        records = grouped[partition][(skip or {}).get(partition, 0) :]
        target = writer.partitions[partition]
        for piece in _slices(records):
            target.append(piece, [record_timestamp(record) for record in piece])


@dataclasses.dataclass(frozen=True)
class AppendReceipt(WriterCommitMessage):
    """What one task appended: records per partition."""

    counts: dict[int, int]


class AdiskqBatchWriter(DataSourceArrowWriter):
    """Appends a DataFrame to a stream; tasks write as shared producers, each partition in turn."""

    def __init__(self, options: WriteOptions, columns: Columns, facts: StreamFacts) -> None:
        self.options = options
        self.columns = columns
        self.facts = facts

    def _append(self, grouped: Grouped, totals: dict[int, int]) -> None:
        if not grouped.message_count:
            return
        writer = StreamWriter.open(self.options.path, lock_timeout=self.options.lock_timeout, shared=True)
        try:
            refuse_above_level(self.options.path, self.options.refuse_writes_above)
            placed = grouped.regrouped(writer.settings.partition_count)
            with writer.appending(placed.records):
                append_grouped(writer, placed.records)
            writer.sync()
        finally:
            writer.close()
        for partition, count in placed.counts().items():
            totals[partition] = totals.get(partition, 0) + count
        grouped.clear()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AppendReceipt:
        """Encode the task's rows and append them, taking the stream's lock for each append."""
        grouped = Grouped(self.facts.partition_count)
        totals: dict[int, int] = {}
        for batch in iterator:
            grouped.encode(batch, self.columns, self.facts.max_message_bytes)
            if grouped.size_bytes >= FLUSH_BYTES:
                self._append(grouped, totals)
        self._append(grouped, totals)
        return AppendReceipt(totals)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing left to do: every task appended and fsynced its rows before it reported."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Say what stays: a stream is append-only, so finished tasks' rows are not taken back."""
        appended = sum(sum(m.counts.values()) for m in messages if isinstance(m, AppendReceipt))
        if appended:
            logger.warning(
                "the write to %s failed; %d rows its finished tasks appended stay in the stream",
                self.options.path,
                appended,
            )
