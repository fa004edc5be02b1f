"""The integrity check of a stream (``adiskq check``): every record and every index entry, read-only.

What is checked, per partition, segment by segment:

* every ``.data`` record from the start: size, magic and CRC-32C (as recovery checks the active
  segment), and that the data ends exactly after a record;
* every ``.index`` entry: it names the next offset, points at the byte where the previous record
  ended, and its size is that record's size;
* every ``.timeindex`` entry: it names the same offset and the timestamp stored in the record (the
  active segment's may end up to 127 entries short: single pushes buffer theirs); a compressed
  stream's segments have none, and are not asked for one;
* every ``.tagindex`` entry: it holds the tag hash of the record (the same allowance for the active
  segment); a segment without one (written before tags, or a compressed stream's before its first
  tagged message) is not a problem: readers that filter by tag take the tags from the records;
* every entry of the active segment's ``.keyindex`` (its hash column): it holds the key hash of the
  record (the same allowance); a sealed segment's must be sealed for its entries and pass its
  CRC-32C (``keyindex.sealed_problem``); a segment without one (a stream that keeps no key index) is
  not a problem;
* that each segment starts at the offset where the previous one ended, and that no file is missing;
* every compressed record's value decompresses with the dictionary it names, and every dictionary
  file of the stream is whole (``dictionaries/``): a damaged or missing one is reported once per
  segment with the offsets of the records that need it.

Each problem carries the file and the byte position, and what can fix it (``Problem.fix``):
``"recovery"`` — opening the stream as a producer repairs it (only the last segment of a partition is
recovered, plus missing index files); ``"rebuild"`` — a sealed segment whose data is sound but whose
index files disagree with it: its index files can be rebuilt from the data; ``None`` — damaged
committed data in a sealed segment, which only a backup (or reading around it) can help.

While a producer holds the stream, the active segments' tails (records written but not yet
indexed, time-index entries ahead of the index) are in flight, not damage, and are not reported.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Final, Literal, TypeAlias

from .._errors import CorruptRecordError, CorruptStreamError
from .._sansio import keyindex as keyindex_format
from .._sansio import tags as tags_format
from .._sansio.codec import (
    ATTRIBUTES_AT,
    DEFAULT_MAX_RECORD_BYTES,
    NEED_MORE,
    RecordExtent,
    decode_record,
)
from .._sansio.compression import COMPRESSED, dictionary_file_name
from .._sansio.core import decode_messages, scan_records
from .._sansio.entries import (
    ACTIVE_SHORTFALL,
    INDEX_ENTRY,
    INDEX_ENTRY_BYTES,
    KEY_COLUMN,
    SIDE_COLUMNS,
    TAG_COLUMN,
    TIME_COLUMN,
    TIMEINDEX_ENTRY,
    SideColumn,
)
from .._sansio.naming import DATA, INDEX, TAGINDEX, TIMEINDEX, TXNINDEX
from . import keyindex, txn_index
from .dictionaries import (
    DICTIONARIES_DIR,
    dictionary_versions,
    partition_stream_path,
    read_dictionary,
    stream_dictionaries,
)
from .files import read_file
from .offsets import OFFSETS_FILE, group_dir, list_groups, load_offsets
from .recovery import describe_damaged
from .recovery_plan import SegmentPlan, damaged_file_name, plan_segment
from .segment_files import list_segment_files, segment_path
from .stream import StreamReader

__all__ = [
    "Fix",
    "Problem",
    "SegmentCheck",
    "SegmentRef",
    "check_dictionaries",
    "check_groups",
    "check_segment",
    "list_segments",
]

Fix: TypeAlias = Literal["recovery", "rebuild", "keyindex"] | None

# A badly damaged file could list thousands of problems; past this many, one line counts the rest.
MAX_PROBLEMS_PER_FILE: Final = 20
_PROGRESS_RECORDS: Final = 20_000


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong, where it is, and what can fix it."""

    path: str
    position: int | None  # byte position in ``path``, where it makes sense
    what: str
    fix: Fix = None
    partition: int | None = None
    segment: int | None = None  # base offset

    def __str__(self) -> str:
        where = self.path if self.position is None else f"{self.path}:{self.position}"
        return f"{where}: {self.what}"


