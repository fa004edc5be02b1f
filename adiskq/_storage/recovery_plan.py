"""What recovery does with the active segment's ``.data``, decided before anything is changed.

``plan_segment`` reads nothing and writes nothing: given the bytes of ``.data``, ``.index`` and
``.timeindex`` it says which records the segment keeps (valid ones and damaged ones, each at its
offset), where ``.data`` ends, and whether the bytes past that end are cut or set aside. Recovery
(``recovery.py``) carries the plan out; ``adiskq check`` (``verify.py``) words the same plan as
what ``--repair`` will do, so the two cannot disagree.

The rules, from the first byte of ``.data`` on:

1. A run of valid records is kept as it is.
2. Bad bytes where the ``.index`` entry of the next offset says a record starts, and whose bytes
   are all in ``.data``, are that record, damaged: it keeps its offset and the size its entry
   gives, readers raise ``CorruptRecordError`` there, and the scan goes on after it. An index entry
   is the commit point (``segment_writer.py``), so its offset is never given to another message: this
   holds for two damaged records side by side (each has its entry) and for the newest record.
3. Bad bytes no entry delimits (the entries that follow are damaged too) are damaged records up to
   the next record that is valid where an ``.index`` entry says one starts: those entries number
   what lies between. Only positions an entry names are tried, each once, so the search reads
   every byte at most once more: a torn record whose value looks like record headers costs no more
   than any other (bytes inside a value may hold a valid record of their own, never a real one).
4. Bad bytes with no indexed record after them are a torn tail: the bytes of a write that never got
   its index entry, or whose record a power cut took back (``flush="async"``), and ``.data`` is
   cut there. A power cut takes a record back two ways: ``.data`` ends before the record does, or
   the file's size reached the disk and its data did not, so the file ends in zeros from inside
   the record on. Either way the record is not delimited by rule 2. (A bit flip in the newest
   record whose own last bytes are zeros looks the same, and is cut: the one case rule 2 cannot
   tell.)
5. Without an ``.index`` file nothing numbers the records after bad bytes, and nothing tells a torn
   tail from damaged committed data: the bytes from there on are set aside in a file beside the
   segment (``damaged_file_name``) before ``.data`` is cut, never deleted.
"""

from __future__ import annotations

import array
from typing import Final, NamedTuple

from .._sansio.codec import MIN_RECORD_BYTES, ScannedRecords, is_valid_record
from .._sansio.core import scan_columns
from .segment_files import entry_columns

__all__ = ["SET_ASIDE_SUFFIX", "SegmentPlan", "damaged_file_name", "plan_segment"]

# The bytes recovery sets aside are kept in ``<base>.data.damaged-<position>`` beside the segment:
# a name no reader, writer or vacuum treats as a segment file (``naming.parse_segment_file``).
SET_ASIDE_SUFFIX: Final = ".data.damaged-"


def damaged_file_name(base_offset: int, position: int) -> str:
    """The name of the file that holds the bytes set aside from ``.data`` at ``position``."""
    return f"{base_offset:020d}{SET_ASIDE_SUFFIX}{position}"


class SegmentPlan(NamedTuple):
    """What recovery keeps of a segment's ``.data`` and what it does with the rest."""

    records: ScannedRecords  # every record kept, damaged ones included, as columns
    damaged: list[int]  # the entries (record numbers) of the damaged records kept
    damage: str | None  # what is wrong with the first of them
    file_size: int
    problem: str | None  # why the kept data ends before the file does (None: it does not)
    set_aside: bool  # the bytes past the kept data are set aside, not cut (no .index numbers them)

    @property
    def keep_bytes(self) -> int:
        """Where ``.data`` ends once the plan is carried out."""
        return self.records.end

    @property
    def record_count(self) -> int:
        """How many records (offsets) the segment keeps."""
        return len(self.records.positions)


