"""Cursors: reading one partition's segments in order from an offset, across rolls and vacuum.

``SegmentCursor`` walks the segments; ``PartitionCursor`` reads messages (consumers, ``read``) and
``columns.RawCursor`` raw runs of records (Spark) on top of it.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Self, TypeVar

from .._errors import OffsetOutOfRangeError
from .._sansio.codec import TransactionalBatch
from .._sansio.naming import INDEX
from .._sansio.tags import TagFilter
from .._sansio.values import Message
from .log_start import load_log_start
from .segment_files import segment_path
from .segment_reader import SegmentReader, UndecodedRecords
from .transaction_outcomes import committed

if TYPE_CHECKING:
    from .partition_reader import PartitionReader
    from .transaction_outcomes import TransactionOutcomes

__all__ = ["PartitionCursor", "SegmentCursor", "open_segment_at"]

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
        log_start = load_log_start(partition.directory)
        if position < log_start:
            oldest = partition.bounds()[0]  # the log start, or the end if it lies past it
            if position < oldest:
                raise OffsetOutOfRangeError(
                    f"offset {position} of partition {partition.partition} was deleted (below the log start "
                    f"offset); the oldest offset is now {oldest}",
                    partition=partition.partition,
                    offset=position,
                    oldest_offset=oldest,
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
        self._next_index: tuple[int, str] = (-1, "")  # a position, and the index path of a segment there

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

    def _done_with(self, segment: _Segment) -> bool:
        """Caught up with ``segment``: True (it is closed) when reading goes on in the next one,
        which has started, or after vacuum deleted this one under us (reopening finds out where).

        A caught-up reader asks this on every read that finds nothing, at the same position until
        more is written: the path is made once a position, and looked up with ``access``, which
        answers a bool where a failed ``stat`` raises (and ``exists`` catches) an exception."""
        position = self.position
        if position == segment.base_offset:
            next_started = False
        else:
            at, path = self._next_index
            if at != position:
                path = segment_path(self.partition.directory, position, INDEX)
                self._next_index = (position, path)
            next_started = os.access(path, os.F_OK)
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
    returns ``[]`` when caught up.

    Of a Kafka transaction's records it delivers the committed ones only, never a marker, and stops
    at the first record of a transaction still open (``transaction_outcomes.py``): the position is
    then that record's, and ``read`` answers ``[]`` as when caught up, until its marker is written.
    The position counts the records passed, so it may move by more than the messages returned.
    (``read_tagged`` needs none of this: a transaction's records and markers carry no tag.)"""

    def _open_segment(self, base: int, sealed: bool) -> SegmentReader:
        return self.partition.open_segment(base, sealed=sealed)

    def read(self, max_count: int = 1000, max_bytes: int | None = None) -> list[Message]:
        """Up to ``max_count`` messages from the current position on; ``[]`` when caught up."""
        while (segment := self._current()) is not None:
            messages = segment.read_messages(self.position, max_count, max_bytes)
            if type(messages) is TransactionalBatch:
                delivered, passed = committed(messages, self.outcomes())
                self.position += passed
                if delivered or not passed:  # not passed: at an open transaction, as if caught up
                    return delivered
                continue  # only markers and aborted records: read on
            if messages:
                self.position += len(messages)
                return messages
            if not self._done_with(segment):
                break
        return []

    def outcomes(self) -> TransactionOutcomes:
        """What became of this partition's transactions (the partition reader keeps them)."""
        return self.partition.transaction_outcomes()

    def peek_stored(self, max_count: int = 1000, max_bytes: int | None = None) -> UndecodedRecords | None:
        """The stored bytes of the records ``read`` would return next (``SegmentReader.read_stored``),
        without moving the position: ``skip`` moves it once they are used, or ``read`` decodes the
        same records instead. None when caught up."""
        while (segment := self._current()) is not None:
            run = segment.read_stored(self.position, max_count, max_bytes)
            if run is not None:
                return run
            if not self._done_with(segment):
                break
        return None

    def skip(self, count: int) -> None:
        """Move past ``count`` records that ``peek_stored`` returned."""
        self.position += count

    def read_tagged(
        self, max_count: int, max_scan: int, tag_filter: TagFilter, max_bytes: int | None = None
    ) -> tuple[list[Message], int]:
        """The messages with a wanted tag among the next ``max_scan`` (see
        ``SegmentReader.read_tagged``), and how many offsets that passed: 0 when caught up."""
        while (segment := self._current()) is not None:
            messages, passed = segment.read_tagged(self.position, max_count, max_scan, tag_filter, max_bytes)
            if passed:
                self.position += passed
                return messages, passed
            if not self._done_with(segment):
                break
        return [], 0