class SegmentRef:
    """A segment found on disk, before it is checked."""

    __slots__ = ("base", "compact", "directory", "extensions", "is_active", "is_oldest", "partition")

    def __init__(
        self,
        partition: int,
        directory: str,
        base: int,
        extensions: frozenset[str],
        is_active: bool,
        is_oldest: bool,
        *,
        compact: bool = False,
    ) -> None:
        self.partition = partition
        self.directory = directory
        self.base = base
        self.extensions = extensions
        self.is_active = is_active  # the last segment of its partition: recovery's business
        self.is_oldest = is_oldest
        self.compact = compact  # a compressed stream's: no .timeindex (its records hold the timestamps)

    def path(self, extension: str) -> str:
        """The path of one of its files."""
        return segment_path(self.directory, self.base, extension)

    def data_bytes(self) -> int:
        """The size of its ``.data`` (0 if missing): what the check reads."""
        try:
            return os.lstat(self.path(DATA)).st_size
        except FileNotFoundError:
            return 0


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentCheck:
    """What checking one segment found."""

    partition: int
    base: int
    records: int  # records verified
    next_offset: int  # the offset after the segment's last indexed message
    problems: tuple[Problem, ...]
    vanished: bool = False  # deleted (by a vacuum) between listing and checking


def list_segments(stream: StreamReader) -> tuple[list[SegmentRef], list[Problem]]:
    """Every segment of every partition, in order; and partitions whose folder is missing."""
    segments: list[SegmentRef] = []
    problems: list[Problem] = []
    compact = stream.settings.compact_segments
    for partition in range(stream.partition_count):
        directory = stream.partition_dir(partition)
        try:
            files = list_segment_files(directory)
        except FileNotFoundError:
            problems.append(
                Problem(
                    directory,
                    None,
                    "the partition's folder is missing (settings.json counts it): its messages, if it had any, are "
                    "lost; a producer open recreates it empty",
                    "recovery",
                    partition,
                )
            )
            continue
        bases = sorted(files)
        for i, base in enumerate(bases):
            last, first = i == len(bases) - 1, i == 0
            segments.append(
                SegmentRef(partition, directory, base, frozenset(files[base]), last, first, compact=compact)
            )
    return segments, problems


class _Findings:
    """Problems of one segment, at most ``MAX_PROBLEMS_PER_FILE`` listed per file."""

    def __init__(self, segment: SegmentRef) -> None:
        self.segment = segment
        self.problems: list[Problem] = []
        self._per_file: dict[str, int] = {}

    def add(self, path: str, position: int | None, what: str, fix: Fix) -> None:
        count = self._per_file.get(path, 0) + 1
        self._per_file[path] = count
        if count <= MAX_PROBLEMS_PER_FILE:
            self.problems.append(Problem(path, position, what, fix, self.segment.partition, self.segment.base))

    def finish(self) -> tuple[Problem, ...]:
        for path, count in self._per_file.items():
            if count > MAX_PROBLEMS_PER_FILE:
                extra = count - MAX_PROBLEMS_PER_FILE
                fixes = {p.fix for p in self.problems if p.path == path}
                fix = fixes.pop() if len(fixes) == 1 else None
                self.add_summary(path, f"... and {extra} more problems in this file", fix)
        return tuple(self.problems)

    def add_summary(self, path: str, what: str, fix: Fix) -> None:
        self.problems.append(Problem(path, None, what, fix, self.segment.partition, self.segment.base))


