"""A partition: the ordered segments of one log, written by the producer and read by anyone.

Segments are found by their ``.index`` file; files that are not segment files are ignored. The last
segment is the active one; all others are sealed (fsynced and closed when the next was created).
Vacuum deletes a segment's ``.index`` first, so a crash in the middle of a vacuum leaves only
sealed files without an index at the old end of the partition, which the next open removes.

When the stream keeps a key index, a roll seals the old segment's ``.keyindex`` (``keyindex.py``)
after fsyncing its data and before creating the next segment, so every segment a reader sees
before the last has a sealed key index (or, if the index was off then, none). Opening the partition
rebuilds a sealed key index that is missing or malformed.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import dataclasses
import datetime as dt
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, Self, TypeVar

from .._errors import CorruptRecordError, CorruptStreamError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio import keyindex as keyindex_format
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES
from .._sansio.naming import DATA, INDEX, KEYINDEX, SEGMENT_EXTENSIONS, TIMEINDEX, parse_segment_file
from .._sansio.retention import SegmentInfo
from .._sansio.values import Message, PartitionStats, SegmentRepair, VacuumReport, ns_from_datetime
from . import keyindex
from .files import DEFAULT_FILE_MODE, dir_mode, fsync_dir, open_read, pread_exact, read_file
from .recovery import recover_segment
from .segment import (
    INDEX_ENTRY_BYTES,
    TIMEINDEX_ENTRY,
    TIMEINDEX_ENTRY_BYTES,
    SegmentFileState,
    SegmentReader,
    SegmentWriter,
    entry_columns,
    segment_path,
)

__all__ = [
    "PartitionCursor",
    "PartitionReader",
    "PartitionWriter",
    "SegmentCursor",
    "list_segment_files",
    "open_segment_at",
]


def list_segment_files(directory: str) -> dict[int, set[str]]:
    """Base offset -> extensions present, for every segment file in the folder (strays ignored).

    Only regular files count: a folder or a symlink with a segment's name is a stray (segment
    files are never opened through a symlink).
    """
    segments: dict[int, set[str]] = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            parsed = parse_segment_file(entry.name)
            if parsed is not None and entry.is_file(follow_symlinks=False):
                segments.setdefault(parsed[0], set()).add(parsed[1])
    return segments


_INDEX_SUFFIX = "." + INDEX
# A search of a segment's data without its key index reads this many records at a time.
_SEARCH_CHUNK = 65_536


def _file_size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return 0


def _entry_count(directory: str, base: int) -> int:
    """Whole entries in a segment's ``.index``: its committed messages (0 once vacuumed)."""
    return _file_size(segment_path(directory, base, INDEX)) // INDEX_ENTRY_BYTES


def _timestamps(raw: bytes) -> array.array[int]:
    """The timestamps of a ``.timeindex`` buffer."""
    return entry_columns(raw, "q", 2)[1]


def _ensure_sealed_key_index(directory: str, partition: int, base: int, mode: int) -> list[SegmentRepair]:
    """Rebuild a sealed segment's key index from its data if it is missing or malformed.

    Only the trailer and sizes are checked here (a few bytes a segment); readers check the CRC.
    """
    path = segment_path(directory, base, KEYINDEX)
    entries = _entry_count(directory, base)
    problem = keyindex.sealed_problem(path, entries, check_crc=False)
    if problem is None:
        return []
    positions = _index_positions(directory, base, entries)
    data_path = segment_path(directory, base, DATA)
    fd = open_read(data_path)
    try:
        data = pread_exact(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)
    cannot = [
        SegmentRepair(partition, base, f"could not rebuild the key index ({problem}): the index points past the data")
    ]
    if positions and max(positions) >= len(data):
        return cannot  # readers report that segment as damaged
    try:
        column = keyindex_format.pack_hashes(keyindex_format.data_key_hashes(data, positions))
    except (struct.error, ValueError, OverflowError):  # index entries that are garbage
        return cannot
    keyindex.write_sealed_file(path, column, mode=mode)
    return [SegmentRepair(partition, base, f"rebuilt the key index ({problem}) from {entries} records")]


def _index_positions(directory: str, base: int, entries: int) -> array.array[int]:
    """The data positions of a segment's first ``entries`` index entries."""
    fd = open_read(segment_path(directory, base, INDEX))
    try:
        raw = pread_exact(fd, entries * INDEX_ENTRY_BYTES, 0)
    finally:
        os.close(fd)
    return entry_columns(raw, "Q", 3)[1]


@dataclasses.dataclass(slots=True)
class _SealedSegment:
    base_offset: int
    next_offset: int
    size_bytes: int
    newest_timestamp_ns: int | None = None
    newest_known: bool = False


