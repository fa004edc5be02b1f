"""The readers' side of a partition: where it starts and ends, lookups by time and key, stats.

Needs only read permission and never changes a file. Sequential reading goes through the cursors
(``cursors.py``); ``find`` uses each segment's key index where it is sound and searches the data
where it is not (or where the active segment's index lags its last records).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections.abc import Iterator, Sequence

from .._errors import CorruptRecordError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio import keyindex as keyindex_format
from .._sansio import tags as tags_format
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES, TransactionalBatch
from .._sansio.entries import INDEX_ENTRY_BYTES, TIMEINDEX_ENTRY, TIMEINDEX_ENTRY_BYTES
from .._sansio.naming import INDEX, KEYINDEX, TAGINDEX, TIMEINDEX, parse_segment_file
from .._sansio.values import Message, PartitionStats, ns_from_datetime
from . import keyindex
from .cursors import PartitionCursor
from .dictionaries import partition_stream_path, stream_dictionaries
from .files import open_read, read_file
from .log_start import load_log_start
from .segment_files import (
    entry_columns,
    entry_count,
    file_size,
    list_segment_files,
    record_timestamps,
    segment_path,
    timestamps,
)
from .segment_reader import SegmentReader
from .tag_stats import segment_tag_counts
from .transaction_outcomes import TransactionOutcomes, committed

__all__ = ["PartitionReader", "held_offsets"]

_INDEX_SUFFIX = "." + INDEX
# A search of a segment's data without its key index reads this many records at a time.
_SEARCH_CHUNK = 65_536


def held_offsets(oldest: int, next_offset: int) -> str:
    """What a partition holds, in words: ``offsets 3..9``, ``offset 3``, or ``no message``."""
    if next_offset <= oldest:
        return "no message"
    if next_offset == oldest + 1:
        return f"offset {oldest}"
    return f"offsets {oldest}..{next_offset - 1}"


class PartitionReader:
    """Read-only access to a partition; needs only read permission."""

    def __init__(self, directory: str, partition: int, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.directory = directory
        self.partition = partition
        self.max_record_bytes = max_record_bytes
        # The stream's zstd dictionaries, loaded when a compressed record first needs one.
        self.dictionaries = stream_dictionaries(partition_stream_path(directory))

    def segment_bases(self) -> list[int]:
        """Base offsets of the segments readers can see (those with an ``.index``), in order."""
        bases = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                # Only .index names are parsed: lookups list the folder every time.
                if entry.name.endswith(_INDEX_SUFFIX):
                    parsed = parse_segment_file(entry.name)
                    if parsed is not None and parsed[1] == INDEX and entry.is_file(follow_symlinks=False):
                        bases.append(parsed[0])
        return sorted(bases)

    def open_segment(self, base: int, *, sealed: bool = False) -> SegmentReader:
        """A reader of one segment (FileNotFoundError if it was vacuumed); ``sealed``: a later
        segment exists, so its data may be mapped (``SegmentReader.read_span``)."""
        return SegmentReader.open(
            self.directory,
            base,
            self.partition,
            max_record_bytes=self.max_record_bytes,
            sealed=sealed,
            dictionaries=self.dictionaries,
        )

    def bounds(self) -> tuple[int, int]:
        """``(oldest_offset, next_offset)`` of the partition now (the oldest raised to the log start
        offset, ``log_start.py``)."""
        bases = self.segment_bases()
        if not bases:
            return 0, 0
        last = bases[-1]
        next_offset = last + entry_count(self.directory, last)
        return min(max(bases[0], load_log_start(self.directory)), next_offset), next_offset

    def cursor(self, offset: int) -> PartitionCursor:
        """Sequential reading from ``offset`` on."""
        return PartitionCursor(self, offset)

    def transaction_outcomes(self) -> TransactionOutcomes:
        """What became of this partition's Kafka transactions (``transaction_outcomes.py``), kept
        across reads: made at the first transaction a reader of this partition meets."""
        outcomes = self.__dict__.get("_transaction_outcomes")
        if outcomes is None:
            outcomes = self.__dict__["_transaction_outcomes"] = TransactionOutcomes(self)
        return outcomes

    def read_one(self, offset: int) -> Message:
        """The message at ``offset``; OffsetOutOfRangeError if vacuumed or not written, or when the
        record there is not one a reader is given (a Kafka transaction's marker, or a record of a
        transaction aborted or still open)."""
        with self.cursor(offset) as cursor:
            messages = cursor.read(1)
            passed = cursor.position > offset
        if (messages and messages[0].offset != offset) or (not messages and passed):
            raise OffsetOutOfRangeError(
                f"offset {offset} of partition {self.partition} holds no message a reader is given: it is a Kafka "
                "transaction's commit or abort marker, or a record of a transaction that was aborted",
                partition=self.partition,
                offset=offset,
            )
        if not messages:
            oldest, next_offset = self.bounds()
            if oldest <= offset < next_offset:
                raise OffsetOutOfRangeError(
                    f"offset {offset} of partition {self.partition} is a record of a Kafka transaction still open "
                    "(or after one): it is given to readers once the transaction commits",
                    partition=self.partition,
                    offset=offset,
                )
            raise OffsetOutOfRangeError(
                f"offset {offset} of partition {self.partition} is not written yet "
                f"(the partition holds {held_offsets(oldest, next_offset)})"
            )
        return messages[0]

    def offset_of(self, position: str | int | dt.datetime) -> int:
        """The offset a start position names now: ``"oldest"``, ``"newest"`` (the next offset),
        ``"active-oldest"`` (the active segment's first), an offset, or a ``datetime`` (the first
        message stamped at or after it)."""
        if isinstance(position, dt.datetime):
            return self.offset_for_time(ns_from_datetime(position))
        if isinstance(position, int):
            return position
        if position == "active-oldest":
            bases = self.segment_bases()
            return bases[-1] if bases else 0
        if position not in ("oldest", "newest"):
            raise InvalidArgumentError(
                f"{position!r} is not a position: use oldest, newest, active-oldest, an offset or a datetime"
            )
        oldest, next_offset = self.bounds()
        return oldest if position == "oldest" else next_offset

    def _committed_timestamps(self, base: int) -> Sequence[int]:
        """The timestamps of the segment's committed messages (those its index covers), in offset
        order: the ``.timeindex``'s, and the records' own for the messages it lacks (a compact
        segment keeps none; a producer may still buffer the last ones). Empty when the segment was
        vacuumed meanwhile."""
        raw = read_file(segment_path(self.directory, base, TIMEINDEX)) or b""
        committed = entry_count(self.directory, base)
        stamps = timestamps(raw[: committed * TIMEINDEX_ENTRY_BYTES])
        if len(stamps) < committed:
            stamps.extend(record_timestamps(self.directory, base, len(stamps), committed))
        return stamps

    def offset_for_time(self, timestamp_ns: int) -> int:
        """The first offset whose timestamp is at or after ``timestamp_ns``; the next offset if none."""
        bases = self.segment_bases()
        start = load_log_start(self.directory)
        for base in bases:
            skip = max(0, start - base)  # the messages below the log start are not offered
            stamps = self._committed_timestamps(base)[skip:]
            if not stamps or max(stamps) < timestamp_ns:
                continue
            # The first entry at or after the time, found in C (timestamps need not be in order).
            return base + skip + list(map(timestamp_ns.__le__, stamps)).index(True)
        return self.bounds()[1]

    def newest_time(self) -> tuple[int, int] | None:
        """``(offset, timestamp_ns)`` of the message with the largest timestamp (the first of those
        that share it), or None when the partition holds no message. Timestamps need not be in order,
        so this reads every segment's time index (8 bytes a message), or a compact segment's records."""
        newest: tuple[int, int] | None = None
        start = load_log_start(self.directory)
        for base in self.segment_bases():
            skip = max(0, start - base)  # the messages below the log start are not offered
            stamps = self._committed_timestamps(base)[skip:]
            if stamps and (newest is None or max(stamps) > newest[1]):
                top = max(stamps)
                newest = (base + skip + stamps.index(top), top)
        return newest

    # -- lookup by key ---------------------------------------------------------------------------

    def find(
        self,
        key: bytes,
        *,
        since_ns: int | None = None,
        until_ns: int | None = None,
        limit: int | None = None,
        start_offset: int = 0,
        end_offset: int | None = None,
    ) -> list[Message]:
        """The messages with exactly this key, in offset order: those at offsets in
        ``[start_offset, end_offset)`` whose timestamp is in ``[since_ns, until_ns)``, the first
        ``limit`` of them.

        Each segment's key index names the candidates, and each candidate is read (CRC checked)
        and its key compared. A segment whose key index is missing or cannot be trusted, and the
        records of the active segment past its key index's end, are searched in the data instead.
        """
        hash_value = keyindex_format.key_hash(key)
        found: list[Message] = []
        bases = self.segment_bases()
        if bases:
            keyindex.forget_before(self.directory, bases[0])
        for number, base in enumerate(bases):
            following = bases[number + 1] if number + 1 < len(bases) else None
            if end_offset is not None and base >= end_offset:
                break
            if following is not None and following <= start_offset:
                continue
            for message in self._find_in_segment(base, key, hash_value, sealed=following is not None):
                if message.offset < start_offset or (end_offset is not None and message.offset >= end_offset):
                    continue
                if (since_ns is not None and message.timestamp_ns < since_ns) or (
                    until_ns is not None and message.timestamp_ns >= until_ns
                ):
                    continue
                found.append(message)
                if limit is not None and len(found) >= limit:
                    return found
        return found

    def _find_in_segment(self, base: int, key: bytes, hash_value: int, *, sealed: bool) -> Iterator[Message]:
        """The messages of one segment with this key, in offset order."""
        entries = entry_count(self.directory, base)
        if not entries:
            return
        path = segment_path(self.directory, base, KEYINDEX)
        if sealed:
            index = keyindex.sealed_index(self.directory, base, entries)
            if index is None:
                candidates, covered = [], 0
            else:
                candidates, covered = index.candidates(hash_value), entries
        else:
            # The active segment's key index is a bare hash column that may lag behind.
            candidates, covered = keyindex.column_candidates(path, entries, hash_value)
        if not candidates and covered >= entries:
            return
        try:
            segment = self.open_segment(base)
        except FileNotFoundError:
            return  # vacuumed meanwhile
        with contextlib.closing(segment):
            offsets = [base + candidate for candidate in candidates]
            if covered < entries:
                offsets += _search_data(segment, key, base + covered, base + entries)
            for offset in offsets:
                messages = segment.read_messages(offset, 1)
                if type(messages) is TransactionalBatch:  # only a committed transaction's record is found
                    messages, _ = committed(messages, self.transaction_outcomes())
                for message in messages:
                    if message.key == key:  # hash collisions and damaged key indexes end here
                        yield message

    def stats(self) -> PartitionStats:
        """Oldest and next offsets, segments, bytes and timestamps of the partition now."""
        files = list_segment_files(self.directory)
        bases = sorted(base for base, extensions in files.items() if INDEX in extensions)
        size = sum(file_size(segment_path(self.directory, b, e)) for b in files for e in files[b])
        if not bases:
            return PartitionStats(self.partition, 0, 0, 0, size, None, None)
        counts = [entry_count(self.directory, b) for b in bases]
        next_offset = bases[-1] + counts[-1]
        oldest = min(max(bases[0], load_log_start(self.directory)), next_offset)
        oldest_ts = newest_ts = None
        for base, count in zip(bases, counts, strict=True):
            if base + count > oldest:  # the first segment holding a message at or after the log start
                oldest_ts = self._timestamp_at(base, max(0, oldest - base))
                break
        for base, count in zip(reversed(bases), reversed(counts), strict=True):
            if count:
                newest_ts = self._timestamp_at(base, count - 1) if base + count > oldest else None
                break
        return PartitionStats(self.partition, oldest, next_offset, len(bases), size, oldest_ts, newest_ts)

    def tag_counts(self) -> tuple[dict[str | None, int], int]:
        """Messages per tag (None: untagged) counted from the ``.tagindex`` columns and confirmed from
        the records (``tag_stats.py``: two tags that share a hash are each counted as they are), and
        how many messages could not be counted (segments without a column, entries a producer still
        buffers, damaged records)."""
        counts: dict[str | None, int] = {}
        uncounted = 0
        for base in self.segment_bases():
            entries = entry_count(self.directory, base)
            column = read_file(segment_path(self.directory, base, TAGINDEX)) or b""
            hashes = tags_format.unpack_column(column)[:entries]
            uncounted += entries - len(hashes)
            if not hashes:
                continue
            try:
                segment = self.open_segment(base)
            except FileNotFoundError:  # vacuumed since it was listed
                continue
            with contextlib.closing(segment):
                found, missed = segment_tag_counts(segment, base, hashes)
            uncounted += missed
            for tag, count in found.items():
                counts[tag] = counts.get(tag, 0) + count
        return counts, uncounted

    def _timestamp_at(self, base: int, entry: int) -> int | None:
        """One message's timestamp: its ``.timeindex`` entry, or its record's where there is none
        (as ``_committed_timestamps``); None once the segment was vacuumed."""
        raw = b""
        with contextlib.suppress(FileNotFoundError):
            fd = open_read(segment_path(self.directory, base, TIMEINDEX))
            try:
                raw = os.pread(fd, TIMEINDEX_ENTRY_BYTES, entry * TIMEINDEX_ENTRY_BYTES)
            finally:
                os.close(fd)
        if len(raw) == TIMEINDEX_ENTRY_BYTES:
            return int(TIMEINDEX_ENTRY.unpack(raw)[1])
        stamps = record_timestamps(self.directory, base, entry, entry + 1)
        return stamps[0] if stamps else None


def _first_outside(positions: Sequence[int], sizes: Sequence[int], start: int, data_size: int) -> int:
    """The number of the first index entry that goes backwards or ends past the data."""
    end = start
    for number, (position, size) in enumerate(zip(positions, sizes, strict=True)):
        if position < end or position + size > data_size:
            return number
        end = position + size
    return len(positions) - 1


def _search_data(segment: SegmentReader, key: bytes, first: int, end: int) -> list[int]:
    """Offsets in ``[first, end)`` of a segment whose record has this key, found in the data
    (the search without a key index), reading about ``_SEARCH_CHUNK`` records at a time."""
    found: list[int] = []
    for chunk_first in range(first, end, _SEARCH_CHUNK):
        raw = segment.read_index(chunk_first, min(_SEARCH_CHUNK, end - chunk_first))
        if not raw:
            break
        _, positions, sizes = entry_columns(raw, "Q", 3)
        start, stop = positions[0], positions[-1] + sizes[-1]
        if not start <= stop <= segment.data_size():
            # A damaged entry: its size (or position) points outside the data. Searching on would
            # read what it claims; the damage is named instead, as a read of that offset names it.
            bad = chunk_first + _first_outside(positions, sizes, start, segment.data_size())
            raise CorruptRecordError(
                f"the index entry of offset {bad} points outside the data",
                path=segment.index_path,
                position=(bad - segment.base_offset) * INDEX_ENTRY_BYTES,
                offset=bad,
            )
        data = segment.read_data(start, stop - start)
        matches = keyindex_format.data_key_matches(data, positions, key, origin=start)
        found += [chunk_first + match for match in matches]
    return found
