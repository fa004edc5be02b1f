"""Crash recovery of a partition's active segment (DESIGN §4), applied when a producer opens.

The rules, in the order they are applied:

1. ``.data`` is the source of truth. Every record is checked (size, magic, CRC-32C) from the start
   of the segment; the data is truncated at the first record that is torn (the buffer ends inside
   it) or bad. Everything after that point is the torn tail of a crash or a power cut.
2. ``.index`` and ``.timeindex`` are derived: entries that agree with the valid records are kept,
   a partial trailing entry and entries that point past valid data are dropped, and missing
   entries are rebuilt from the records.
3. Missing files are recreated (a crash in the middle of a roll can leave a new segment with only
   some of its files).

Only the last segment needs this: a segment is fsynced before the next one is created, so sealed
segments cannot have a torn tail. Every change is returned as a ``SegmentRepair``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .._errors import CorruptRecordError
from .._sansio.codec import RecordExtent, scan_records
from .._sansio.naming import DATA, INDEX, TIMEINDEX
from .._sansio.values import SegmentRepair
from .files import DEFAULT_FILE_MODE, fsync_dir, open_read, pread_exact
from .segment import INDEX_ENTRY, INDEX_ENTRY_BYTES, TIMEINDEX_ENTRY, TIMEINDEX_ENTRY_BYTES, segment_path

__all__ = ["RecoveredSegment", "ScanResult", "recover_segment", "scan_segment_data"]


class ScanResult(NamedTuple):
    """The valid records at the start of a ``.data`` file and why the scan stopped."""

    extents: list[RecordExtent]
    valid_end: int
    file_size: int
    problem: str | None  # None when the data ends exactly after a valid record


class RecoveredSegment(NamedTuple):
    """The state of the active segment after recovery."""

    next_offset: int
    data_size: int


def scan_segment_data(path: str, max_record_bytes: int) -> ScanResult:
    """Check every record of a ``.data`` file from its start."""
    fd = open_read(path)
    try:
        size = os.fstat(fd).st_size
        data = pread_exact(fd, size, 0)
    finally:
        os.close(fd)
    extents: list[RecordExtent] = []
    problem: str | None = None
    try:
        extents.extend(scan_records(data, max_record_bytes=max_record_bytes))
    except CorruptRecordError as error:
        problem = error.reason
    valid_end = extents[-1].position + extents[-1].size if extents else 0
    if problem is None and valid_end != len(data):
        problem = "the last record is incomplete (torn write)"
    return ScanResult(extents, valid_end, len(data), problem)


def _agreeing_prefix(existing: bytes, expected: bytes, entry_size: int) -> int:
    """How many leading whole entries of ``existing`` equal those of ``expected``."""
    whole = min(len(existing), len(expected)) // entry_size
    if existing[: whole * entry_size] == expected[: whole * entry_size]:
        return whole
    low, high = 0, whole  # the first disagreeing entry lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if existing[: middle * entry_size] == expected[: middle * entry_size]:
            low = middle
        else:
            high = middle
    return low


def _read_optional(path: str) -> bytes | None:
    try:
        fd = open_read(path)
    except FileNotFoundError:
        return None
    try:
        return pread_exact(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


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
    expected: bytes,
    entry_size: int,
    describe: str,
    repairs: list[SegmentRepair],
    partition: int,
    base_offset: int,
    mode: int,
) -> bool:
    """Make the index file ``path`` hold exactly ``expected``; returns True if it changed."""
    existing = _read_optional(path)
    if existing == expected:
        return False
    if existing is None:
        _rewrite_tail(path, 0, expected, mode)
        repairs.append(
            SegmentRepair(
                partition, base_offset, f"recreated missing .{describe} ({len(expected) // entry_size} entries)"
            )
        )
        return True
    keep = _agreeing_prefix(existing, expected, entry_size)
    dropped = len(existing) // entry_size - keep
    rebuilt = len(expected) // entry_size - keep
    partial = len(existing) % entry_size
    _rewrite_tail(path, keep * entry_size, expected[keep * entry_size :], mode)
    parts = []
    if partial:
        parts.append(f"dropped a partial {describe} entry of {partial} bytes")
    if dropped:
        parts.append(f"dropped {dropped} {describe} entries that did not match valid data")
    if rebuilt:
        parts.append(f"rebuilt {rebuilt} {describe} entries from the data")
    repairs.append(SegmentRepair(partition, base_offset, "; ".join(parts) or f"rewrote .{describe}"))
    return True


def recover_segment(
    directory: str,
    partition: int,
    base_offset: int,
    *,
    max_record_bytes: int,
    mode: int = DEFAULT_FILE_MODE,
) -> tuple[RecoveredSegment, list[SegmentRepair]]:
    """Verify and repair the active segment; returns its state and what was repaired."""
    repairs: list[SegmentRepair] = []
    data_path = segment_path(directory, base_offset, DATA)
    created = False
    if not os.path.lexists(data_path):
        os.close(os.open(data_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode))
        repairs.append(SegmentRepair(partition, base_offset, "recreated missing .data (empty)"))
        created = True

    scan = scan_segment_data(data_path, max_record_bytes)
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

    offsets = range(base_offset, base_offset + len(scan.extents))
    expected_timeindex = b"".join(map(TIMEINDEX_ENTRY.pack, offsets, (e.timestamp_ns for e in scan.extents)))
    expected_index = b"".join(
        map(INDEX_ENTRY.pack, offsets, (e.position for e in scan.extents), (e.size for e in scan.extents))
    )
    # The time index first, then the index: the same order as the write path.
    changed = _repair_derived_file(
        segment_path(directory, base_offset, TIMEINDEX),
        expected_timeindex,
        TIMEINDEX_ENTRY_BYTES,
        "timeindex",
        repairs,
        partition,
        base_offset,
        mode,
    )
    changed |= _repair_derived_file(
        segment_path(directory, base_offset, INDEX),
        expected_index,
        INDEX_ENTRY_BYTES,
        "index",
        repairs,
        partition,
        base_offset,
        mode,
    )
    if changed or created:
        fsync_dir(directory)
    return RecoveredSegment(base_offset + len(scan.extents), scan.valid_end), repairs
