"""Batch writes: ``df.write.format("adiskq").mode("append").save(path)``.

A batch write appends all of its rows or none: tasks do not touch the stream. Each task encodes its
rows (every row checked: a null value, a bad tag or header, a record above ``max_message_bytes``
fails the task) and stages them in files under ``STREAM/spark-staging/JOB/`` (see ``_staging``),
a new file every ``FLUSH_BYTES`` so a task's memory stays bounded. Only when every task has
succeeded does the driver's ``commit`` append the staged records, as a shared producer (waiting up
to ``lockTimeout``, 60 s by default, while an exclusive producer holds the stream; shared ones, a
live service's, write on beside it), fsync and delete the staging folder. A failed job's ``abort``
deletes the staging folder and appends nothing, so running the job again once its input is fixed
writes each row once.

If the commit itself fails part-way (the disk fills, the driver dies), the records it had appended
stay and its error says how many; a staging folder a dead driver left behind holds no record the
stream needs and can be deleted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import uuid
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
from ._staging import StagedRecords, load_staged, stage_in

__all__ = [
    "STAGING_DIR",
    "AdiskqBatchWriter",
    "StagedTask",
    "StreamFacts",
    "append_grouped",
    "prepare_stream",
    "publish",
]

logger = logging.getLogger("adiskq.spark")

# A task stages its rows in a new file every FLUSH_BYTES of encoded records.
FLUSH_BYTES: Final = 64 * 2**20
# Where batch writes stage their rows, inside the stream's folder (same file system, and seen by
# every executor that sees the stream): one folder per job.
STAGING_DIR: Final = "spark-staging"
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
class StagedTask(WriterCommitMessage):
    """What one task staged: its files, in the order it wrote them."""

    files: tuple[StagedRecords, ...]


def publish(options: WriteOptions, staged: Sequence[StagedRecords]) -> dict[int, int]:
    """Append staged records to the stream as a shared producer, one staging file at a time (so the
    driver holds one file's records in memory), and fsync; records appended per partition."""
    totals: dict[int, int] = {}
    if not any(item.layout for item in staged):
        return totals
    writer = StreamWriter.open(options.path, lock_timeout=options.lock_timeout, shared=True)
    try:
        refuse_above_level(options.path, options.refuse_writes_above)
        partition_count = writer.settings.partition_count
        for index, item in enumerate(staged):
            grouped = load_staged([item], partition_count, if_missing=_RUN_AGAIN)
            try:
                with writer.appending(grouped.records):
                    append_grouped(writer, grouped.records)
            except BaseException as error:
                if totals:
                    error.add_note(_appended_before(totals, index, len(staged)))
                raise
            for partition, count in grouped.counts().items():
                totals[partition] = totals.get(partition, 0) + count
        writer.sync()
    finally:
        writer.close()
    return totals


_RUN_AGAIN: Final = "Run the write again"


def _appended_before(totals: Mapping[int, int], index: int, file_count: int) -> str:
    appended = ", ".join(f"{count} to partition {partition}" for partition, count in sorted(totals.items()))
    return (
        f"the rows of {index} of the job's {file_count} staging files were appended before the failure ({appended}) "
        "and stay in the stream"
    )


class AdiskqBatchWriter(DataSourceArrowWriter):
    """Appends a DataFrame to a stream, all of it or none: tasks stage, the driver's commit appends."""

    def __init__(self, options: WriteOptions, columns: Columns, facts: StreamFacts) -> None:
        self.options = options
        self.columns = columns
        self.facts = facts
        # Made on the driver, so every task of this job stages in the same folder.
        self.staging = os.path.join(options.path, STAGING_DIR, uuid.uuid4().hex)

    def _stage(self, grouped: Grouped, files: list[StagedRecords]) -> None:
        if grouped.message_count:
            refuse_above_level(self.options.path, self.options.refuse_writes_above)
            files.append(stage_in(self.staging, grouped))
            grouped.clear()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedTask:
        """Encode and check the task's rows and stage them; ``commit`` appends them."""
        grouped = Grouped(self.facts.partition_count)
        files: list[StagedRecords] = []
        for batch in iterator:
            grouped.encode(batch, self.columns, self.facts.max_message_bytes)
            if grouped.size_bytes >= FLUSH_BYTES:
                self._stage(grouped, files)
        self._stage(grouped, files)
        return StagedTask(tuple(files))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task succeeded: append what they staged, then delete the staging folder."""
        try:
            publish(self.options, [item for m in messages if isinstance(m, StagedTask) for item in m.files])
        finally:
            self._remove_staging()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """A task failed: nothing was appended; delete what the tasks staged."""
        self._remove_staging()
        logger.warning("the write to %s failed; none of its rows were appended", self.options.path)

    def _remove_staging(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        with contextlib.suppress(OSError):  # the last job's folder: leave the parent when others use it
            os.rmdir(os.path.dirname(self.staging))
