"""Raw runs of records for columnar readers (Spark's Arrow batches): index entries and data, undecoded.

A ``RawRun`` holds the index entries of up to ``max_count`` messages and the ``.data`` bytes they
cover. Nothing is decoded here, so a columnar reader can check and slice a whole run at once
(adiskq.spark builds Arrow arrays straight from ``data``) instead of making one ``Message`` per record.
The reader must check what it uses: each record's size, magic and CRC (``decode_messages`` does all
of it, and is the reference). The index entries are checked as ``SegmentReader.locate`` checks
them for every reader.

Sealed segments are read through ``mmap``: no copy, and no fresh buffer to fault in for
every run. The active segment is read with ``pread``, because a producer's recovery may cut its
tail, and touching a mapping of bytes cut from a file faults (SIGBUS) instead of failing cleanly.

``RawCursor`` walks a partition like ``PartitionCursor``: across segment rolls, and raising
``OffsetOutOfRangeError`` (with ``oldest_offset``) when retention deleted the offset it needs.
"""

from __future__ import annotations

from typing import NamedTuple

from .._errors import CorruptRecordError
from .cursors import SegmentCursor
from .segment_reader import SegmentReader

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


class RawSegment(SegmentReader):
    """One segment opened for raw reads: ``SegmentReader``'s checked index entries, and the data
    they cover undecoded (through ``mmap`` once the segment is sealed: ``SegmentReader.read_span``)."""

    def read(self, offset: int, max_count: int, max_bytes: int | None = None) -> RawRun | None:
        """Up to ``max_count`` messages from ``offset`` (at least one if any, then ``max_bytes``),
        their entries checked as ``SegmentReader.locate`` checks them; None if there is none yet."""
        located = self.locate(offset, max_count, max_bytes)
        if located is None:
            return None
        entries, count, start, end = located
        data = self.read_span(start, end)
        if len(data) != end - start:  # (a mapping ends where the file ended when it was made)
            raise CorruptRecordError(
                "the index points past the end of the data", path=self.data_path, position=start + len(data)
            )
        return RawRun(self.partition, offset, count, bytes(entries), data, start, self.data_path)


class RawCursor(SegmentCursor[RawSegment]):
    """Raw runs of one partition in order from an offset, across segment rolls and vacuum (see
    ``SegmentCursor``); ``read`` returns None when caught up."""

    def _open_segment(self, base: int, sealed: bool) -> RawSegment:
        partition = self.partition
        return RawSegment.open(partition.directory, base, partition.partition, sealed=sealed)

    def read(self, max_count: int, max_bytes: int | None = None) -> RawRun | None:
        """The next run of up to ``max_count`` messages; None when caught up."""
        while (segment := self._current()) is not None:
            run = segment.read(self.position, max_count, max_bytes)
            if run is not None:
                self.position += run.message_count
                return run
            if not self._done_with(segment):
                break
        return None
