"""Crash recovery of a partition's active segment (DESIGN §4), applied when a producer opens.

The rules, in the order they are applied:

1. ``.data`` is the source of truth. Every record is checked (size, magic, CRC-32C) from the start
   of the segment. Bad bytes with nothing valid after them are the torn tail of a crash or a power
   cut: the data is truncated there. Bad bytes followed by a valid record are rot inside committed
   data, never a torn tail (a crash tears only the end): nothing is cut. The damaged record keeps its
   offset (its size from its index entry when that leads to the next valid record, else up to the
   next valid record found by searching for one), readers raise ``CorruptRecordError`` (file,
   position, offset) there, and the repair is reported.
2. ``.index`` and ``.timeindex`` are derived: entries that agree with the valid records are kept,
   a partial trailing entry and entries that point past valid data are dropped, and missing
   entries are rebuilt from the records.
3. Missing files are recreated (a crash in the middle of a roll can leave a new segment with only
   some of its files).
4. ``.tagindex`` (the tag hash column, ``adiskq/_sansio/tags.py``) is checked the same way as a
   hash column: it must hold the tag hash of every valid record, in order, recomputed from the data
   (a format-1 segment that had none gets one).
5. When the stream keeps a key index, ``.keyindex`` is checked the same way: it must hold the hash
   of every valid record's key, in order (and nothing else: the seal of a segment that was about to
   roll is dropped with the rest). The hashes are recomputed from the data, so an entry damaged on
   disk is found too. When the stream keeps none, the active segment's ``.keyindex`` is removed.

Only the last segment needs this: a segment is fsynced before the next one is created, so sealed
segments cannot have a torn tail. A sealed segment's key index that is missing or malformed is
rebuilt from its data (``ensure_sealed_key_index``). Every change is returned as a ``SegmentRepair``.
"""

from __future__ import annotations

import array
import os
import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .._sansio import keyindex as keyindex_format
from .._sansio import tags as tags_format
from .._sansio.codec import ScannedRecords, is_valid_record
from .._sansio.core import next_valid_record, scan_columns
from .._sansio.naming import DATA, INDEX, KEYINDEX, TAGINDEX, TIMEINDEX
from .._sansio.values import SegmentRepair
from . import keyindex
from .files import DEFAULT_FILE_MODE, fsync_dir, open_read, pread_exact, read_file
from .segment import INDEX_ENTRY, TIMEINDEX_ENTRY, entry_columns, segment_path
from .segment_files import entry_count, index_positions

__all__ = ["RecoveredSegment", "ScanResult", "ensure_sealed_key_index", "record_after_damage", "recover_segment"]


class ScanResult(NamedTuple):
    """The valid records at the start of a ``.data`` file and why the scan stopped."""

    records: ScannedRecords
    valid_end: int
    file_size: int
    problem: str | None  # None when the data ends exactly after a valid record

    @property
    def record_count(self) -> int:
        """How many valid records there are."""
        return len(self.records.positions)


class RecoveredSegment(NamedTuple):
    """The state of the active segment after recovery."""

    next_offset: int
    data_size: int


def _scan_data(path: str, max_record_bytes: int) -> tuple[ScanResult, bytes]:
    """Every record of a ``.data`` file checked from its start, and the bytes read."""
    fd = open_read(path)
    try:
        size = os.fstat(fd).st_size
        data = pread_exact(fd, size, 0)
    finally:
        os.close(fd)
    scanned = scan_columns(data, max_record_bytes=max_record_bytes)
    problem = None if scanned.error is None else scanned.error.reason
    if problem is None and scanned.end != len(data):
        problem = "the last record is incomplete (torn write)"
    return ScanResult(scanned, scanned.end, len(data), problem), data


