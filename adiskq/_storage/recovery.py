"""Crash recovery of a partition's active segment, applied when a producer opens.

The rules, in the order they are applied:

1. ``.data`` is the source of truth. Every record is checked (size, magic, CRC-32C) from the start
   of the segment, and what to keep is decided by ``recovery_plan.plan_segment`` (its rules are
   written there): a damaged record that an ``.index`` entry committed keeps its offset, the newest
   one too, and readers raise ``CorruptRecordError`` (file, position, offset) there; bad bytes
   with no indexed record after them are a torn tail and cut; without an ``.index`` the bytes after
   the first bad record are set aside in a file beside the segment, never deleted. Each is reported.
2. ``.index`` and ``.timeindex`` are derived: entries that agree with the valid records are kept,
   a partial trailing entry and entries that point past valid data are dropped, and missing
   entries are rebuilt from the records.
3. Missing files are recreated (a crash in the middle of a roll can leave a new segment with only
   some of its files).
4. ``.tagindex`` (the tag hash column, ``adiskq/_sansio/tags.py``) is checked the same way as a
   hash column: it must hold the tag hash of every valid record, in order, recomputed from the data
   (a format-1 segment that had none gets one), and ``UNKNOWN_TAG`` for a damaged record, whose tag
   cannot be trusted: every tag filter then reads it, and meets the damage as an unfiltered reader does.
5. When the stream keeps a key index, ``.keyindex`` is checked the same way: it must hold the hash
   of every valid record's key, in order (and nothing else: the seal of a segment that was about to
   roll is dropped with the rest). The hashes are recomputed from the data, so an entry damaged on
   disk is found too. When the stream keeps none, the active segment's ``.keyindex`` is removed.
6. A compact segment (a compressed stream's) keeps no ``.timeindex``: one found there is removed, as
   a stale file must not linger; and it has a ``.tagindex`` only when one of its valid records
   carries a tag (rule 4 then), none being made for a segment whose records carry none.
7. ``.txnindex`` (the aborted Kafka transactions, ``txn_index.py``) must be what the valid records'
   abort markers say: rewritten when torn, missing or naming a marker the data lost (a torn
   marker), removed when no abort marker is left.

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
from .._sansio.entries import INDEX_ENTRY, TAG_COLUMN, TIME_COLUMN, TIMEINDEX_ENTRY
from .._sansio.naming import DATA, INDEX, KEYINDEX, TAGINDEX, TIMEINDEX
from .._sansio.values import SegmentRepair
from . import keyindex, txn_index
from .files import DEFAULT_FILE_MODE, fsync_dir, open_read, pread_exact, read_file, write_all
from .recovery_plan import SegmentPlan, damaged_file_name, plan_segment
from .segment_files import entry_columns, entry_count, index_positions, segment_path

__all__ = ["RecoveredSegment", "describe_damaged", "ensure_sealed_key_index", "recover_segment"]


class RecoveredSegment(NamedTuple):
    """The state of the active segment after recovery."""

    next_offset: int
    data_size: int


def _read_data(path: str) -> bytes:
    fd = open_read(path)
    try:
        return pread_exact(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def _set_aside(directory: str, base_offset: int, data: bytes, position: int, mode: int) -> str:
    """Copy ``.data``'s bytes from ``position`` on into a file of their own beside the segment,
    durably, before ``.data`` is cut there; returns its path."""
    path = os.path.join(directory, damaged_file_name(base_offset, position))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        write_all(fd, memoryview(data)[position:])
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(directory)
    return path


def describe_damaged(plan: SegmentPlan, base_offset: int) -> str:
    """The damaged records a plan keeps, for a report: their offsets (a few) and the first's byte."""
    offsets = [base_offset + entry for entry in plan.damaged]
    shown = ", ".join(map(str, offsets[:5])) + (f" and {len(offsets) - 5} more" if len(offsets) > 5 else "")
    first = plan.records.positions[plan.damaged[0]]
    return f"{len(offsets)} damaged record(s) keep their offsets ({shown}; the first at byte {first}: {plan.damage})"


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
    compact: bool = False,
) -> tuple[RecoveredSegment, list[SegmentRepair]]:
    """Verify and repair the active segment; returns its state and what was repaired.

    ``key_index``: True checks and rebuilds ``.keyindex`` as a hash column, False removes it, None
    (for a sealed segment whose other files are being rebuilt) leaves it alone. ``compact``: the
    segment keeps no ``.timeindex`` and a ``.tagindex`` only if a record has a tag (rule 6).
    """
    repairs: list[SegmentRepair] = []
    data_path = segment_path(directory, base_offset, DATA)
    created = False
    if not os.path.lexists(data_path):
        os.close(os.open(data_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode))
        repairs.append(SegmentRepair(partition, base_offset, "recreated missing .data (empty)"))
        created = True

    data = _read_data(data_path)
    timeindex_path = segment_path(directory, base_offset, TIMEINDEX)
    keeps_time = TIME_COLUMN.made_with_segment(compact=compact, key_index=bool(key_index))
    plan = plan_segment(
        data,
        read_file(segment_path(directory, base_offset, INDEX)),
        read_file(timeindex_path) if keeps_time else None,
        base_offset,
        max_record_bytes,
    )
    if plan.damaged:
        repairs.append(
            SegmentRepair(
                partition,
                base_offset,
                f"kept every committed record: {describe_damaged(plan, base_offset)}; their .index entries "
                "committed them, so this is damage, not a torn tail; reading a damaged offset raises "
                "CorruptRecordError, read past it with start=offset + 1",
                position=plan.records.positions[plan.damaged[0]],
            )
        )
    if plan.keep_bytes < plan.file_size:
        cut = plan.file_size - plan.keep_bytes
        if plan.set_aside:
            aside = _set_aside(directory, base_offset, data, plan.keep_bytes, mode)
            action = (
                f"set aside {cut} bytes of .data from byte {plan.keep_bytes} ({plan.problem}) in {aside}: without "
                ".index nothing numbers the records from there on, so they left the segment whole (the file "
                "holds the bytes as they were, records in .data's format) and the next message gets offset "
                f"{base_offset + plan.record_count}"
            )
        else:
            action = f"cut {cut} bytes of torn tail ({plan.problem})"
        fd = os.open(data_path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, plan.keep_bytes)
            os.fsync(fd)
        finally:
            os.close(fd)
        repairs.append(SegmentRepair(partition, base_offset, action, position=plan.keep_bytes))

    records = plan.records
    offsets = range(base_offset, base_offset + plan.record_count)
    # The time index first, then the index: the same order as the write path.
    if keeps_time:
        changed = _repair_derived_file(
            timeindex_path,
            TIMEINDEX_ENTRY,
            "q",
            [offsets, records.timestamps],
            "timeindex",
            repairs,
            partition,
            base_offset,
            mode,
        )
    elif os.path.lexists(timeindex_path):
        os.unlink(timeindex_path)
        repairs.append(SegmentRepair(partition, base_offset, "removed a .timeindex: a compressed stream keeps none"))
        changed = True
    else:
        changed = False
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
    tagindex_path = segment_path(directory, base_offset, TAGINDEX)
    tag_column = tags_format.data_tag_column(data, records.positions, plan.damaged)
    made = TAG_COLUMN.made_with_segment(compact=compact, key_index=bool(key_index))
    if made or tags_format.names_a_tag(tag_column) or os.path.lexists(tagindex_path):
        changed |= _repair_key_index(tagindex_path, tag_column, repairs, partition, base_offset, mode, "tagindex")
    txn_repairs = txn_index.repair(directory, partition, base_offset, data, records.positions, plan.damaged, mode)
    repairs += txn_repairs
    changed |= bool(txn_repairs)
    keyindex_path = segment_path(directory, base_offset, KEYINDEX)
    if key_index:
        expected = keyindex_format.pack_hashes(keyindex_format.data_key_hashes(data, records.positions))
        changed |= _repair_key_index(keyindex_path, expected, repairs, partition, base_offset, mode)
    elif key_index is not None and os.path.lexists(keyindex_path):
        os.unlink(keyindex_path)  # the stream keeps no key index: a stale one must not linger
        changed = True
    if changed or created:
        fsync_dir(directory)
    return RecoveredSegment(base_offset + plan.record_count, plan.keep_bytes), repairs


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