def _scan(
    data: bytes, start: int, on_progress: Callable[[int], None] | None = None
) -> tuple[list[RecordExtent], int, str | None]:
    """Valid records from ``start``, where they end, and why the scan stopped early (or None).

    ``on_progress`` hears of the bytes scanned every ``_PROGRESS_RECORDS`` records.
    """
    extents: list[RecordExtent] = []
    problem = None
    records = scan_records(data, start, max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
    try:
        if on_progress is None:
            extents.extend(records)
        else:
            reported = start
            for extent in records:
                extents.append(extent)
                if len(extents) % _PROGRESS_RECORDS == 0:
                    on_progress(extent.position - reported)
                    reported = extent.position
    except CorruptRecordError as error:
        problem = error.reason
    end = extents[-1].position + extents[-1].size if extents else start
    if problem is None and end != len(data):
        problem = "the data ends inside a record (a write cut short)"
    return extents, end, problem


def check_segment(
    segment: SegmentRef,
    *,
    expected_base: int | None,
    next_base: int | None,
    live: bool,
    on_progress: Callable[[int], None] | None = None,
) -> SegmentCheck:
    """Verify one segment's records and index entries against each other (see the module docstring).

    ``expected_base`` is where the previous segment ended (None for the first), ``next_base`` where
    the next one starts (None for the active segment); ``live`` says a producer holds the stream, so
    the active segment may be growing while it is read. ``on_progress`` hears of ``.data`` bytes
    checked as the check goes (not all of them: the caller counts the segment done at the end).
    """
    found = _Findings(segment)
    base = segment.base
    data_path, index_path = segment.path(DATA), segment.path(INDEX)
    in_flight = live and segment.is_active

    _check_gap(found, segment, expected_base)

    # The index first, then the side columns, then the data: each is written before the one read
    # ahead of it, so a live producer's writes leave the later reads covering the earlier ones.
    index_raw = read_file(index_path)
    side_raw = {
        column: read_file(segment.path(column.extension)) if _may_have(segment, column) else None
        for column in SIDE_COLUMNS
    }
    time_raw = side_raw[TIME_COLUMN]
    data = read_file(data_path)
    if index_raw is None and time_raw is None and data is None:
        # Listed a moment ago, gone now: a vacuum deleted it while we looked. Nothing to check.
        return SegmentCheck(segment.partition, base, 0, base, (), vanished=True)
    _check_missing_files(found, segment, index_raw is None, time_raw is None and not segment.compact)
    if data is None:
        entries = len(index_raw or b"") // INDEX_ENTRY_BYTES
        _report_missing_data(found, segment, entries)
        return SegmentCheck(segment.partition, base, 0, base + entries, found.finish())

    extents, _, scan_problem = _scan(data, 0, on_progress)
    data_sound = scan_problem is None
    # Index problems are fixed by recovery in the active segment; in a sealed one, by a rebuild
    # from the data, which is safe only when the data is whole (decided once the count is known).
    index_fix: Fix = "recovery" if segment.is_active else "rebuild"
    data_fix: Fix = "recovery" if segment.is_active else None

    original_index = index_raw
    index_raw = index_raw or b""
    entries = len(index_raw) // INDEX_ENTRY_BYTES
    partial = len(index_raw) % INDEX_ENTRY_BYTES
    if partial and not in_flight:
        found.add(index_path, entries * INDEX_ENTRY_BYTES, f"ends with a partial entry of {partial} bytes", index_fix)

    expected = b"".join(
        INDEX_ENTRY.pack(base + i, e.position, e.size) for i, e in enumerate(extents[: min(entries, len(extents))])
    )
    stamps: list[int | None]
    if entries <= len(extents) and index_raw[: entries * INDEX_ENTRY_BYTES] == expected:
        # The fast path: the entries are exactly those of the sound records.
        covered_end = extents[entries - 1].position + extents[entries - 1].size if entries else 0
        stamps = [e.timestamp_ns for e in extents[:entries]]
    else:
        covered_end, stamps = _check_entries(found, segment, data, index_raw, entries, extents, index_fix, data_fix)
    records = sum(1 for stamp in stamps if stamp is not None)

    if not in_flight and len(data) > covered_end:
        _check_tail(found, segment, data, covered_end, index_fix, data_fix)

    positions = [e.position for e in extents[:entries]]
    for column, raw in side_raw.items():
        if raw is not None:
            _check_side_column(found, segment, column, raw, data, positions, stamps, entries, in_flight, index_fix)
    _check_txn_index(found, segment, data, positions, in_flight, index_fix)
    _check_compressed_values(found, segment, data, extents[:entries], data_fix)

    problems = found.finish()
    if not segment.is_active:
        # A rebuild keeps every record and renumbers nothing: only when the data is whole and holds
        # exactly the messages the offsets leave room for (the next segment starts after them).
        rebuildable = data_sound and next_base is not None and len(extents) == next_base - base
        problems = tuple(
            dataclasses.replace(p, fix=None) if p.fix == "rebuild" and not rebuildable else p for p in problems
        )
    if segment.is_active and not data_sound and not in_flight:
        plan, kept = _what_repair_does(segment, data, original_index, time_raw)
        problems = _with_repair_plan(data_path, problems, plan, kept)
    return SegmentCheck(segment.partition, base, records, base + entries, problems)


def _check_gap(found: _Findings, segment: SegmentRef, expected_base: int | None) -> None:
    """The segment must start where the previous one ended."""
    base = segment.base
    if expected_base is None or base == expected_base:
        return
    if base > expected_base:
        gap = f"offsets {expected_base}..{base - 1} are missing: the previous segment ends before this one starts"
    else:
        gap = f"this segment starts at offset {base}, inside the previous segment (which ends at {expected_base})"
    found.add(segment.path(DATA), None, gap, None)


def _check_missing_files(found: _Findings, segment: SegmentRef, no_index: bool, no_timeindex: bool) -> None:
    """A missing ``.index`` or ``.timeindex`` can be rebuilt from ``.data``."""
    if no_index:
        if segment.is_oldest and not segment.is_active:
            found.add(
                segment.path(INDEX),
                None,
                "missing: this looks like a vacuum that was interrupted (it deletes .index first), or a lost "
                "file; the next producer open (or a repair) rebuilds it from .data, and the next vacuum "
                "deletes the segment again if the retention says so",
                "recovery",
            )
        else:
            found.add(segment.path(INDEX), None, "missing: it can be rebuilt from .data", "recovery")
    if no_timeindex:
        found.add(segment.path(TIMEINDEX), None, "missing: it can be rebuilt from .data", "recovery")


def _report_missing_data(found: _Findings, segment: SegmentRef, entries: int) -> None:
    """A lost ``.data`` takes the messages its index names with it."""
    base = segment.base
    if segment.is_active:
        what = (
            f"missing: the {entries} messages its index names are lost; a producer open recreates it empty "
            "and drops them from the index"
        )
        found.add(segment.path(DATA), None, what, "recovery")
    else:
        what = f"missing: the {entries} messages of offsets {base}..{base + entries - 1} are lost"
        found.add(segment.path(DATA), None, what, None)


def _what_repair_does(
    segment: SegmentRef, data: bytes, index_raw: bytes | None, time_raw: bytes | None
) -> tuple[list[Problem], set[int]]:
    """What recovery will do with the active segment's damage, from the plan it carries out
    (``recovery_plan.plan_segment``): the damaged records it keeps at their offsets, and the bytes
    it cuts (a torn tail, with the indexed messages that go with it) or sets aside; and the
    positions of the damaged records it keeps."""
    base, data_path = segment.base, segment.path(DATA)
    plan = plan_segment(data, index_raw, time_raw, base, DEFAULT_MAX_RECORD_BYTES)
    kept = {plan.records.positions[entry] for entry in plan.damaged}
    problems: list[Problem] = []
    if plan.damaged:
        first = plan.records.positions[plan.damaged[0]]
        what = (
            f"damaged committed data: repairing cuts nothing here, {describe_damaged(plan, base)}; readers raise "
            "CorruptRecordError at a damaged offset and read on from the offset after it"
        )
        problems.append(Problem(data_path, first, what, None, segment.partition, base))
        problems += _unmarked_tags(segment, plan)
    keep = plan.keep_bytes
    if keep < plan.file_size:
        if plan.set_aside:
            aside = os.path.join(segment.directory, damaged_file_name(base, keep))
            what = (
                f"repairing sets aside {plan.file_size - keep} bytes of .data from here ({plan.problem}) in "
                f"{aside}: without .index nothing numbers the records from there on; the next message gets "
                f"offset {base + plan.record_count}"
            )
        else:
            entries = len(index_raw or b"") // INDEX_ENTRY_BYTES
            lost = max(0, entries - plan.record_count)
            what = f"repairing cuts the data here ({plan.problem})"
            if lost:
                what += (
                    f", and with it the {lost} indexed messages from there on (offsets {base + plan.record_count}.."
                    f"{base + entries - 1}): their records end past the end of .data (a power cut took them back)"
                )
            else:
                return problems, kept  # a torn tail no entry committed: the tail check said so
        problems.append(Problem(data_path, keep, what, "recovery", segment.partition, base))
    return problems, kept


def _unmarked_tags(segment: SegmentRef, plan: SegmentPlan) -> list[Problem]:
    """The ``.tagindex`` entries of damaged records the plan keeps that do not say their tag is
    unknown (``tags.UNKNOWN_TAG``): filtered readers would pass those records by, which repairing
    changes."""
    path = segment.path(TAGINDEX)
    column = read_file(path) or b""
    width = tags_format.ENTRY_BYTES
    marked = tags_format.UNKNOWN_TAG.to_bytes(width, "little")
    unmarked = [e for e in plan.damaged if len(column) >= (e + 1) * width and column[e * width :][:width] != marked]
    if not unmarked:
        return []
    offsets = ", ".join(str(segment.base + entry) for entry in unmarked[:5])
    what = (
        f"{len(unmarked)} entries of damaged offsets ({offsets}{', ...' if len(unmarked) > 5 else ''}) hold a tag "
        "hash: repairing marks their tags unknown, so readers filtering by tag meet the damage too"
    )
    return [Problem(path, unmarked[0] * width, what, "recovery", segment.partition, segment.base)]


def _with_repair_plan(
    data_path: str, problems: tuple[Problem, ...], plan: list[Problem], kept: set[int]
) -> tuple[Problem, ...]:
    """The active segment's problems with what repairing does added: a damaged record it keeps (at
    a position in ``kept``) is not said to be fixed by it, and a tail it sets aside not said to be cut."""
    if not plan and not kept:
        return problems
    aside = any(p.fix == "recovery" and "sets aside" in p.what for p in plan)
    adjusted = []
    for problem in problems:
        if problem.path == data_path and problem.what.startswith("torn tail") and aside:
            continue  # the plan says what happens to those bytes
        if aside and problem.path.endswith("." + INDEX) and problem.what.startswith("missing"):
            what = "missing: it is rebuilt from .data up to the damage (what happens to the rest is said below)"
            problem = dataclasses.replace(problem, what=what)
        if problem.path == data_path and problem.fix == "recovery" and problem.position in kept:
            problem = dataclasses.replace(problem, fix=None)
        adjusted.append(problem)
    return (*adjusted, *plan)


def _check_compressed_values(
    found: _Findings, segment: SegmentRef, data: bytes, extents: list[RecordExtent], data_fix: Fix
) -> None:
    """Each compressed record's value decompresses with the dictionary it names. A dictionary that
    is missing or damaged is one problem naming the records (offsets) that need it."""
    compressed = [i for i, extent in enumerate(extents) if data[extent.position + ATTRIBUTES_AT] & COMPRESSED]
    if not compressed:
        return
    dictionaries = stream_dictionaries(partition_stream_path(segment.directory))
    data_path = segment.path(DATA)
    needing: dict[str, list[int]] = {}  # a dictionary's problem -> offsets of the records needing it
    for i in compressed:
        extent = extents[i]
        record = data[extent.position : extent.position + extent.size]
        try:
            decode_messages(record, segment.partition, segment.base + i, 1, dictionaries=dictionaries)
        except CorruptRecordError as error:
            found.add(
                data_path,
                extent.position,
                f"the value of offset {segment.base + i} is damaged: {error.reason}",
                data_fix,
            )
        except CorruptStreamError as error:
            needing.setdefault(str(error), []).append(segment.base + i)
    for problem, offsets in needing.items():
        found.add(
            data_path,
            None,
            f"{len(offsets)} compressed records (offsets {offsets[0]}..{offsets[-1]}) cannot be read: {problem}",
            None,
        )


def check_dictionaries(stream_path: str) -> list[Problem]:
    """Every dictionary file of the stream reads back whole (a damaged one no record needs yet is
    still reported: the next producer would compress with it)."""
    problems = []
    for version in dictionary_versions(stream_path):
        try:
            read_dictionary(stream_path, version)
        except CorruptStreamError as error:
            path = os.path.join(stream_path, DICTIONARIES_DIR, dictionary_file_name(version))
            problems.append(Problem(path, None, str(error)))
    return problems


def _entry_position(index_raw: bytes, entry: int) -> int:
    return int(INDEX_ENTRY.unpack_from(index_raw, entry * INDEX_ENTRY_BYTES)[1])


def _check_entries(
    found: _Findings,
    segment: SegmentRef,
    data: bytes,
    index_raw: bytes,
    entries: int,
    extents: list[RecordExtent],
    index_fix: Fix,
    data_fix: Fix,
) -> tuple[int, list[int | None]]:
    """The slow path: each index entry against the record it points at. Returns where the data the
    entries cover ends, and each entry's timestamp (None where its record is damaged)."""
    base = segment.base
    data_path, index_path = segment.path(DATA), segment.path(INDEX)
    stamps: list[int | None] = [None] * entries
    previous_end = 0
    covered_end = 0
    for i in range(entries):
        offset, position, size = INDEX_ENTRY.unpack_from(index_raw, i * INDEX_ENTRY_BYTES)
        at = i * INDEX_ENTRY_BYTES
        if offset != base + i:
            found.add(index_path, at, f"entry {i} is for offset {offset}, expected {base + i}", index_fix)
        if i < len(extents):
            # The data is sound this far, so the record is known: only the entry can be wrong.
            extent = extents[i]
            if (position, size) != (extent.position, extent.size):
                found.add(
                    index_path,
                    at,
                    f"the entry of offset {base + i} says byte {position}, {size} bytes; the record is at byte "
                    f"{extent.position}, {extent.size} bytes",
                    index_fix,
                )
            stamps[i] = extent.timestamp_ns
            previous_end = covered_end = extent.position + extent.size
            continue
        if position != previous_end:
            found.add(
                index_path,
                at,
                f"the entry of offset {base + i} points at byte {position} of .data, but the previous record "
                f"ends at byte {previous_end}",
                index_fix,
            )
        if position + size > len(data):
            found.add(
                index_path,
                at,
                f"the entry of offset {base + i} points past the end of .data (bytes {position}..{position + size}, "
                f"the file has {len(data)})",
                data_fix,
            )
            continue
        try:
            decoded = decode_record(data, position, max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
        except CorruptRecordError as error:
            what = f"the record of offset {base + i} is damaged: {error.reason}"
            if not segment.is_active:
                what += f" (the messages after it can still be read, from offset {base + i + 1})"
            found.add(data_path, position, what, data_fix)
            previous_end = covered_end = position + size
            continue
        if decoded is NEED_MORE:
            found.add(
                data_path, position, f"the record of offset {base + i} runs past the end of .data (torn)", data_fix
            )
            previous_end = covered_end = position + size
            continue
        if decoded.end - position != size:
            found.add(
                index_path,
                at,
                f"the entry of offset {base + i} says {size} bytes, but the record at byte {position} has "
                f"{decoded.end - position}",
                index_fix,
            )
        stamps[i] = decoded.timestamp_ns
        previous_end = covered_end = decoded.end
    return covered_end, stamps


def _check_tail(
    found: _Findings, segment: SegmentRef, data: bytes, covered_end: int, index_fix: Fix, data_fix: Fix
) -> None:
    """Data after the last indexed record: unindexed records and a torn or damaged tail."""
    extents, end, problem = _scan(data, covered_end)
    data_path = segment.path(DATA)
    if extents:
        what = f"{len(extents)} whole records after the last index entry are not in the index"
        found.add(data_path, covered_end, what, index_fix)
    if problem is not None:
        if segment.is_active:
            found.add(data_path, end, f"torn tail of {len(data) - end} bytes: {problem}", data_fix)
        else:
            found.add(
                data_path, end, f"{len(data) - end} bytes after the last record are not a record: {problem}", None
            )


def _check_txn_index(
    found: _Findings, segment: SegmentRef, data: bytes, positions: list[int], in_flight: bool, index_fix: Fix
) -> None:
    """The ``.txnindex`` names exactly the transactions the segment's abort markers ended
    (``txn_index.expected_entries``); a live producer's newest entry may still be on its way."""
    raw = read_file(segment.path(TXNINDEX)) or b""
    expected = txn_index.expected_entries(data, positions, segment.base)
    if raw == expected or (in_flight and expected.startswith(raw) and len(raw) % txn_index.ENTRY.size == 0):
        return
    path = segment.path(TXNINDEX)
    if not raw:
        found.add(
            path, None, f"is missing: the data holds {len(expected) // txn_index.ENTRY.size} abort markers", index_fix
        )
        return
    said = txn_index.parse_entries(raw)
    wanted = txn_index.parse_entries(expected)
    if len(raw) % txn_index.ENTRY.size:
        found.add(path, len(said) * txn_index.ENTRY.size, "ends with a partial entry", index_fix)
    for number, entry in enumerate(said):
        if number >= len(wanted) or entry != wanted[number]:
            found.add(
                path,
                number * txn_index.ENTRY.size,
                f"entry {number} ({entry}) is not what the segment's abort markers say",
                index_fix,
            )
            return
    if len(said) < len(wanted):
        found.add(path, len(raw), f"lacks {len(wanted) - len(said)} of the segment's abort markers", index_fix)


def _may_have(segment: SegmentRef, column: SideColumn) -> bool:
    """Whether the segment may have this side column: a compact one has no ``.timeindex``."""
    return not segment.compact or column.in_compact or column.from_first_tag


def _check_side_column(
    found: _Findings,
    segment: SegmentRef,
    column: SideColumn,
    raw: bytes,
    data: bytes,
    positions: list[int],
    stamps: list[int | None],
    entries: int,
    in_flight: bool,
    index_fix: Fix,
) -> None:
    """A side column's file (``raw``, there) against the ``.index`` (``entries`` messages) and
    against the entries the records give: whole entries, one a message (the active segment may lack
    up to ``ACTIVE_SHORTFALL``, still buffered by its producer or lost with it in a crash: readers
    take those from the records, recovery rewrites them), and each entry the one its record gives.

    ``positions`` are the sound records the index points at, ``stamps`` their timestamps (None for
    a damaged one, whose entry is not known). A sealed segment's ``.keyindex`` is sealed: its hash
    column is followed by a sorted column and a trailer, checked whole (its CRC-32C) instead.
    """
    path = segment.path(column.extension)
    if column is KEY_COLUMN and not segment.is_active:
        problem = keyindex.sealed_problem(path, entries, check_crc=True)
        if problem is not None:
            # Readers never trust a damaged one into a wrong answer (they search the data instead),
            # but it costs every lookup that time; ``--repair`` (or the next producer) rebuilds it.
            found.add(
                path, None, f"damaged ({problem}): lookups search the data instead; it can be rebuilt", "keyindex"
            )
        return
    expected, mismatch = _EXPECTED_ENTRIES[column.extension](segment, data, positions, stamps)
    width = column.width
    count, partial = divmod(len(raw), width)
    if partial and not in_flight:
        found.add(path, count * width, f"ends with a partial entry of {partial} bytes", index_fix)
    if count < entries and not (segment.is_active and entries - count <= ACTIVE_SHORTFALL):
        found.add(
            path,
            count * width,
            f"has {count} entries but the index has {entries}: {entries - count} missing",
            index_fix,
        )
    elif count > entries and not in_flight:
        found.add(
            path,
            entries * width,
            f"has {count} entries but the index has {entries}: {count - entries} too many",
            index_fix,
        )
    shared = min(count, entries, len(expected) // width)
    if raw[: shared * width] == expected[: shared * width]:
        return
    for i in range(shared):
        at = i * width
        if raw[at : at + width] != expected[at : at + width] and (what := mismatch(i, raw[at : at + width])):
            found.add(path, at, what, index_fix)


# What a side column's entries must be, from the records, and how a wrong entry is worded (None:
# let it pass).
_Expected: TypeAlias = tuple[bytes, Callable[[int, bytes], "str | None"]]


def _time_entries(segment: SegmentRef, data: bytes, positions: list[int], stamps: list[int | None]) -> _Expected:
    """Each entry names the offset and the timestamp of the record the index points at."""
    base = segment.base
    expected = b"".join(
        TIMEINDEX_ENTRY.pack(base + i, stamp if stamp is not None else 0) for i, stamp in enumerate(stamps)
    )

    def mismatch(i: int, entry: bytes) -> str | None:
        offset, stamp = TIMEINDEX_ENTRY.unpack(entry)
        if offset != base + i:
            return f"entry {i} is for offset {offset}, expected {base + i}"
        if stamps[i] is not None and stamp != stamps[i]:
            return f"the entry of offset {base + i} says timestamp {stamp}, the record says {stamps[i]}"
        return None  # (the record is damaged: its timestamp is not known)

    return expected, mismatch


def _tag_entries(segment: SegmentRef, data: bytes, positions: list[int], stamps: list[int | None]) -> _Expected:
    """Each entry holds its record's tag hash."""

    def mismatch(i: int, entry: bytes) -> str:
        return f"the entry of offset {segment.base + i} does not hold its record's tag hash"

    return tags_format.data_tag_column(data, positions), mismatch


def _key_entries(segment: SegmentRef, data: bytes, positions: list[int], stamps: list[int | None]) -> _Expected:
    """Each entry of the hash column holds its record's key hash."""

    def mismatch(i: int, entry: bytes) -> str:
        return f"the entry of offset {segment.base + i} does not hold its record's key hash"

    return keyindex_format.pack_hashes(keyindex_format.data_key_hashes(data, positions)), mismatch


_EXPECTED_ENTRIES: Final[dict[str, Callable[[SegmentRef, bytes, list[int], list[int | None]], _Expected]]] = {
    TIME_COLUMN.extension: _time_entries,
    TAG_COLUMN.extension: _tag_entries,
    KEY_COLUMN.extension: _key_entries,
}
assert set(_EXPECTED_ENTRIES) == {column.extension for column in SIDE_COLUMNS}


def check_groups(stream: StreamReader, next_offsets: dict[int, int], notes: list[Problem]) -> Iterator[Problem]:
    """Committed offsets that cannot be read, or that name a partition the stream lacks; ``notes``
    gets those past the end of their partition, which are no damage: Kafka lets a group commit any
    offset (a reset to a future offset, a client's choice), and the gateway stores what it commits.

    ``next_offsets`` holds the end of each partition whose end is known.
    """
    for name in list_groups(stream.path):
        path = os.path.join(group_dir(stream.path, name), OFFSETS_FILE)
        try:
            committed = load_offsets(stream.path, name)
        except CorruptStreamError as error:
            yield Problem(path, None, str(error))
            continue
        for partition, offset in sorted(committed.items()):
            if not 0 <= partition < stream.partition_count:
                yield Problem(
                    path, None, f"group {name!r} has an offset for partition {partition}, which the stream lacks"
                )
            elif partition in next_offsets and offset > next_offsets[partition]:
                notes.append(
                    Problem(
                        path,
                        None,
                        f"group {name!r} committed offset {offset} of partition {partition}, past its end (next "
                        f"offset {next_offsets[partition]}). Not damage: Kafka lets a group commit any offset. "
                        "If the group is to read the messages written from now on, move it: "
                        f"`adiskq offsets --group {name} --reset-to newest`",
                        partition=partition,
                    )
                )