class PartitionWriter:
    """The producer's side of a partition: append, roll, sync and vacuum."""

    def __init__(
        self,
        directory: str,
        partition: int,
        sealed: list[_SealedSegment],
        active: SegmentWriter,
        *,
        segment_size_bytes: int,
        mode: int,
        key_index: bool = True,
    ) -> None:
        self.directory = directory
        self.partition = partition
        self.segment_size_bytes = segment_size_bytes
        self.mode = mode
        self.key_index = key_index
        self._sealed = sealed
        self.active = active
        # True when open() trusted a clean close instead of re-checking the active segment.
        self.scan_skipped = False

    @classmethod
    def open(
        cls,
        directory: str,
        partition: int,
        *,
        segment_size_bytes: int,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        mode: int = DEFAULT_FILE_MODE,
        clean: SegmentFileState | None = None,
        key_index: bool = True,
    ) -> tuple[PartitionWriter, list[SegmentRepair]]:
        """Open (creating it if missing) and recover the partition; returns it and its repairs.

        ``clean`` is the active segment's state as the last producer's clean close recorded it: if
        the files are exactly so (same sizes and modification times), the check of every record is
        skipped, because nothing has written to them since they were fsynced. ``key_index`` keeps
        a key index: missing or malformed ones of sealed segments are rebuilt here.
        """
        folder_mode = dir_mode(mode)
        if os.path.islink(directory):
            raise CorruptStreamError(
                f"{directory} should be partition {partition}'s folder but is a symbolic link: adiskq "
                "never writes through links inside a stream; replace it with the real folder"
            )
        if os.path.lexists(directory) and not os.path.isdir(directory):
            raise CorruptStreamError(
                f"{directory} should be partition {partition}'s folder but is not a folder; "
                "move it away (nothing was changed)"
            )
        if not os.path.isdir(directory):
            os.mkdir(directory, folder_mode)
            fsync_dir(os.path.dirname(directory))
        repairs: list[SegmentRepair] = []
        files = list_segment_files(directory)
        bases = sorted(files)
        # Vacuum deletes .index, .keyindex, .timeindex, then .data. A crash in between leaves the
        # oldest segments without some of them. Leftovers without .data hold nothing and go; a
        # segment that still has its .data is rebuilt below, not deleted: recovery never destroys
        # data (an index lost any other way would take its data with it), and the next vacuum
        # deletes the segment again if the retention still says so.
        while len(bases) > 1 and DATA not in files[bases[0]]:
            base = bases.pop(0)
            for extension in files[base]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(segment_path(directory, base, extension))
            repairs.append(
                SegmentRepair(partition, base, "removed index files an interrupted vacuum left without data")
            )
        if repairs:
            fsync_dir(directory)
        for base in bases[:-1]:
            if DATA not in files[base]:
                raise CorruptStreamError(
                    f"segment {base:020d} of partition {partition} ({directory}) has lost its .data file, so "
                    f"its messages are gone; nothing was changed. Restore the file from a backup, or move the "
                    f"segment's other files away to accept the loss (readers would otherwise stop there)"
                )

        sealed: list[_SealedSegment] = []
        for base in bases[:-1]:
            if INDEX not in files[base] or TIMEINDEX not in files[base]:
                # Sealed segments are fsynced before the next is created; a lost index file
                # (deleted by hand) is rebuilt from the data exactly as for the active segment.
                _, rebuilt = recover_segment(directory, partition, base, max_record_bytes=max_record_bytes, mode=mode)
                repairs.extend(rebuilt)
            if key_index:
                repairs.extend(_ensure_sealed_key_index(directory, partition, base, mode))
            sealed.append(cls._describe_sealed(directory, base))

        skipped = False
        if bases:
            last = bases[-1]
            trusted = (
                clean is not None and clean.base_offset == last and SegmentFileState.of_files(directory, last) == clean
            )
            entries = clean.message_count if clean is not None and trusted else None
            if clean is not None and entries is not None:
                # The key index must suit the setting: one entry per message, or no file at all.
                keys = clean.keyindex_file
                if key_index != (keys is not None) or (
                    keys is not None and keys[0] != entries * keyindex_format.ENTRY_BYTES
                ):
                    entries = None
            if clean is not None and entries is not None:
                skipped = True
                active = SegmentWriter.open(
                    directory,
                    last,
                    next_offset=last + entries,
                    data_size=clean.data_file[0],
                    key_index=key_index,
                    mode=mode,
                )
            else:
                recovered, rebuilt = recover_segment(
                    directory, partition, last, max_record_bytes=max_record_bytes, mode=mode, key_index=key_index
                )
                repairs.extend(rebuilt)
                active = SegmentWriter.open(
                    directory,
                    last,
                    next_offset=recovered.next_offset,
                    data_size=recovered.data_size,
                    key_index=key_index,
                    mode=mode,
                )
        else:
            active = SegmentWriter.create(directory, 0, mode=mode, key_index=key_index)
        writer = cls(
            directory,
            partition,
            sealed,
            active,
            segment_size_bytes=segment_size_bytes,
            mode=mode,
            key_index=key_index,
        )
        writer.scan_skipped = skipped
        return writer, repairs

    @staticmethod
    def _describe_sealed(directory: str, base: int) -> _SealedSegment:
        entries = _entry_count(directory, base)
        size = sum(_file_size(segment_path(directory, base, extension)) for extension in SEGMENT_EXTENSIONS)
        return _SealedSegment(base, base + entries, size)

    # -- state -----------------------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        """The offset the next message will get."""
        return self.active.next_offset

    @property
    def oldest_offset(self) -> int:
        """The oldest offset still stored."""
        return self._sealed[0].base_offset if self._sealed else self.active.base_offset

    @property
    def segment_count(self) -> int:
        """Segments on disk, the active one included."""
        return len(self._sealed) + 1

    # -- writing ---------------------------------------------------------------------------------

    def needs_roll(self) -> bool:
        """True when the active segment is full and the next write should start a new one."""
        return self.active.data_size >= self.segment_size_bytes and self.active.message_count > 0

    def roll(self) -> None:
        """Seal the active segment (fsync, seal its key index, close) and start a new one at the
        next offset.

        The fsync comes first so a sealed segment never has a torn tail: recovery then only has
        to check the last segment. The key index is sealed before the next segment exists, so
        readers find every segment but the last with a sealed key index. An empty active segment
        is not rolled: the new segment would have the same name.
        """
        old = self.active
        if old.message_count == 0:
            return
        old.flush_buffered_entries()
        old.sync()
        old.seal_key_index()
        new = SegmentWriter.create(self.directory, old.next_offset, mode=self.mode, key_index=self.key_index)
        old.close()
        self._sealed.append(_SealedSegment(old.base_offset, old.next_offset, self._sealed_size(old.base_offset)))
        self.active = new

    def _sealed_size(self, base: int) -> int:
        return sum(_file_size(segment_path(self.directory, base, extension)) for extension in SEGMENT_EXTENSIONS)

    def append(
        self, records: Sequence[bytes], timestamps: Sequence[int], key_hashes: Sequence[int] | None = None
    ) -> int:
        """Append and commit a batch (rolling first if the active segment is full)."""
        if self.needs_roll():
            self.roll()
        return self.active.append(records, timestamps, key_hashes)

    def sync(self) -> None:
        """fsync the active segment's files."""
        self.active.sync()

    def flush_buffered_entries(self) -> None:
        """Write the time and key index entries single pushes left buffered (before a clean close)."""
        self.active.flush_buffered_entries()

    def file_state(self) -> SegmentFileState:
        """The active segment's file sizes and times, for the clean-close record (sync first)."""
        return self.active.file_state()

    def close(self) -> None:
        """Close the active segment's files (callers sync first if they want durability)."""
        self.active.close()

    # -- vacuum ----------------------------------------------------------------------------------

    def segment_infos(self) -> list[SegmentInfo]:
        """Every segment, oldest first, the active one last, as vacuum planning sees them."""
        infos = []
        for segment in self._sealed:
            if not segment.newest_known:
                segment.newest_timestamp_ns = self._newest_timestamp(segment.base_offset)
                segment.newest_known = True
            infos.append(
                SegmentInfo(
                    self.partition,
                    segment.base_offset,
                    segment.next_offset,
                    segment.size_bytes,
                    segment.newest_timestamp_ns,
                )
            )
        active = self.active
        infos.append(SegmentInfo(self.partition, active.base_offset, active.next_offset, active.data_size, None))
        return infos

    def _newest_timestamp(self, base: int) -> int | None:
        raw = read_file(segment_path(self.directory, base, TIMEINDEX))  # a sealed segment's: complete
        stamps = _timestamps(raw or b"")
        return max(stamps) if stamps else None

    def delete_segments(self, bases: Sequence[int]) -> VacuumReport:
        """Delete these sealed segments (oldest first; never the active one)."""
        doomed = set(bases)
        if self.active.base_offset in doomed:
            raise InvalidArgumentError("the active segment is never deleted")
        removed: list[tuple[int, int]] = []
        messages = size = 0
        keep: list[_SealedSegment] = []
        for segment in self._sealed:
            if segment.base_offset not in doomed:
                keep.append(segment)
                continue
            # .index first: readers find segments by it, and recovery finishes what this starts.
            for extension in (INDEX, KEYINDEX, TIMEINDEX, DATA):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(segment_path(self.directory, segment.base_offset, extension))
            removed.append((self.partition, segment.base_offset))
            messages += segment.next_offset - segment.base_offset
            size += segment.size_bytes
        self._sealed = keep
        if removed:
            fsync_dir(self.directory)
        return VacuumReport(tuple(removed), messages, size)


