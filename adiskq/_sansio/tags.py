"""Tags: the hash of a tag, and the ``.tagindex`` column of a segment (no I/O here).

A segment's ``.tagindex`` holds one u32 (little-endian) per message, beside its ``.index`` entry:
the tag hash of the message's record, which a filtering consumer reads instead of the records
(RocketMQ keeps the same hash in its ConsumeQueue)::

    0          the message has no tag
    otherwise  CRC-32 (zlib's, the key index's hash too) of the tag's UTF-8 bytes; a tag whose
               CRC-32 is 0 is stored as 1, so 0 always means "no tag"

``UNKNOWN_TAG`` (0xFFFFFFFF) is what recovery writes for a damaged record, whose tag bytes cannot be
trusted: every ``TagFilter`` takes it as a candidate (it is among ``TagFilter.hashes``), so a filtered reader
reads that record and meets its damage where an unfiltered reader does, instead of skipping it on a
hash of garbage. (A tag whose CRC-32 happens to be 0xFFFFFFFF has the same entry and is found the
same way: a candidate for every filter, confirmed from its record like any other.)
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from .._errors import InvalidArgumentError
from .codec import ATTRIBUTES_AT, TAGGED, record_tag, tag_bytes
from .entries import INDEX_ENTRY, TAG_ENTRY_BYTES

__all__ = [
    "ENTRIES",
    "ENTRY_BYTES",
    "NO_TAG",
    "NO_TAG_ENTRY",
    "UNKNOWN_TAG",
    "MatchingRecords",
    "TagFilter",
    "data_tag_column",
    "matching_entries",
    "matching_records",
    "names_a_tag",
    "tag_column",
    "tag_entries",
    "tag_entry",
    "tag_hash",
    "unpack_column",
]

ENTRY_BYTES: Final = TAG_ENTRY_BYTES
NO_TAG: Final = 0
UNKNOWN_TAG: Final = 0xFFFFFFFF  # a damaged record: a candidate for every filter
_U32: Final = struct.Struct("<I")
NO_TAG_ENTRY: Final = bytes(ENTRY_BYTES)  # the .tagindex entry of a message without a tag


def tag_hash(tag: str) -> int:
    """The ``.tagindex`` hash of a tag (never 0: 0 is "no tag")."""
    return zlib.crc32(tag_bytes(tag)) or 1


# The .tagindex entry of each tag seen lately: a producer computes its records' entries where the
# tags are at hand (a dict lookup a record) instead of cutting the tags out of the records again.
# Bounded: a stream with more distinct tags than this starts over.
ENTRIES: Final[dict[str | None, bytes]] = {None: NO_TAG_ENTRY}
_MAX_CACHED_ENTRIES: Final = 4096


def tag_entry(tag: str | None) -> bytes:
    """The ``.tagindex`` entry of a message with ``tag`` (a valid tag: the record was encoded)."""
    entry = ENTRIES.get(tag)
    if entry is None:
        if len(ENTRIES) >= _MAX_CACHED_ENTRIES:
            ENTRIES.clear()
            ENTRIES[None] = NO_TAG_ENTRY
        entry = ENTRIES[tag] = _U32.pack(tag_hash(tag))  # type: ignore[arg-type]  # None is cached
    return entry


def tag_entries(tags: Sequence[str | None]) -> list[bytes]:
    """``tag_entry`` of each tag: a dict lookup a tag, in C, for the tags seen before."""
    entries = list(map(ENTRIES.get, tags))
    if None in entries:
        entries = [entry or tag_entry(tag) for entry, tag in zip(entries, tags, strict=True)]
    return entries  # type: ignore[return-value]  # no None left


def _raw_tag_hash(raw: bytes | None) -> int:
    return NO_TAG if raw is None else (zlib.crc32(raw) or 1)


def names_a_tag(column: bytes) -> bool:
    """Whether any entry of a ``.tagindex`` column is not "no tag" (all its bytes 0)."""
    return column.count(0) != len(column)


def tag_column(records: Sequence[bytes]) -> bytes:
    """The ``.tagindex`` entries of encoded records (the producer's own, already checked)."""
    column = bytearray(ENTRY_BYTES * len(records))  # zeros: "no tag"
    pack_into = _U32.pack_into
    for i, record in enumerate(records):
        if record[ATTRIBUTES_AT] & TAGGED:
            pack_into(column, i * ENTRY_BYTES, _raw_tag_hash(record_tag(record)))
    return bytes(column)


def data_tag_column(data: bytes, positions: Iterable[int], damaged: Iterable[int] = ()) -> bytes:
    """The ``.tagindex`` entries of the records at ``positions`` of a ``.data`` buffer (recovery's
    and check's rebuild; the records there were checked), ``UNKNOWN_TAG`` for the entries numbered
    in ``damaged`` (records that failed their check)."""
    column = bytearray()
    for position in positions:
        try:
            raw = record_tag(data[position : position + _record_size(data, position)])
        except (IndexError, struct.error):
            raw = None
        column += _U32.pack(_raw_tag_hash(raw))
    for entry in damaged:
        _U32.pack_into(column, entry * ENTRY_BYTES, UNKNOWN_TAG)
    return bytes(column)


def _record_size(data: bytes, position: int) -> int:
    return int(_U32.unpack_from(data, position)[0])


def unpack_column(raw: bytes) -> array[int]:
    """The hashes of a ``.tagindex`` buffer (whole entries only)."""
    hashes = array("I")
    hashes.frombytes(raw[: len(raw) - len(raw) % ENTRY_BYTES])
    if sys.byteorder == "big":  # pragma: no cover - big-endian hosts
        hashes.byteswap()
    return hashes


def matching_entries(column: bytes, hashes: tuple[int, ...]) -> list[int]:
    """Entry numbers (ascending) of a ``.tagindex`` buffer whose hash is one of ``hashes``.

    ``bytes.find`` does the scan in C: a candidate is kept only where it starts on an entry's
    boundary (a hash may also appear across two entries).
    """
    found: list[int] = []
    raw = column[: len(column) - len(column) % ENTRY_BYTES]
    for hash_value in set(hashes):
        needle = _U32.pack(hash_value)
        at = raw.find(needle)
        while at != -1:
            if at % ENTRY_BYTES == 0:
                found.append(at // ENTRY_BYTES)
                at = raw.find(needle, at + ENTRY_BYTES)
            else:
                at = raw.find(needle, at + 1)
    found.sort()
    return found


class MatchingRecords(NamedTuple):
    """Which records a filtered read fetches (``matching_records``)."""

    positions: list[int]  # the spans of .data to read, in order: where each starts
    sizes: list[int]  # and its bytes (candidates whose records touch share one span: one pread)
    offsets: list[int]  # the candidates' offsets
    passed: int  # how many index entries that looked at
    total: int  # bytes of the spans


def matching_records(
    column: bytes,
    entries: bytes | memoryview,
    hashes: tuple[int, ...],
    first_offset: int,
    max_count: int,
    max_bytes: int,
) -> MatchingRecords | int:
    """The filtering consumer's selection: which of the messages whose ``.index`` entries are
    ``entries`` (from ``first_offset`` on) to read, and in which spans of ``.data``.

    A candidate is an entry whose ``column`` hash is one of ``hashes``, or one past the column's end
    (its tag is not known without its record). Candidates are taken in order up to ``max_count``, or
    until their sizes reach ``max_bytes`` (-1: no limit); ``passed`` is then the entries up to the
    last one taken, else all of them. An int instead: the number of the entry whose offset is not
    the one expected (the caller raises). ``adiskq/_csrc/log/tags.c`` does the same in one C loop.
    """
    count = memoryview(entries).nbytes // INDEX_ENTRY.size  # bytes, whatever the view's items
    covered = min(count, len(column) // ENTRY_BYTES)
    candidates = matching_entries(column[: covered * ENTRY_BYTES], hashes)
    candidates.extend(range(covered, count))
    positions: list[int] = []
    sizes: list[int] = []
    offsets: list[int] = []
    passed = count
    total = 0
    run_end = -1
    for entry in candidates:
        found, position, size = INDEX_ENTRY.unpack_from(entries, entry * INDEX_ENTRY.size)
        if found != first_offset + entry:
            return entry
        offsets.append(found)
        if position == run_end:
            sizes[-1] += size
        else:
            positions.append(position)
            sizes.append(size)
        run_end = position + size
        total += size
        if len(offsets) >= max_count or (max_bytes >= 0 and total >= max_bytes):
            passed = entry + 1
            break
    return MatchingRecords(positions, sizes, offsets, passed, total)


class TagFilter:
    """The tags a consumer wants (RocketMQ's ``TagA || TagB``): their hashes, to select candidates
    from a ``.tagindex`` column (``matching_entries``), and the tags themselves, to confirm each
    candidate's record."""

    __slots__ = ("hashes", "single_entry", "tags")

    def __init__(self, tags: Iterable[str]) -> None:
        if isinstance(tags, str | bytes):
            raise InvalidArgumentError(f"tags={tags!r}: give a set of tags, such as {{{tags!r}}}")
        wanted = frozenset(tags)
        if not wanted:
            raise InvalidArgumentError("tags=set(): give at least one tag, or tags=None for every message")
        for tag in wanted:
            tag_bytes(tag)  # a clear error for a tag no message can carry
        self.tags: frozenset[str | None] = frozenset(wanted)
        own = set(map(tag_hash, wanted))
        # The hashes whose entries are candidates: the tags' own, and a damaged record's.
        self.hashes = tuple(sorted(own | {UNKNOWN_TAG}))
        # The column entry of the one wanted hash: a stretch of the column equal to it repeated is
        # all wanted, told by one comparison.
        self.single_entry = _U32.pack(own.pop()) if len(own) == 1 else None

    @classmethod
    def of(cls, tags: Iterable[str] | None) -> TagFilter | None:
        """The filter for a consumer's ``tags=`` argument (None: every message)."""
        return None if tags is None else cls(tags)

    def __repr__(self) -> str:
        return f"TagFilter({sorted(t for t in self.tags if t is not None)!r})"