def plan_segment(
    data: bytes,
    index_raw: bytes | None,
    timeindex_raw: bytes | None,
    base_offset: int,
    max_record_bytes: int,
) -> SegmentPlan:
    """The plan for a segment whose files hold these bytes (``index_raw`` None: no ``.index``)."""
    scanned = scan_columns(data, 0, max_record_bytes=max_record_bytes)
    if scanned.end == len(data):
        return SegmentPlan(scanned, [], None, len(data), None, False)
    offsets, starts, lengths = entry_columns(index_raw or b"", "Q", 3)
    stamp_offsets, stamps = entry_columns(timeindex_raw or b"", "q", 2)
    positions, sizes, timestamps = list(scanned.positions), list(scanned.sizes), list(scanned.timestamps)
    damaged: list[int] = []
    damage: str | None = None
    end, error = scanned.end, scanned.error
    unwritten = _zero_tail(data)
    tried = 0  # entries before this one were tried as the record after damage (rule 3): never again
    while end < len(data):
        k = len(positions)
        stretch = _own_entry(data, end, k, base_offset, offsets, starts, lengths, unwritten)
        if stretch is None:
            following, tried = _next_indexed_record(data, end, k, base_offset, offsets, starts, tried, max_record_bytes)
            if following is None:
                break  # rules 4 and 5
            stretch = _split(end, following, k, tried, starts)
        if damage is None:
            damage = "its size field runs past the end of .data" if error is None else error.reason
        for number, (position, size) in enumerate(stretch, k):
            damaged.append(number)
            positions.append(position)
            sizes.append(size)
            known = number < len(stamp_offsets) and stamp_offsets[number] == base_offset + number
            timestamps.append(stamps[number] if known else (timestamps[-1] if timestamps else 0))
        following = stretch[-1][0] + stretch[-1][1]
        more = scan_columns(data, following, max_record_bytes=max_record_bytes)
        positions += more.positions
        sizes += more.sizes
        timestamps += more.timestamps
        end, error = more.end, more.error
    problem = None if error is None else error.reason
    if problem is None and end != len(data):
        problem = "the last record is incomplete (torn write)"
    records = ScannedRecords(positions, sizes, timestamps, end, error)
    return SegmentPlan(records, damaged, damage, len(data), problem, index_raw is None and end < len(data))


def _own_entry(
    data: bytes,
    bad: int,
    k: int,
    base_offset: int,
    offsets: array.array[int],
    starts: array.array[int],
    lengths: array.array[int],
    unwritten: int,
) -> list[tuple[int, int]] | None:
    """Rule 2: the damaged record at ``bad`` as its own ``.index`` entry delimits it, if it does
    (``unwritten``: where the zeros that end ``.data`` begin)."""
    if k >= len(offsets) or offsets[k] != base_offset + k or starts[k] != bad:
        return None
    size = lengths[k]
    if size < MIN_RECORD_BYTES or bad + size > len(data) or bad + size > unwritten:
        return None  # a damaged entry, or a record a power cut took back (rule 4)
    return [(bad, size)]


def _zero_tail(data: bytes, chunk: int = 1 << 16) -> int:
    """Where the run of zero bytes that ends ``data`` begins (``len(data)`` when it ends otherwise)."""
    end = len(data)
    while end:
        start = max(0, end - chunk)
        written = len(data[start:end].rstrip(b"\0"))
        if written:
            return start + written
        end = start
    return 0


def _next_indexed_record(
    data: bytes,
    bad: int,
    k: int,
    base_offset: int,
    offsets: array.array[int],
    starts: array.array[int],
    tried: int,
    max_record_bytes: int,
) -> tuple[int | None, int]:
    """Rule 3: the first valid record after ``bad`` that an ``.index`` entry past entry ``k`` names,
    with room for a byte of each offset between (its position, or None), and that entry's number
    (the entries before it were tried)."""
    for j in range(max(tried, k + 1), len(offsets)):
        at = starts[j]
        valid = offsets[j] == base_offset + j and bad + (j - k) <= at < len(data)
        if valid and is_valid_record(data, at, max_record_bytes=max_record_bytes):
            return at, j
    return None, len(offsets)


def _split(bad: int, following: int, k: int, j: int, starts: array.array[int]) -> list[tuple[int, int]]:
    """The damaged records of offsets ``k`` to ``j - 1`` in ``[bad, following)`` (entry ``j`` is the
    valid record at ``following``), each starting where its entry says when the entries go forward
    inside the stretch (else a byte after the one before: the bytes stay, only their split is a guess)."""
    beginnings = [bad]
    for m in range(k + 1, j):
        room = following - (j - m)  # the last start that leaves a byte to each offset after it
        beginnings.append(starts[m] if beginnings[-1] < starts[m] <= room else beginnings[-1] + 1)
    ends = [*beginnings[1:], following]
    return [(start, stop - start) for start, stop in zip(beginnings, ends, strict=True)]
