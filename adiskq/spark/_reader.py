"""Batch reads: the offset range of each partition, split into Spark partitions, read as Arrow batches.

Planning runs on the driver and resolves ``earliest``/``latest``/timestamps to numbers once, so every
task reads a fixed range ``[start, end)``. A task opens the stream's files inside ``read()`` (nothing
open travels in a pickled partition) and uses only the synchronous storage layer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, EqualTo, Filter, In, InputPartition

from .._errors import InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES
from .._sansio.tags import TagFilter
from .._storage.columns import RawCursor
from .._storage.partition_reader import PartitionReader
from .._storage.stream import StreamReader
from .._storage.transaction_outcomes import OpenTransactions
from ._arrow import messages_to_batch, run_to_batch
from ._options import EARLIEST, LATEST, InvalidOptionError, OffsetSpec, ReadOptions

__all__ = [
    "AdiskqBatchReader",
    "AdiskqFilteringBatchReader",
    "OffsetRange",
    "plan_splits",
    "pushed_tags",
    "read_range",
    "resolve_start",
]

logger = logging.getLogger("adiskq.spark")

# Rows and bytes per Arrow batch a task hands to Spark: large enough to amortise the per-batch cost
# on both sides, small enough to keep a task's memory flat.
BATCH_MAX_ROWS: Final = 65_536
BATCH_MAX_BYTES: Final = 32 * 2**20
# A tag-filtered read looks at this many offsets' tag hashes per step.
_TAG_SCAN_OFFSETS: Final = 65_536


@dataclasses.dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One Spark partition: offsets ``start`` (inclusive) to ``end`` (exclusive) of one stream partition."""

    partition: int
    start: int
    end: int


def _data_loss_message(partition: int, wanted: int, oldest: int) -> str:
    return f"offsets {wanted}..{oldest - 1} of partition {partition} were deleted by retention before they were read"


_DATA_LOSS_ADVICE: Final = (
    ". Set the option failOnDataLoss=false to skip what is gone and go on from the oldest offset, "
    "or start from offsets the stream still holds"
)


def resolve_start(
    reader_options: ReadOptions, stream: StreamReader, partition: int, bounds: tuple[int, int], spec: OffsetSpec
) -> int:
    """The first offset to read of ``partition`` for a starting spec (``startingTimestamp`` wins)."""
    oldest, next_offset = bounds
    if reader_options.starting_timestamp_ns is not None:
        return stream.partition(partition).offset_for_time(reader_options.starting_timestamp_ns)
    wanted = spec if isinstance(spec, int) else spec.get(partition, EARLIEST)
    if wanted == EARLIEST:
        return oldest
    if wanted == LATEST:
        return next_offset
    if wanted > next_offset:
        raise InvalidOptionError(
            f"option startingOffsets: offset {wanted} of partition {partition} is not written yet "
            f"(the next offset is {next_offset})"
        )
    if wanted < oldest:
        if reader_options.fail_on_data_loss:
            raise OffsetOutOfRangeError(
                _data_loss_message(partition, wanted, oldest) + _DATA_LOSS_ADVICE,
                partition=partition,
                offset=wanted,
                oldest_offset=oldest,
            )
        message = _data_loss_message(partition, wanted, oldest)
        logger.warning("%s; starting at offset %d (failOnDataLoss=false)", message, oldest)
        return oldest
    return wanted


def stable_end(reader: PartitionReader, next_offset: int) -> int:
    """``next_offset``, or the first offset of the oldest Kafka transaction still open in the
    partition before it (its last stable offset): a range planned to the end of what is there stops
    where readers stop, so its rows wait for the transaction's marker rather than fail with
    ``TransactionOpenError``. Reads the partition's records once (only a stream of a format that
    can hold transactions asks)."""
    firsts = OpenTransactions(reader).catch_up()
    return min([next_offset, *firsts.values()])


