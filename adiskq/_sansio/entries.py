"""A segment's entry files: ``.index``, and the side columns ``.timeindex``, ``.tagindex``, ``.keyindex``.

``.index`` holds 24 bytes a message (offset | position in .data | size, u64 LE each) and is the
commit point: a message exists for readers once its entry does. The side columns hold one entry a
message too, all derived from ``.data`` (recovery rebuilds them from it), and their rules live in
one table here, ``SIDE_COLUMNS``, in the order they are written (after ``.data``, before
``.index``):

=============  =====  ===========================================  ==============================
file           width  entry                                        in a compact segment
=============  =====  ===========================================  ==============================
``.timeindex``  16    offset u64 | timestamp_ns i64, LE            never (records hold the time)
``.tagindex``    4    the tag's hash, u32 LE (``tags.py``)         from the first entry naming a tag
``.keyindex``    4    the key's hash, u32 LE (``keyindex.py``)     as in any segment
=============  =====  ===========================================  ==============================

``.keyindex`` exists only in a stream that keeps a key index, and a sealed segment's has a sorted
column and a trailer after the hash column (``keyindex.py``). Single pushes buffer their side
entries and write ``BUFFERED_ENTRIES`` at a time, so the *active* segment's side columns may be up
to ``ACTIVE_SHORTFALL`` entries short of its ``.index`` (readers take those from the records,
``check`` accepts it, recovery rebuilds it after a crash); a sealed segment's are whole.

A *compact* segment is a compressed stream's: no ``.timeindex``, and no ``.tagindex`` until the
first entry that names a tag is written, when the file is made with a "no tag" entry for every
message before it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple, TypeAlias

from .naming import KEYINDEX, TAGINDEX, TIMEINDEX

__all__ = [
    "ACTIVE_SHORTFALL",
    "BUFFERED_ENTRIES",
    "INDEX_ENTRY",
    "INDEX_ENTRY_BYTES",
    "KEY_COLUMN",
    "KEY_ENTRY_BYTES",
    "SIDE_COLUMNS",
    "TAG_COLUMN",
    "TAG_ENTRY_BYTES",
    "TIMEINDEX_ENTRY",
    "TIMEINDEX_ENTRY_BYTES",
    "TIME_COLUMN",
    "EncodedRun",
    "RecordRun",
    "Run",
    "SideColumn",
]

INDEX_ENTRY: Final = struct.Struct("<QQQ")  # offset, position, size
TIMEINDEX_ENTRY: Final = struct.Struct("<Qq")  # offset, timestamp_ns
INDEX_ENTRY_BYTES: Final = INDEX_ENTRY.size
TIMEINDEX_ENTRY_BYTES: Final = TIMEINDEX_ENTRY.size
TAG_ENTRY_BYTES: Final = 4  # u32 LE: the tag hash (tags.py)
KEY_ENTRY_BYTES: Final = 4  # u32 LE: the key hash (keyindex.py)
# How many time, tag and key index entries an active segment's single pushes buffer before writing
# them (a global, not an attribute: it is read on the hot path).
BUFFERED_ENTRIES: Final = 128
# How many entries an active segment's side columns may lack: the most its single pushes leave buffered.
ACTIVE_SHORTFALL: Final = BUFFERED_ENTRIES - 1


class SideColumn(NamedTuple):
    """One side column of a segment: its file's extension, the bytes an entry, and when a segment has it."""

    extension: str
    width: int
    # A compact segment has it from its creation on (else: never, or from its first tag on).
    in_compact: bool
    # A compact segment makes it when the first entry naming a tag is written.
    from_first_tag: bool
    # Only a stream that keeps a key index has it.
    key_index_only: bool

    def made_with_segment(self, *, compact: bool, key_index: bool) -> bool:
        """Whether a new segment is created with this file (``.data`` first, ``.index`` last)."""
        return (not compact or self.in_compact) and (key_index or not self.key_index_only)


TIME_COLUMN: Final = SideColumn(
    TIMEINDEX, TIMEINDEX_ENTRY_BYTES, in_compact=False, from_first_tag=False, key_index_only=False
)
TAG_COLUMN: Final = SideColumn(TAGINDEX, TAG_ENTRY_BYTES, in_compact=False, from_first_tag=True, key_index_only=False)
KEY_COLUMN: Final = SideColumn(KEYINDEX, KEY_ENTRY_BYTES, in_compact=True, from_first_tag=False, key_index_only=True)
# In the order a write appends them.
SIDE_COLUMNS: Final = (TIME_COLUMN, TAG_COLUMN, KEY_COLUMN)


class EncodedRun(NamedTuple):
    """Records encoded as ``.data`` stores them, back to back, with their entries made ahead of the
    write, numbered from offset 0 at position 0 (``run_entries.place_entries`` places them where the
    run is written, checking them against the records first): what one write takes whole, without a
    Python object a record. push_many's packed batch (``core.pack_records``) and a Kafka Produce's
    batch (``kafka/wire/mapping.stored_records``) are both one. A tuple, so the compiled core builds it."""

    data: bytes  # the records back to back, each as codec.encode_record makes it
    index_entries: bytes  # .index: offset | position | size, u64 LE each, a record
    time_entries: bytes  # .timeindex: offset | timestamp_ns
    key_hashes: bytes  # .keyindex: the key hash of each record, u32 LE (keyindex.pack_hashes)
    tag_entries: bytes  # .tagindex: the tag column (tags.tag_column), or b"" when no record carries a tag
    largest: int  # bytes of the largest record (0 for none)

    @property
    def record_count(self) -> int:
        """How many records."""
        return len(self.index_entries) // INDEX_ENTRY_BYTES

    @property
    def total(self) -> int:
        """Bytes of all the records: what the write takes."""
        return len(self.data)


class RecordRun:
    """A run whose entries are made where it is written: the records as a list, encoded as
    ``.data`` stores them, with their timestamps, key hashes and tag entries as columns. What a
    share of a batch encoded record by record is (push_many over partitions, a push that waits for
    a batch, the Kafka gateway's ``Record``s): the segment makes the ``.index`` and ``.timeindex``
    entries straight at the offset and position it writes them at, where an ``EncodedRun`` would
    make them at 0 and then move them (a pass over the entries more, a record). Its lists are never
    changed once made, except a batch's own gathered run's (``Lane.enqueue``)."""

    __slots__ = ("key_hashes", "records", "tag_entries", "timestamps", "total")

    def __init__(
        self,
        records: list[bytes],
        timestamps: list[int],
        key_hashes: Sequence[int] | bytes,
        tag_entries: bytes | bytearray | None,
        total: int,
    ) -> None:
        self.records = records
        self.timestamps = timestamps
        # .keyindex: the key hash of each record, as ints (a list, or the compiled core's
        # array("I")) or packed as the key index stores them
        self.key_hashes = key_hashes
        # .tagindex: an entry a record, or None to take them from the records where they are written
        self.tag_entries = tag_entries
        self.total = total  # bytes of all the records: what the write takes

    @property
    def record_count(self) -> int:
        """How many records."""
        return len(self.records)


# What one write to a partition takes: a share of a batch, a Kafka Produce's batch, a single push.
Run: TypeAlias = EncodedRun | RecordRun
