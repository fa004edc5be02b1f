"""Raw runs of records for columnar readers (Spark's Arrow batches): index entries and data, undecoded.

A ``RawRun`` holds the index entries of up to ``max_count`` messages and the ``.data`` bytes they
cover. Nothing is decoded here, so a columnar reader can check and slice a whole run at once
(adiskq.spark builds Arrow arrays straight from ``data``) instead of making one ``Message`` per record.
The reader must check what it uses: each record's size, magic and CRC (``decode_messages`` does all
of it, and is the reference). Here, only the first and last entries are checked to be for the
offsets asked for, as ``SegmentReader`` does.

Sealed segments are read through ``mmap`` (DESIGN §5): no copy, and no fresh buffer to fault in for
every run. The active segment is read with ``pread``, because a producer's recovery may cut its
tail, and touching a mapping of bytes cut from a file faults (SIGBUS) instead of failing cleanly.

``RawCursor`` walks a partition like ``PartitionCursor``: across segment rolls, and raising
``OffsetOutOfRangeError`` (with ``oldest_offset``) when retention deleted the offset it needs.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from typing import NamedTuple

from .._errors import CorruptRecordError
from .._sansio.naming import DATA, INDEX
from .files import pread_exact
from .partition import PartitionReader, open_segment_at
from .segment import INDEX_ENTRY, INDEX_ENTRY_BYTES, TRUST_READ_BYTES, count_within, open_for_reading, segment_path

__all__ = ["RawCursor", "RawRun", "RawSegment"]


class RawRun(NamedTuple):
    """The index entries of ``count`` messages from ``first_offset`` on, and the data they cover."""

    partition: int
    first_offset: int
    message_count: int
    entries: bytes  # message_count index entries: offset | position | size, u64 LE each
    # The .data bytes from the first entry's position to the end of the last record: a view of the
    # segment's mapping for a sealed segment, valid while the RawRun is referenced.
    data: bytes | memoryview
    data_position: int  # where ``data`` starts in the .data file
    data_path: str


class RawSegment:
    """One segment opened for raw reads (``.index`` then ``.data``, like ``SegmentReader``)."""

    def __init__(
        self, directory: str, base_offset: int, partition: int, index_fd: int, data_fd: int, *, sealed: bool
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.partition = partition
        self.sealed = sealed
        self._index_fd = index_fd
        self._data_fd = data_fd
        self._map: memoryview | None = None
        self.closed = False

    @classmethod
    def open(cls, directory: str, base_offset: int, partition: int, *, sealed: bool = False) -> RawSegment:
        """Open the segment's files; FileNotFoundError if vacuum deleted it.

        ``sealed`` says a later segment exists, so this one no longer changes and may be mapped.
        """
        index_fd, data_fd = open_for_reading(directory, base_offset)
        return cls(directory, base_offset, partition, index_fd, data_fd, sealed=sealed)

    def _data(self, start: int, end: int) -> bytes | memoryview:
        if self.sealed:
            if self._map is None:
                size = os.fstat(self._data_fd).st_size
                if size:
                    mapping = mmap.mmap(self._data_fd, size, prot=mmap.PROT_READ)
                    mapping.madvise(mmap.MADV_SEQUENTIAL)
                    self._map = memoryview(mapping)
            if self._map is not None and end <= len(self._map):
                return self._map[start:end]
        return pread_exact(self._data_fd, end - start, start)

    @property
    def data_path(self) -> str:
        """The ``.data`` file's path."""
        return segment_path(self.directory, self.base_offset, DATA)

    def is_deleted(self) -> bool:
        """True once vacuum has unlinked the segment (its open files still read fine)."""
        return os.fstat(self._index_fd).st_nlink == 0

    def read(self, offset: int, max_count: int, max_bytes: int | None = None) -> RawRun | None:
        """Up to ``max_count`` messages from ``offset`` (at least one if any, then ``max_bytes``).

        As in ``SegmentReader.read_messages``, the first entry is checked against the one before it
        (or position 0 at the segment's start), so a damaged entry cannot make a run that starts
        there begin at another offset's record; and a read never allocates more than ``.data`` holds.
        """
        relative = offset - self.base_offset
        before = 1 if relative > 0 else 0
        raw = os.pread(
            self._index_fd, (max_count + before) * INDEX_ENTRY_BYTES, (relative - before) * INDEX_ENTRY_BYTES
        )
        count = len(raw) // INDEX_ENTRY_BYTES - before
        if count <= 0:
            return None
        expected_start = 0
        if before:
            _, previous_position, previous_size = INDEX_ENTRY.unpack_from(raw, 0)
            expected_start = previous_position + previous_size
            raw = raw[INDEX_ENTRY_BYTES:]
        index_path = segment_path(self.directory, self.base_offset, INDEX)
        first, start, _ = INDEX_ENTRY.unpack_from(raw, 0)
        if max_bytes is not None and count > 1:
            count = count_within(raw, count, start, max_bytes)
        entries = raw[: count * INDEX_ENTRY_BYTES]
        last, last_position, last_size = INDEX_ENTRY.unpack_from(entries, (count - 1) * INDEX_ENTRY_BYTES)
        if first != offset or last != offset + count - 1:
            bad = offset if first != offset else offset + count - 1
            raise CorruptRecordError(
                f"index entries for offsets {offset}..{offset + count - 1} say {first}..{last}",
                path=index_path,
                position=(bad - self.base_offset) * INDEX_ENTRY_BYTES,
            )
        if start != expected_start:
            raise CorruptRecordError(
                f"the index entry of offset {offset} says position {start}, but its record starts at {expected_start}",
                path=index_path,
                position=relative * INDEX_ENTRY_BYTES,
            )
        end = last_position + last_size
        if end < start:
            raise CorruptRecordError(
                "index entries go backwards", path=index_path, position=relative * INDEX_ENTRY_BYTES
            )
        if end > start + TRUST_READ_BYTES and end > os.fstat(self._data_fd).st_size:
            # A damaged entry can claim any size: never allocate more than the file holds.
            raise CorruptRecordError("the index points past the end of the data", path=self.data_path, position=start)
        data = self._data(start, end)
        if len(data) != end - start:
            raise CorruptRecordError(
                "the index points past the end of the data", path=self.data_path, position=start + len(data)
            )
        return RawRun(self.partition, offset, count, entries, data, start, self.data_path)

    def close(self) -> None:
        """Close the files; closing twice is harmless.

        The mapping is not closed here: runs handed out may still use it, and it goes away with the
        last of them.
        """
        if self.closed:
            return
        self.closed = True
        self._map = None
        for fd in (self._index_fd, self._data_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class RawCursor:
    """Raw runs of one partition in order from an offset, across segment rolls and vacuum.

    ``read`` returns None when caught up. It moves to the next segment only once a segment named by
    exactly the next offset exists (the producer creates it after the previous one's last entry).
    """

    def __init__(self, partition: PartitionReader, offset: int) -> None:
        self.partition = partition
        self.position = offset
        self._segment: RawSegment | None = None

    def __enter__(self) -> RawCursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def seek(self, offset: int) -> None:
        """Continue reading at ``offset``."""
        self.close()
        self.position = offset

    def _open_for_position(self) -> RawSegment | None:
        partition = self.partition
        return open_segment_at(
            partition,
            self.position,
            lambda base, sealed: RawSegment.open(partition.directory, base, partition.partition, sealed=sealed),
        )

    def read(self, max_count: int, max_bytes: int | None = None) -> RawRun | None:
        """The next run of up to ``max_count`` messages; None when caught up."""
        while True:
            segment = self._segment
            if segment is None:
                segment = self._segment = self._open_for_position()
                if segment is None:
                    return None
            run = segment.read(self.position, max_count, max_bytes)
            if run is not None:
                self.position += run.message_count
                return run
            # Caught up with this segment: go on only if the next one has started, or if vacuum
            # deleted this one under us (then reopening finds out where the data went).
            next_started = self.position != segment.base_offset and os.path.exists(
                segment_path(self.partition.directory, self.position, INDEX)
            )
            if not (next_started or segment.is_deleted()):
                return None
            segment.close()
            self._segment = None

    def close(self) -> None:
        """Release the open segment; closing twice is harmless."""
        if self._segment is not None:
            self._segment.close()
            self._segment = None