def record_after_damage(
    data: bytes,
    bad: int,
    entry: int,
    indexed: list[array.array[int]],
    max_record_bytes: int,
    indexed_positions: set[int] | None = None,
) -> int | None:
    """Where the first valid record after the damaged one at ``bad`` (entry ``entry`` of the
    segment) starts, or None when nothing valid follows (a torn tail).

    In order of trust: the damaged record's index entry, its own size field (rot elsewhere in it),
    or a search, which counts only where an index entry confirms a record starts there: bytes
    inside a torn record's value may hold a valid record of their own (a message that carries an
    encoded record), never a real one. ``indexed`` holds the ``.index`` columns (offsets, positions,
    sizes).
    """
    candidates = []
    if entry < len(indexed[1]) and indexed[1][entry] == bad:
        candidates.append(bad + indexed[2][entry])
    if bad + 4 <= len(data):
        candidates.append(bad + int.from_bytes(data[bad : bad + 4], "little"))
    for at in candidates:
        if bad < at < len(data) and is_valid_record(data, at, max_record_bytes=max_record_bytes):
            return at
    confirmed = set(indexed[1]) if indexed_positions is None else indexed_positions
    found = next_valid_record(data, bad + 1, max_record_bytes=max_record_bytes)
    while found is not None and found not in confirmed:
        found = next_valid_record(data, found + 1, max_record_bytes=max_record_bytes)
    return found


def _scan_past_rot(
    data: bytes, scan: ScanResult, index_raw: bytes | None, timeindex_raw: bytes | None, max_record_bytes: int
) -> tuple[ScanResult, list[int]]:
    """Carry a scan that stopped at a bad record on past it while valid records follow.

    Returns the scan with each damaged record kept in place (its position, its size up to the next
    valid record, its timestamp from the time index, else the one before it) and the positions of
    the damaged records. A bad record with nothing valid after it ends the scan, as a torn tail does.
    """
    records = scan.records
    positions, sizes, timestamps = list(records.positions), list(records.sizes), list(records.timestamps)
    indexed = entry_columns(index_raw or b"", "Q", 3)  # offsets, positions, sizes
    stamped = entry_columns(timeindex_raw or b"", "q", 2)  # offsets, timestamps
    indexed_positions = set(indexed[1])
    damaged: list[int] = []
    end, error = records.end, records.error
    while end < len(data):  # bad bytes, or a size field that claims more than the data holds
        bad = end
        k = len(positions)
        following = record_after_damage(data, bad, k, indexed, max_record_bytes, indexed_positions)
        if following is None:
            break  # nothing valid after the bad bytes: a torn tail
        damaged.append(bad)
        positions.append(bad)
        sizes.append(following - bad)
        if k < len(stamped[0]) and stamped[0][k] == stamped[0][0] + k:
            timestamps.append(stamped[1][k])
        else:
            timestamps.append(timestamps[-1] if timestamps else 0)
        more = scan_columns(data, following, max_record_bytes=max_record_bytes)
        positions += more.positions
        sizes += more.sizes
        timestamps += more.timestamps
        end, error = more.end, more.error
    if not damaged:
        return scan, []
    problem = None if error is None else error.reason
    if problem is None and end != len(data):
        problem = "the last record is incomplete (torn write)"
    columns = ScannedRecords(positions, sizes, timestamps, end, error)
    return ScanResult(columns, end, len(data), problem), damaged


def _agreeing_prefix(whole: int, agree: Callable[[int], bool]) -> int:
    """The most leading entries (up to ``whole``) for which ``agree(count)`` holds, found by
    bisection: a few comparisons of slices, each done in C."""
    if agree(whole):
        return whole
    low, high = 0, whole  # the first disagreeing entry lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if agree(middle):
            low = middle
        else:
            high = middle
    return low


def _agreeing_count(existing: list[array.array[int]], expected: list[array.array[int]]) -> int:
    """How many leading entries agree in every column (compared a column at a time)."""

    def agree(count: int) -> bool:
        return all(mine[:count] == theirs[:count] for mine, theirs in zip(existing, expected, strict=True))

    return _agreeing_prefix(min(len(existing[0]), len(expected[0])), agree)


