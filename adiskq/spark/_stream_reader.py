"""Streaming reads: offsets ``{"<partition>": next_offset}``, read limits and Trigger.AvailableNow.

Spark asks for the latest offsets many times a second, so ``latestOffset`` never lists or reads
segments: it stats each partition's active ``.index`` file (24 bytes a committed message) and the
file the next segment would have, and follows a roll when that one appears. The partition count is
re-read from ``settings.json`` only when that file changes (a producer may add partitions).

A stream whose format may hold Kafka transactions ends each micro-batch at the partition's last
stable offset instead (``_stable_offsets.py``: what was written since the last planning is scanned
once), so the query waits at a transaction still open rather than failing, and goes on once its
marker is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .._sansio.entries import INDEX_ENTRY_BYTES
from .._sansio.naming import INDEX, PARTS_DIR, SETTINGS_FILE, partition_dir_name
from .._storage.partition_reader import PartitionReader
from .._storage.segment_files import segment_path
from .._storage.stream import StreamReader
from ._options import InvalidOptionError, ReadOptions
from ._reader import OffsetRange, chosen_partitions, plan_splits, read_range, resolve_start
from ._stable_offsets import StableOffsets

__all__ = ["AdiskqStreamReader", "LatestOffsets", "offsets_from_json", "offsets_to_json"]


def partition_directory(stream_path: str, partition: int) -> str:
    """The folder of one partition."""
    return os.path.join(stream_path, PARTS_DIR, partition_dir_name(partition))


def offsets_to_json(offsets: Mapping[int, int]) -> dict[str, int]:
    """``{"0": 5, "1": 7}``: string keys in partition order, so equal offsets are equal JSON."""
    return {str(partition): offsets[partition] for partition in sorted(offsets)}


def offsets_from_json(offsets: Mapping[str, object]) -> dict[int, int]:
    """Partition -> next offset from Spark's offset JSON."""
    parsed = {}
    for key, value in offsets.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidOptionError(f"the offset {key!r}: {value!r} in the query's checkpoint is not an offset")
        parsed[int(key)] = value
    return parsed