def _resolve_end(spec: OffsetSpec, partition: int, next_offset: int) -> int:
    wanted = spec if isinstance(spec, int) else spec.get(partition, LATEST)
    if wanted == LATEST:
        return next_offset
    if wanted > next_offset:
        raise InvalidOptionError(
            f"option endingOffsets: offset {wanted} of partition {partition} is not written yet "
            f'(the next offset is {next_offset}); use -1 or "latest" for the end of what is there'
        )
    return wanted


def chosen_partitions(options: ReadOptions, partition_count: int) -> list[int]:
    """The partitions a read covers: those of the ``partitions`` option, or all."""
    if options.partitions is None:
        return list(range(partition_count))
    missing = [p for p in options.partitions if p >= partition_count]
    if missing:
        raise InvalidOptionError(
            f"option partitions: the stream has partitions 0..{partition_count - 1}, not {missing[0]}"
        )
    return list(options.partitions)


def plan_splits(ranges: Sequence[tuple[int, int, int]], max_records: int) -> list[OffsetRange]:
    """``(partition, start, end)`` ranges cut into Spark partitions of at most ``max_records`` each."""
    return [
        OffsetRange(partition, split_start, min(end, split_start + max_records))
        for partition, start, end in ranges
        for split_start in range(start, end, max_records)
    ]