class PartitionReader:
    """Read-only access to a partition; needs only read permission."""

    def __init__(self, directory: str, partition: int, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self.directory = directory
        self.partition = partition
        self.max_record_bytes = max_record_bytes

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

    def open_segment(self, base: int) -> SegmentReader:
        """A reader of one segment (FileNotFoundError if it was vacuumed)."""
        return SegmentReader.open(self.directory, base, self.partition, max_record_bytes=self.max_record_bytes)

    def bounds(self) -> tuple[int, int]:
        """``(oldest_offset, next_offset)`` of the partition now."""
        bases = self.segment_bases()
        if not bases:
            return 0, 0
        last = bases[-1]
        entries = _entry_count(self.directory, last)
        return bases[0], last + entries

    def cursor(self, offset: int) -> PartitionCursor:
        """Sequential reading from ``offset`` on."""
        return PartitionCursor(self, offset)

    def read_one(self, offset: int) -> Message:
        """The message at ``offset``; OffsetOutOfRangeError if vacuumed or not written."""
        with self.cursor(offset) as cursor:
            messages = cursor.read(1)
        if not messages:
            oldest, next_offset = self.bounds()
            raise OffsetOutOfRangeError(
                f"offset {offset} of partition {self.partition} is not written yet "
                f"(the partition holds offsets {oldest}..{next_offset - 1})"
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

    def offset_for_time(self, timestamp_ns: int) -> int:
        """The first offset whose timestamp is at or after ``timestamp_ns``; the next offset if none."""
        bases = self.segment_bases()
        for base in bases:
            raw = read_file(segment_path(self.directory, base, TIMEINDEX))
            if raw is None:
                continue  # vacuumed meanwhile
            # Only entries the index already covers are committed.
            committed = _entry_count(self.directory, base)
            stamps = _timestamps(raw[: committed * TIMEINDEX_ENTRY_BYTES])
            if len(stamps) < committed:  # the active segment's last time entries are still buffered
                stamps.extend(self._record_timestamps(base, base + len(stamps), base + committed))
            if not stamps or max(stamps) < timestamp_ns:
                continue
            # The first entry at or after the time, found in C (timestamps need not be in order).
            return base + list(map(timestamp_ns.__le__, stamps)).index(True)
        return self.bounds()[1]

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
        entries = _entry_count(self.directory, base)
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
                for message in segment.read_messages(offset, 1):
                    if message.key == key:  # hash collisions and damaged key indexes end here
                        yield message

    def stats(self) -> PartitionStats:
        """Oldest and next offsets, segments, bytes and timestamps of the partition now."""
        files = list_segment_files(self.directory)
        bases = sorted(base for base, extensions in files.items() if INDEX in extensions)
        size = sum(_file_size(segment_path(self.directory, b, e)) for b in files for e in files[b])
        if not bases:
            return PartitionStats(self.partition, 0, 0, 0, size, None, None)
        counts = [_entry_count(self.directory, b) for b in bases]
        oldest_ts = newest_ts = None
        for base, count in zip(bases, counts, strict=True):
            if count:
                oldest_ts = self._timestamp_at(base, 0)
                break
        for base, count in zip(reversed(bases), reversed(counts), strict=True):
            if count:
                newest_ts = self._timestamp_at(base, count - 1)
                break
        return PartitionStats(self.partition, bases[0], bases[-1] + counts[-1], len(bases), size, oldest_ts, newest_ts)

    def _timestamp_at(self, base: int, entry: int) -> int | None:
        try:
            fd = open_read(segment_path(self.directory, base, TIMEINDEX))
        except FileNotFoundError:
            return None
        try:
            raw = os.pread(fd, TIMEINDEX_ENTRY_BYTES, entry * TIMEINDEX_ENTRY_BYTES)
        finally:
            os.close(fd)
        if len(raw) < TIMEINDEX_ENTRY_BYTES:  # still buffered by the producer: ask the record
            with contextlib.suppress(CorruptRecordError):
                stamps = self._record_timestamps(base, base + entry, base + entry + 1)
                return stamps[0] if stamps else None
            return None
        return int(TIMEINDEX_ENTRY.unpack(raw)[1])

    def _record_timestamps(self, base: int, first: int, end: int) -> list[int]:
        """The timestamps of the messages at offsets ``[first, end)`` of a segment, read from their
        records: for the messages whose ``.timeindex`` entries a producer still buffers."""
        try:
            segment = self.open_segment(base)
        except FileNotFoundError:
            return []  # vacuumed meanwhile
        stamps: list[int] = []
        with contextlib.closing(segment):
            while first + len(stamps) < end:
                messages = segment.read_messages(first + len(stamps), min(1000, end - first - len(stamps)))
                if not messages:
                    break
                stamps += (message.timestamp_ns for message in messages)
        return stamps


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
        data = segment.read_data(start, stop - start)
        matches = keyindex_format.data_key_matches(data, positions, key, origin=start)
        found += [chunk_first + match for match in matches]
    return found


_Opened = TypeVar("_Opened")


def open_segment_at(
    partition: PartitionReader, position: int, opener: Callable[[int, bool], _Opened]
) -> _Opened | None:
    """Open the segment holding ``position`` with ``opener(base_offset, sealed)``.

    None when the partition has no segment yet; ``OffsetOutOfRangeError`` (with ``oldest_offset``)
    when vacuum deleted the offset. A segment may vanish between listing and opening (vacuum): the
    listing is then taken again.
    """
    for _ in range(3):
        bases = partition.segment_bases()
        if not bases:
            return None
        if position < bases[0]:
            raise OffsetOutOfRangeError(
                f"offset {position} of partition {partition.partition} was deleted by retention; "
                f"the oldest offset is now {bases[0]}",
                partition=partition.partition,
                offset=position,
                oldest_offset=bases[0],
            )
        index = bisect.bisect_right(bases, position) - 1
        try:
            return opener(bases[index], index < len(bases) - 1)
        except FileNotFoundError:
            continue
    return None


_Segment = TypeVar("_Segment", bound=SegmentReader)


class SegmentCursor(Generic[_Segment]):
    """Walks one partition's segments in order from an offset, across rolls and vacuum: what
    ``PartitionCursor`` (messages) and ``columns.RawCursor`` (raw runs) share.

    It moves to the next segment only once a segment named by exactly the next offset exists, which
    the producer creates after the previous segment's last entry: so no message is skipped or read
    twice at a roll. When vacuum deleted the offset the cursor needs, a read raises
    ``OffsetOutOfRangeError`` with ``oldest_offset`` set; call ``seek`` to go on from there.
    """

    def __init__(self, partition: PartitionReader, offset: int) -> None:
        self.partition = partition
        self.position = offset
        self._segment: _Segment | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def segment_base(self) -> int | None:
        """Base offset of the segment the cursor has open (the one to watch when caught up), or None."""
        return None if self._segment is None else self._segment.base_offset

    def seek(self, offset: int) -> None:
        """Continue reading at ``offset``."""
        self.close()
        self.position = offset

    def _open_segment(self, base: int, sealed: bool) -> _Segment:
        raise NotImplementedError

    def _current(self) -> _Segment | None:
        """The segment holding the position, opened if need be; None before the partition has one."""
        if self._segment is None:
            self._segment = open_segment_at(self.partition, self.position, self._open_segment)
        return self._segment

    def _moved_on(self, segment: _Segment) -> bool:
        """Caught up with ``segment``: True (it is closed) when reading goes on in the next one,
        which has started, or after vacuum deleted this one under us (reopening finds out where)."""
        next_started = self.position != segment.base_offset and os.path.exists(
            segment_path(self.partition.directory, self.position, INDEX)
        )
        if not (next_started or segment.is_deleted()):
            return False
        self.close()
        return True

    def close(self) -> None:
        """Release the open segment; closing twice is harmless."""
        if self._segment is not None:
            self._segment.close()
            self._segment = None


class PartitionCursor(SegmentCursor[SegmentReader]):
    """Reads one partition's messages in order from an offset (see ``SegmentCursor``); ``read``
    returns ``[]`` when caught up."""

    def _open_segment(self, base: int, sealed: bool) -> SegmentReader:
        return self.partition.open_segment(base)

    def read(self, max_count: int = 1000, max_bytes: int | None = None) -> list[Message]:
        """Up to ``max_count`` messages from the current position on; ``[]`` when caught up."""
        while (segment := self._current()) is not None:
            messages = segment.read_messages(self.position, max_count, max_bytes)
            if messages:
                self.position += len(messages)
                return messages
            if not self._moved_on(segment):
                break
        return []