class LatestOffsets:
    """The next offset of each partition, from file sizes only (a few ``stat`` calls a partition)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._settings_stamp: tuple[int, int] | None = None
        self._partition_count = 0
        self._holds_transactions = False
        self._active: dict[int, int] = {}  # partition -> base offset of its active segment

    def partition_count(self) -> int:
        """Partitions of the stream now (``settings.json`` is parsed again only when it changed)."""
        stat = os.stat(os.path.join(self.path, SETTINGS_FILE))
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._settings_stamp:
            stream = StreamReader.open(self.path)
            self._partition_count = stream.partition_count
            self._holds_transactions = stream.settings.holds_transactions
            self._settings_stamp = stamp
        return self._partition_count

    def holds_transactions(self) -> bool:
        """Whether the stream's format may hold Kafka transactions (as of ``partition_count``'s look)."""
        return self._holds_transactions

    def next_offset(self, partition: int) -> int:
        """The offset the next message of ``partition`` will get."""
        directory = partition_directory(self.path, partition)
        base = self._active.get(partition)
        if base is None:
            base = self._find_active(directory, partition)
        while True:
            try:
                entries = os.stat(segment_path(directory, base, INDEX)).st_size // INDEX_ENTRY_BYTES
            except FileNotFoundError:
                # Vacuum never deletes the active segment: the partition is new, or the stream was
                # replaced. Look at the folder once more.
                found = self._find_active(directory, partition)
                if found == base:
                    return base
                base = found
                continue
            next_offset = base + entries
            if entries and os.path.exists(segment_path(directory, next_offset, INDEX)):
                base = next_offset  # the segment rolled
                continue
            self._active[partition] = base
            return next_offset

    @staticmethod
    def _find_active(directory: str, partition: int) -> int:
        try:
            bases = PartitionReader(directory, partition).segment_bases()
        except FileNotFoundError:
            return 0
        return bases[-1] if bases else 0

    def snapshot(self, partitions: list[int]) -> dict[int, int]:
        """The next offset of each of ``partitions``."""
        return {partition: self.next_offset(partition) for partition in partitions}


def _limit(start: Mapping[int, int], latest: Mapping[int, int], max_rows: int) -> dict[int, int]:
    """End offsets that read at most ``max_rows`` in all.

    Each partition with a backlog gets one row first (while the limit lasts), so a small partition
    is never starved by a busy one; the rest is shared in proportion to the backlogs, largest
    remainders first.
    """
    backlog = {p: max(0, latest[p] - start[p]) for p in latest}
    if sum(backlog.values()) <= max_rows:
        return dict(latest)
    share = dict.fromkeys(backlog, 0)
    left = max_rows
    for p in sorted(backlog):
        if backlog[p] and left:
            share[p] = 1
            left -= 1
    rest = {p: backlog[p] - share[p] for p in backlog}
    total = sum(rest.values())
    if left and total:
        exact = {p: rest[p] * left / total for p in rest}
        extra = {p: int(exact[p]) for p in rest}
        remaining = left - sum(extra.values())
        for p in sorted(rest, key=lambda q: (extra[q] - exact[q], q))[:remaining]:
            extra[p] += 1
        for p in rest:
            share[p] += min(extra[p], rest[p])
    return {p: start[p] + share[p] for p in latest}


class AdiskqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("adiskq")``."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._latest = LatestOffsets(options.path)
        self._target: dict[int, int] | None = None  # Trigger.AvailableNow stops here
        self._stable = StableOffsets(options.path)

    def _partitions(self) -> list[int]:
        return chosen_partitions(self.options, self._latest.partition_count())

    def initialOffset(self) -> dict[str, int]:
        """Where a new query starts: ``startingTimestamp``, else ``startingOffsets`` (default latest)."""
        stream = StreamReader.open(self.options.path)
        offsets = {}
        for partition in self._partitions():
            bounds = stream.partition(partition).bounds()
            offsets[partition] = resolve_start(self.options, stream, partition, bounds, self.options.starting_offsets)
        return offsets_to_json(offsets)

    def _start_of_new_partition(self, partition: int) -> int:
        # A partition added after the query started is read from its beginning, as Kafka's source does.
        try:
            bases = PartitionReader(partition_directory(self.options.path, partition), partition).segment_bases()
        except FileNotFoundError:
            return 0
        return bases[0] if bases else 0

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """The end of the next micro-batch: what is there now, within the read limit."""
        begin = offsets_from_json(start)
        partitions = self._partitions()
        latest = self._latest.snapshot(partitions)
        if self._target is not None:
            # AvailableNow: nothing written after the query started, and no partition added since.
            latest = {p: min(latest[p], self._target[p]) for p in latest if p in self._target}
        for partition in latest:
            if partition not in begin:
                begin[partition] = min(self._start_of_new_partition(partition), latest[partition])
        latest = {p: max(latest[p], begin[p]) for p in latest}
        if self._latest.holds_transactions():
            latest = {p: self._stable.stable_end(p, begin[p], latest[p]) for p in latest}
        if isinstance(limit, ReadMaxRows):
            end = _limit(begin, latest, limit.max_rows)
        elif isinstance(limit, ReadMinRows) and sum(latest[p] - begin[p] for p in latest) < limit.min_rows:
            end = {p: begin[p] for p in latest}
        else:
            end = latest
        return offsets_to_json({**begin, **end})

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxRecordsPerTrigger`` if given."""
        if self.options.max_records_per_trigger is not None:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, int]:
        """What the stream holds now, for the query's progress reports."""
        return offsets_to_json(self._latest.snapshot(self._partitions()))

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an AvailableNow run at what the stream holds now."""
        self._target = self._latest.snapshot(self._partitions())

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[OffsetRange]:
        """The micro-batch's ranges, split like a batch read's."""
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        ranges = [(p, begin.get(p, 0), finish[p]) for p in sorted(finish) if finish[p] > begin.get(p, 0)]
        return plan_splits(ranges, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The range's messages as Arrow batches (files are opened here, on the executor)."""
        if not isinstance(partition, OffsetRange):
            return iter(())
        return read_range(
            self.options.path, partition, fail_on_data_loss=self.options.fail_on_data_loss, tags=self.options.tags
        )

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the query's checkpoint holds its progress."""

    def stop(self) -> None:
        """Close the files the planning kept open."""
        self._stable.close()