def _rewrite_tail(path: str, keep_bytes: int, tail: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.ftruncate(fd, keep_bytes)
        if tail:
            os.pwrite(fd, tail, keep_bytes)
        os.fsync(fd)
    finally:
        os.close(fd)


def _repair_derived_file(
    path: str,
    entry: struct.Struct,
    typecode: str,
    expected: list[Sequence[int]],
    describe: str,
    repairs: list[SegmentRepair],
    partition: int,
    base_offset: int,
    mode: int,
) -> bool:
    """Make the index file ``path`` hold exactly the entries whose columns are ``expected``.

    Returns True if it changed. Entries that agree are kept; only the rest is rewritten.
    """
    width = len(expected)
    entry_size = entry.size
    count = len(expected[0])
    existing = read_file(path)
    if existing is None:
        _rewrite_tail(path, 0, b"".join(map(entry.pack, *expected)), mode)
        repairs.append(SegmentRepair(partition, base_offset, f"recreated missing .{describe} ({count} entries)"))
        return True
    keep = _agreeing_count(entry_columns(existing, typecode, width), [array.array(typecode, c) for c in expected])
    existing_entries, partial = divmod(len(existing), entry_size)
    if keep == existing_entries == count and not partial:
        return False
    dropped = existing_entries - keep
    rebuilt = count - keep
    _rewrite_tail(path, keep * entry_size, b"".join(map(entry.pack, *(c[keep:] for c in expected))), mode)
    parts = []
    if partial:
        parts.append(f"dropped a partial {describe} entry of {partial} bytes")
    if dropped:
        parts.append(f"dropped {dropped} {describe} entries that did not match valid data")
    if rebuilt:
        parts.append(f"rebuilt {rebuilt} {describe} entries from the data")
    repairs.append(SegmentRepair(partition, base_offset, "; ".join(parts)))
    return True


def _common_entries(existing: bytes, expected: bytes) -> int:
    """How many leading 4-byte entries two key index columns share."""
    width = keyindex_format.ENTRY_BYTES
    return _agreeing_prefix(
        min(len(existing), len(expected)) // width, lambda count: existing[: count * width] == expected[: count * width]
    )


def _repair_key_index(
    path: str,
    expected: bytes,
    repairs: list[SegmentRepair],
    partition: int,
    base_offset: int,
    mode: int,
    describe: str = "keyindex",
) -> bool:
    """Make the hash column (``.keyindex`` or ``.tagindex``) at ``path`` exactly ``expected``;
    True if it changed."""
    count = len(expected) // keyindex_format.ENTRY_BYTES
    existing = read_file(path)
    if existing is None:
        _rewrite_tail(path, 0, expected, mode)
        repairs.append(SegmentRepair(partition, base_offset, f"recreated missing .{describe} ({count} entries)"))
        return True
    if existing == expected:
        return False
    keep = _common_entries(existing, expected)
    _rewrite_tail(path, keep * keyindex_format.ENTRY_BYTES, expected[keep * keyindex_format.ENTRY_BYTES :], mode)
    parts = []
    surplus = len(existing) - keep * keyindex_format.ENTRY_BYTES
    if len(existing) > len(expected) and existing.startswith(expected):
        parts.append(f"dropped {surplus} bytes of .{describe} past its {count} entries (a seal, or a torn write)")
    elif surplus:
        parts.append(f"dropped {surplus} bytes of {describe} entries that did not match valid data")
    if count > keep:
        parts.append(f"rebuilt {count - keep} {describe} entries from the data")
    repairs.append(SegmentRepair(partition, base_offset, "; ".join(parts)))
    return True


def recover_segment(
    directory: str,
    partition: int,
    base_offset: int,
    *,
    max_record_bytes: int,
    mode: int = DEFAULT_FILE_MODE,
    key_index: bool | None = None,
) -> tuple[RecoveredSegment, list[SegmentRepair]]:
    """Verify and repair the active segment; returns its state and what was repaired.

    ``key_index``: True checks and rebuilds ``.keyindex`` as a hash column, False removes it, None
    (for a sealed segment whose other files are being rebuilt) leaves it alone.
    """
    repairs: list[SegmentRepair] = []
    data_path = segment_path(directory, base_offset, DATA)
    created = False
    if not os.path.lexists(data_path):
        os.close(os.open(data_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode))
        repairs.append(SegmentRepair(partition, base_offset, "recreated missing .data (empty)"))
        created = True

    scan, data = _scan_data(data_path, max_record_bytes)
    damaged: list[int] = []  # positions of damaged records that valid ones follow
    if scan.valid_end < scan.file_size:  # bad bytes, or a record the data ends inside
        scan, damaged = _scan_past_rot(
            data,
            scan,
            read_file(segment_path(directory, base_offset, INDEX)),
            read_file(segment_path(directory, base_offset, TIMEINDEX)),
            max_record_bytes,
        )
        if damaged:
            first = scan.records.positions.index(damaged[0])
            repairs.append(
                SegmentRepair(
                    partition,
                    base_offset,
                    f"kept every committed record: {len(damaged)} damaged record(s) inside committed data, the "
                    f"first at offset {base_offset + first} (byte {damaged[0]}), are followed by valid ones, so this "
                    "is rot, not a torn tail; reading a damaged offset raises CorruptRecordError, read past it with "
                    "start=offset + 1",
                    position=damaged[0],
                )
            )
    if scan.valid_end < scan.file_size:
        fd = os.open(data_path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, scan.valid_end)
            os.fsync(fd)
        finally:
            os.close(fd)
        repairs.append(
            SegmentRepair(
                partition,
                base_offset,
                f"cut {scan.file_size - scan.valid_end} bytes of torn tail ({scan.problem})",
                position=scan.valid_end,
            )
        )

    records = scan.records
    offsets = range(base_offset, base_offset + scan.record_count)
    # The time index first, then the index: the same order as the write path.
    changed = _repair_derived_file(
        segment_path(directory, base_offset, TIMEINDEX),
        TIMEINDEX_ENTRY,
        "q",
        [offsets, records.timestamps],
        "timeindex",
        repairs,
        partition,
        base_offset,
        mode,
    )
    changed |= _repair_derived_file(
        segment_path(directory, base_offset, INDEX),
        INDEX_ENTRY,
        "Q",
        [offsets, records.positions, records.sizes],
        "index",
        repairs,
        partition,
        base_offset,
        mode,
    )
    changed |= _repair_key_index(
        segment_path(directory, base_offset, TAGINDEX),
        tags_format.data_tag_column(data, records.positions),
        repairs,
        partition,
        base_offset,
        mode,
        "tagindex",
    )
    keyindex_path = segment_path(directory, base_offset, KEYINDEX)
    if key_index:
        expected = keyindex_format.pack_hashes(keyindex_format.data_key_hashes(data, records.positions))
        changed |= _repair_key_index(keyindex_path, expected, repairs, partition, base_offset, mode)
    elif key_index is not None and os.path.lexists(keyindex_path):
        os.unlink(keyindex_path)  # the stream keeps no key index: a stale one must not linger
        changed = True
    if changed or created:
        fsync_dir(directory)
    return RecoveredSegment(base_offset + scan.record_count, scan.valid_end), repairs


def ensure_sealed_key_index(directory: str, partition: int, base: int, mode: int) -> list[SegmentRepair]:
    """Rebuild a sealed segment's key index from its data if it is missing or malformed.

    Only the trailer and sizes are checked here (a few bytes a segment); readers check the CRC.
    """
    path = segment_path(directory, base, KEYINDEX)
    entries = entry_count(directory, base)
    problem = keyindex.sealed_problem(path, entries, check_crc=False)
    if problem is None:
        return []
    positions = index_positions(directory, base, entries)
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