def read_range(
    path: str, split: OffsetRange, *, fail_on_data_loss: bool, tags: frozenset[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """Every message of ``split`` (with one of ``tags``, when given) as Arrow batches, opening the
    files here (on the executor). Planned offsets that are gone when the task reads them (retention
    deleted them, or a crash took them back) fail the read, or with ``failOnDataLoss=false`` are
    skipped with a warning: the same rule with and without ``tags``."""
    reader = StreamReader.open(path).partition(split.partition)
    if tags is not None:
        yield from _read_tagged_range(reader, split, TagFilter(tags), fail_on_data_loss)
        return
    position = split.start
    with RawCursor(reader, position) as cursor:
        while position < split.end:
            try:
                run = cursor.read(min(BATCH_MAX_ROWS, split.end - position), BATCH_MAX_BYTES)
            except OffsetOutOfRangeError as error:
                position = _past_deleted(error, split, position, fail_on_data_loss)
                cursor.seek(position)
                continue
            if run is None:
                _taken_back(split, position, fail_on_data_loss)
                return
            yield run_to_batch(
                run,
                max_record_bytes=DEFAULT_MAX_RECORD_BYTES,
                dictionaries=reader.dictionaries,
                outcomes=reader.transaction_outcomes(),
            )
            position += run.message_count


def _read_tagged_range(
    reader: PartitionReader, split: OffsetRange, tag_filter: TagFilter, fail_on_data_loss: bool
) -> Iterator[pa.RecordBatch]:
    """The messages of ``split`` with a wanted tag: selected by the tag column, only their records
    read, each tag confirmed from its record (``SegmentReader.read_tagged``)."""
    with reader.cursor(split.start) as cursor:
        while cursor.position < split.end:
            try:
                messages, passed = cursor.read_tagged(
                    BATCH_MAX_ROWS, min(_TAG_SCAN_OFFSETS, split.end - cursor.position), tag_filter, BATCH_MAX_BYTES
                )
            except OffsetOutOfRangeError as error:
                cursor.seek(_past_deleted(error, split, cursor.position, fail_on_data_loss))
                continue
            if not passed:
                _taken_back(split, cursor.position, fail_on_data_loss)
                return
            if messages:
                yield messages_to_batch(messages)


def _past_deleted(error: OffsetOutOfRangeError, split: OffsetRange, position: int, fail_on_data_loss: bool) -> int:
    """Where a read goes on after retention deleted the planned offsets from ``position``: raises
    under ``failOnDataLoss=true``, else warns and returns the oldest offset still there (or the
    split's end)."""
    oldest = error.oldest_offset if error.oldest_offset is not None else split.end
    oldest = min(oldest, split.end)
    message = _data_loss_message(split.partition, position, oldest)
    if fail_on_data_loss:
        raise OffsetOutOfRangeError(
            message + _DATA_LOSS_ADVICE, partition=split.partition, offset=position, oldest_offset=oldest
        ) from None
    logger.warning("%s; skipped them (failOnDataLoss=false)", message)
    return oldest


def _taken_back(split: OffsetRange, position: int, fail_on_data_loss: bool) -> None:
    """Planned offsets from ``position`` that are not there any more: a crash took back messages
    whose data never reached the disk, and recovery cut them. Raises under ``failOnDataLoss=true``,
    else warns (the split ends there)."""
    message = (
        f"offsets {position}..{split.end - 1} of partition {split.partition} are no longer in the "
        "stream (a crash took them back before they reached the disk)"
    )
    if fail_on_data_loss:
        raise OffsetOutOfRangeError(
            message + "; set failOnDataLoss=false to skip them", partition=split.partition, offset=position
        )
    logger.warning("%s; skipped them (failOnDataLoss=false)", message)


def pushed_tags(condition: Filter) -> frozenset[str] | None:
    """The tags a filter Spark offers keeps, when the source can apply it (``tag = 'a'``,
    ``tag IN ('a', 'b')``); None for any other filter, which Spark then applies itself. A value no
    message can carry as a tag (not a str, empty, too long) leaves the filter to Spark too."""
    if isinstance(condition, EqualTo) and condition.attribute == ("tag",):
        values: tuple[object, ...] = (condition.value,)
    elif isinstance(condition, In) and condition.attribute == ("tag",):
        values = tuple(value for value in condition.value if value is not None)  # NULL never matches
    else:
        return None
    if not values or not all(isinstance(value, str) for value in values):
        return None
    tags = frozenset(str(value) for value in values)
    try:
        TagFilter(tags)
    except (InvalidArgumentError, TypeError):
        return None
    return tags


class AdiskqBatchReader(DataSourceReader):
    """``spark.read.format("adiskq")``: one Spark partition per stream partition, long ones split."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.pushed: frozenset[str] | None = None  # the tags pushed filters keep (AND: intersected)

    def _tags(self) -> frozenset[str] | None:
        """The tags a read keeps: the option's, the pushed filters', or those in both."""
        option, pushed = self.options.tags, self.pushed
        if option is None or pushed is None:
            return option if pushed is None else pushed
        return option & pushed

    def partitions(self) -> list[OffsetRange]:
        """Resolve the offsets now, on the driver, so that every task reads a fixed range."""
        options = self.options
        stream = StreamReader.open(options.path)
        ranges = []
        for partition in chosen_partitions(options, stream.partition_count):
            bounds = stream.partition(partition).bounds()
            start = resolve_start(options, stream, partition, bounds, options.starting_offsets)
            end = _resolve_end(options.ending_offsets, partition, bounds[1])
            if end == bounds[1] and stream.settings.holds_transactions:
                end = max(start, stable_end(stream.partition(partition), end))
            if end < start:
                raise InvalidOptionError(
                    f"partition {partition}: the ending offset {end} is before the starting offset {start}"
                )
            ranges.append((partition, start, end))
        return plan_splits(ranges, options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The split's messages as Arrow batches."""
        tags = self._tags()
        if not isinstance(partition, OffsetRange) or tags == frozenset():
            return iter(())  # Spark's stand-in partition when there was nothing to read; no tag wanted
        return read_range(self.options.path, partition, fail_on_data_loss=self.options.fail_on_data_loss, tags=tags)


class AdiskqFilteringBatchReader(AdiskqBatchReader):
    """The batch reader of ``.option("pushFilters", "true")``, for sessions with
    ``spark.sql.python.filterPushdown.enabled`` on: the filters ``tag = ...`` and ``tag IN (...)``
    are applied by the source, which reads only the records of those tags, selected by the tag
    column (as the ``tags`` option does; both given: the tags in both). Spark applies every other
    filter itself."""

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:
        """Take the filters on the tag column the source applies; return the rest for Spark."""
        left = []
        for condition in filters:
            tags = pushed_tags(condition)
            if tags is None:
                left.append(condition)
            else:
                self.pushed = tags if self.pushed is None else self.pushed & tags
        return left
