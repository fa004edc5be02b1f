"""One segment read: index entries, then the data they cover, never a torn tail.

A reader needs only read permission. It reads only what ``.index`` entries cover (the commit point,
``adiskq/_sansio/entries.py``), so a record being written (or torn by a crash before recovery) is
invisible, while a damaged record inside covered data raises ``CorruptRecordError`` naming the file
and byte position. A sealed segment (a later one exists) never changes and is read through a mapping.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import operator
import os
from typing import Final, NamedTuple, Self

from .._errors import CorruptRecordError
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES, MIN_RECORD_BYTES
from .._sansio.compression import Dictionaries
from .._sansio.core import decode_at, decode_messages, matching_records
from .._sansio.entries import INDEX_ENTRY, INDEX_ENTRY_BYTES, TAG_ENTRY_BYTES
from .._sansio.naming import DATA, INDEX, TAGINDEX
from .._sansio.tags import TagFilter
from .._sansio.values import Message
from .dictionaries import partition_stream_path, stream_dictionaries
from .files import open_read, pread_exact
from .segment_files import open_for_reading, segment_path

__all__ = ["TRUST_READ_BYTES", "SegmentReader", "UndecodedRecords", "count_within"]

_TAG_OF: Final = operator.itemgetter(6)  # Message.tag
# Candidates fewer than one in this many entries are read one by one (``_read_sparse``).
_SPARSE_SHARE: Final = 8
_TAG_FD_UNOPENED: Final = -1
_TAG_FD_NONE: Final = -2  # the segment has no .tagindex
# No record is larger (a u32 size field): an .index size above it is damage.
MAX_RECORD_BYTES_EVER: Final = 2**32 - 1
# Reads larger than this are first checked against the size of .data (one fstat).
TRUST_READ_BYTES: Final = 16 * 2**20


class UndecodedRecords(NamedTuple):
    """``record_count`` records from ``first_offset`` on as ``.data`` stores them, undecoded (their index
    entries checked, the records not yet): what a reader that re-encodes records whole (the Kafka
    gateway's Fetch) takes instead of Messages; ``max_record_bytes`` and ``dictionaries`` are what the
    segment's own decoding checks and decompresses them with."""

    first_offset: int
    record_count: int
    # A view of the segment's mapping for a sealed segment (valid while the run is referenced), or bytes.
    data: bytes | memoryview
    max_record_bytes: int
    dictionaries: Dictionaries


def count_within(entries: bytes | memoryview, count: int, start: int, max_bytes: int) -> int:
    """How many leading index entries cover at most ``max_bytes`` of data from ``start`` (at least one)."""
    low, high = 1, count  # the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        _, position, size = INDEX_ENTRY.unpack_from(entries, (middle - 1) * INDEX_ENTRY_BYTES)
        if position + size - start <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return low


def _stop_offset(decoded: list[Message], offsets: list[int]) -> int | None:
    """The first candidate offset a read of ``offsets`` left out (a damaged record ended it), or
    None when it decoded them all (a dense run decodes every offset between them too)."""
    last = decoded[-1].offset if decoded else offsets[0] - 1
    if last >= offsets[-1]:
        return None
    return next(found for found in offsets if found > last)


def _confirmed(messages: list[Message], tag_filter: TagFilter) -> list[Message]:
    """The messages whose record's tag is wanted: a hash only selects, the record's own tag decides."""
    wanted = tag_filter.tags
    if wanted.issuperset(map(_TAG_OF, messages)):
        return messages
    return [message for message in messages if message.tag in wanted]


def _damaged_size(size: int) -> bool:
    """Whether an ``.index`` entry's size is one no record can have."""
    return not MIN_RECORD_BYTES <= size <= MAX_RECORD_BYTES_EVER


def _sound_entries(entries: bytes | memoryview, count: int, start: int, data_size: int) -> int:
    """How many leading index entries go forward from ``start`` without leaving ``.data`` (of
    ``data_size`` bytes): where a damaged entry ends a read."""
    end = start
    for i in range(count):
        _, position, size = INDEX_ENTRY.unpack_from(entries, i * INDEX_ENTRY_BYTES)
        if position < end or position + size > data_size:
            return i
        end = position + size
    return count


def _offset_at(entries: bytes | memoryview, count: int, first_offset: int, position: int) -> int | None:
    """The offset of the entry (of ``count`` from ``first_offset``) whose record holds ``position``."""
    for i in range(count):
        _, start, size = INDEX_ENTRY.unpack_from(entries, i * INDEX_ENTRY_BYTES)
        if start <= position < start + max(size, 1):
            return first_offset + i
    return None


class SegmentReader:
    """Read access to one segment; needs only read permission, and never sees a torn tail.

    It reads only what index entries cover, so a record being written right now (or torn by a
    crash before recovery) is invisible, while a damaged record inside covered data raises
    ``CorruptRecordError`` with the file and byte position.
    """

    def __init__(
        self,
        directory: str,
        base_offset: int,
        partition: int,
        fds: tuple[int, int],
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        *,
        sealed: bool = False,
        dictionaries: Dictionaries | None = None,
    ) -> None:
        self.directory = directory
        # The stream's zstd dictionaries (its partition reader's): what compressed values decompress with.
        self.dictionaries = dictionaries or stream_dictionaries(partition_stream_path(directory))
        self.base_offset = base_offset
        self.partition = partition
        self._index_fd, self._data_fd = fds
        self._tag_fd = _TAG_FD_UNOPENED  # opened by the first filtered read
        self.max_record_bytes = max_record_bytes
        # A later segment exists, so this one no longer changes: its data may be mapped (read_span).
        self.sealed = sealed
        self._map: memoryview | None = None
        self.closed = False

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        partition: int,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        sealed: bool = False,
        dictionaries: Dictionaries | None = None,
    ) -> Self:
        """Open the segment's ``.index`` then ``.data``; FileNotFoundError if it was vacuumed.

        ``sealed`` says a later segment exists, so this one no longer changes and may be mapped.
        """
        fds = open_for_reading(directory, base_offset)
        return cls(directory, base_offset, partition, fds, max_record_bytes, sealed=sealed, dictionaries=dictionaries)

    @property
    def data_path(self) -> str:
        """The ``.data`` file's path."""
        return segment_path(self.directory, self.base_offset, DATA)

    @property
    def index_path(self) -> str:
        """The ``.index`` file's path."""
        return segment_path(self.directory, self.base_offset, INDEX)

    def is_deleted(self) -> bool:
        """True once vacuum has unlinked this segment (its open files still read fine)."""
        return os.fstat(self._index_fd).st_nlink == 0

    def read_index(self, offset: int, max_count: int) -> bytes:
        """Up to ``max_count`` whole index entries from ``offset`` on."""
        relative = offset - self.base_offset
        raw = os.pread(self._index_fd, max_count * INDEX_ENTRY_BYTES, relative * INDEX_ENTRY_BYTES)
        whole = len(raw) - len(raw) % INDEX_ENTRY_BYTES
        return raw[:whole] if whole != len(raw) else raw

    def _entry(self, entries: bytes | memoryview, i: int, offset: int) -> tuple[int, int]:
        """Position and size of entry ``i``, which must be for ``offset``."""
        found, position, size = INDEX_ENTRY.unpack_from(entries, i * INDEX_ENTRY_BYTES)
        if found != offset:
            index_position = (offset - self.base_offset) * INDEX_ENTRY_BYTES
            raise CorruptRecordError(
                f"index entry is for offset {found}, expected {offset}", path=self.index_path, position=index_position
            )
        return position, size

    def locate(
        self, offset: int, max_count: int, max_bytes: int | None = None
    ) -> tuple[bytes | memoryview, int, int, int] | None:
        """The index entries of up to ``max_count`` messages from ``offset`` on (at least one if
        any, then ``max_bytes``): ``(entries, count, start, end)``, where ``[start, end)`` is the
        span of ``.data`` they cover; None when there is no message at ``offset`` yet.

        Records do not carry their offset, so the first entry used is checked against the one before
        it (or against position 0 at the segment's start): a damaged entry cannot make a read that
        starts there return another offset's record. And a read never allocates more than ``.data``
        holds, whatever an entry claims.
        """
        before = 1 if offset > self.base_offset else 0
        entries: bytes | memoryview = self.read_index(offset - before, max_count + before)
        count = len(entries) // INDEX_ENTRY_BYTES - before
        if count <= 0:
            return None
        if before:
            _, previous_position, previous_size = INDEX_ENTRY.unpack_from(entries)
            entries = memoryview(entries)[INDEX_ENTRY_BYTES:]
            expected_start = previous_position + previous_size
        else:
            expected_start = previous_position = previous_size = 0
        start, _ = self._entry(entries, 0, offset)
        if start != expected_start and not (before and _damaged_size(previous_size) and start > previous_position):
            # (When the entry before has a size no record can have, that size is the damage, found
            # by the read of its own offset: this one's position is checked by its record's CRC.)
            raise CorruptRecordError(
                f"the index entry of offset {offset} says position {start}, but its record starts at {expected_start}",
                path=self.index_path,
                position=(offset - self.base_offset) * INDEX_ENTRY_BYTES,
            )
        last_position, last_size = self._entry(entries, count - 1, offset + count - 1)
        end = last_position + last_size
        if max_bytes is not None and end - start > max_bytes and count > 1:
            count = count_within(entries, count, start, max_bytes)
            last_position, last_size = self._entry(entries, count - 1, offset + count - 1)
            end = last_position + last_size
        if end < start or (end - start > TRUST_READ_BYTES and end > os.fstat(self._data_fd).st_size):
            # A damaged entry (its size, most likely) ends the stretch: the entries before it are
            # read, and the read that starts at it raises, naming it.
            sound = _sound_entries(entries, count, start, os.fstat(self._data_fd).st_size)
            if not sound:
                raise CorruptRecordError(
                    f"the index entry of offset {offset} points outside the data",
                    path=self.index_path,
                    position=(offset - self.base_offset) * INDEX_ENTRY_BYTES,
                    offset=offset,
                )
            count = sound
            last_position, last_size = self._entry(entries, count - 1, offset + count - 1)
            end = last_position + last_size
        return entries[: count * INDEX_ENTRY_BYTES], count, start, end

    def _decode(self, data: bytes | memoryview, offset: int, count: int) -> list[Message]:
        """``count`` records in ``data`` from ``offset`` on, checked and decoded (values decompressed
        with this segment's dictionaries)."""
        return decode_messages(
            data, self.partition, offset, count, max_record_bytes=self.max_record_bytes, dictionaries=self.dictionaries
        )

    def read_messages(self, offset: int, max_count: int, max_bytes: int | None = None) -> list[Message]:
        """Up to ``max_count`` messages from ``offset`` on (at least one if any, then ``max_bytes``),
        every record checked (see ``locate`` for the index entries)."""
        located = self.locate(offset, max_count, max_bytes)
        if located is None:
            return []
        entries, count, start, end = located
        data = self.read_span(start, end)
        try:
            return self._decode(data, offset, count)
        except CorruptRecordError as error:
            damaged = None if error.position is None else _offset_at(entries, count, offset, start + error.position)
            if damaged is not None and damaged > offset:
                # The messages before the damaged one are delivered; the read that reaches it raises.
                return self.read_messages(offset, damaged - offset)
            raise error.with_path(self.data_path, start, damaged) from None

    def read_stored(self, offset: int, max_count: int, max_bytes: int | None = None) -> UndecodedRecords | None:
        """The stored bytes of up to ``max_count`` records from ``offset`` on (at least one if any,
        then ``max_bytes``), as ``read_messages`` would decode them; None when there is no record at
        ``offset`` yet. The caller checks the records (``read_messages`` names any damage)."""
        located = self.locate(offset, max_count, max_bytes)
        if located is None:
            return None
        _, count, start, end = located
        return UndecodedRecords(offset, count, self.read_span(start, end), self.max_record_bytes, self.dictionaries)

    def read_tagged(
        self, offset: int, max_count: int, max_scan: int, tag_filter: TagFilter, max_bytes: int | None = None
    ) -> tuple[list[Message], int]:
        """The messages among the ``max_scan`` from ``offset`` on whose tag is one of ``tag_filter``'s
        (up to ``max_count`` of them, then ``max_bytes``), and how many offsets that passed: 0 when
        there is no message at ``offset`` yet.

        Candidates come from the ``.tagindex`` column (a hash match), and the tail past its end (the
        single pushes' buffered entries, or a segment written before tags) from every record; only
        the candidates' records are read, and each one's tag is confirmed from its record, so a hash
        collision never delivers another tag.
        """
        relative = offset - self.base_offset
        column: bytes | None = None
        single = tag_filter.single_entry
        if single is not None:
            # Every entry wanted (100% selectivity) is told by one comparison, and read as an
            # unfiltered read is: no selection at all, only the tags confirmed.
            column = self._tag_column(relative, max_scan)
            covered = len(column) // TAG_ENTRY_BYTES
            if covered and column == single * covered:
                messages = self.read_messages(offset, min(max_count, covered), max_bytes)
                return _confirmed(messages, tag_filter), len(messages)
        located = self.locate(offset, max_scan)
        if located is None:
            return [], 0
        entries, count, start, end = located
        column = self._tag_column(relative, count) if column is None else column[: count * TAG_ENTRY_BYTES]
        chosen = matching_records(
            column, entries, tag_filter.hashes, offset, max_count, -1 if max_bytes is None else max_bytes
        )
        if isinstance(chosen, int):
            if chosen:  # the messages before the entry that names another offset, then it raises
                return self.read_tagged(offset, max_count, chosen, tag_filter, max_bytes)
            self._entry(entries, chosen, offset + chosen)  # raises, naming the entry
            raise AssertionError("unreachable")  # pragma: no cover
        positions, sizes, offsets, passed, total = chosen
        if not offsets:
            return [], passed
        room = end - start
        if positions[0] < start or positions[-1] + sizes[-1] > end or total > room or max(sizes) > room:
            # A candidate's entry claims more than the stretch holds (its size damaged).
            return self._before_damaged_entry(offset, entries, count, start, end, max_count, tag_filter, max_bytes)
        stretch = positions[-1] + sizes[-1] - positions[0]
        if len(positions) * _SPARSE_SHARE < count or (max_bytes is not None and stretch > max_bytes):
            decoded = self._read_spans(offset, entries, positions, sizes, offsets, total)
        else:
            # Dense candidates: one read of the stretch from the first to the last (within max_bytes),
            # all of it decoded; the records between them are not wanted (their hash is not), so the
            # tag check drops them.
            first, last = offsets[0], offsets[-1]
            decoded = self._decode_run(first, last - first + 1, positions[0], positions[-1] + sizes[-1])
        if (stop := _stop_offset(decoded, offsets)) is not None:
            # A damaged record ended the read: the messages before it now, the next read raises there.
            passed = stop - offset
        return _confirmed(decoded, tag_filter), passed

    def _before_damaged_entry(
        self,
        offset: int,
        entries: bytes | memoryview,
        count: int,
        start: int,
        end: int,
        max_count: int,
        tag_filter: TagFilter,
        max_bytes: int | None,
    ) -> tuple[list[Message], int]:
        """A filtered read whose stretch holds an index entry pointing outside the data it covers
        (its size damaged): the wanted messages before that entry, or, when the read starts at it,
        ``CorruptRecordError`` naming it, as for any damaged entry a read meets."""
        sound = _sound_entries(entries, count, start, end)
        if sound:
            return self.read_tagged(offset, max_count, sound, tag_filter, max_bytes)
        raise CorruptRecordError(
            f"the index entry of offset {offset} points outside the data",
            path=self.index_path,
            position=(offset - self.base_offset) * INDEX_ENTRY_BYTES,
            offset=offset,
        )

    def _read_spans(
        self,
        offset: int,
        entries: bytes | memoryview,
        positions: list[int],
        sizes: list[int],
        offsets: list[int],
        total: int,
    ) -> list[Message]:
        """The messages at ``offsets`` (``entries`` are the index entries from ``offset`` on), whose
        records fill the spans of ``.data`` at ``positions`` (``sizes`` bytes each): a ``pread`` a span,
        all of them decoded in one call. For candidates far apart (a rare tag). (Measured: mapping a
        sealed segment's data instead was slower, a page fault per record costing more than the
        system call.)"""
        if max(sizes) <= TRUST_READ_BYTES:
            data = b"".join(map(os.pread, itertools.repeat(self._data_fd, len(sizes)), sizes, positions))
        else:
            data = b""
        if len(data) != total:  # a short read: the rest, or the error naming the file and position
            data = b"".join(map(self.read_data, positions, sizes))
        try:
            return decode_at(
                data, self.partition, offsets, max_record_bytes=self.max_record_bytes, dictionaries=self.dictionaries
            )
        except CorruptRecordError:
            pass
        # A damaged record among them: the messages before it (the caller's next read raises at it).
        decoded: list[Message] = []
        for found in offsets:
            try:
                decoded.append(self._decode_alone(entries, found - offset))
            except CorruptRecordError:
                if not decoded:
                    raise
                break
        return decoded

    def _decode_alone(self, entries: bytes | memoryview, entry: int) -> Message:
        """The message of one index entry, or its record's CorruptRecordError with file and position."""
        found, position, size = INDEX_ENTRY.unpack_from(entries, entry * INDEX_ENTRY_BYTES)
        try:
            (message,) = decode_messages(
                self.read_data(position, size),
                self.partition,
                found,
                1,
                max_record_bytes=self.max_record_bytes,
                dictionaries=self.dictionaries,
            )
        except CorruptRecordError as error:
            raise error.with_path(self.data_path, position, found) from None
        return message

    def _decode_run(self, offset: int, count: int, start: int, end: int) -> list[Message]:
        data = self.read_data(start, end - start)
        try:
            return self._decode(data, offset, count)
        except CorruptRecordError:
            # read_messages names the damaged record and delivers the ones before it
            return self.read_messages(offset, count)

    def _tag_column(self, first_entry: int, count: int) -> bytes:
        """Up to ``count`` whole ``.tagindex`` entries from entry ``first_entry`` (``b""`` without one)."""
        fd = self._tag_fd
        if fd == _TAG_FD_UNOPENED:
            try:
                fd = self._tag_fd = open_read(segment_path(self.directory, self.base_offset, TAGINDEX))
            except FileNotFoundError:
                # Written before tags, or vacuumed meanwhile: every tag comes from the records.
                fd = self._tag_fd = _TAG_FD_NONE
        if fd == _TAG_FD_NONE:
            return b""
        raw = os.pread(fd, count * TAG_ENTRY_BYTES, first_entry * TAG_ENTRY_BYTES)
        return raw[: len(raw) - len(raw) % TAG_ENTRY_BYTES]

    def read_span(self, start: int, end: int) -> bytes | memoryview:
        """The ``.data`` bytes in ``[start, end)``: a view of the segment's mapping once it is sealed
        (no copy), valid while the view is referenced; else read with ``pread`` (``read_data``).

        Sealed only: a producer's recovery may cut the active segment's tail, and touching a mapping
        of bytes cut from a file faults (SIGBUS) instead of failing cleanly; a sealed segment is never
        cut (recovery repairs the last segment alone), only unlinked, which a mapping outlives.
        On W4's batches() read the kernel's copy into a fresh buffer was a sizeable share of a message's
        cost, and the mapping cut the read's system time (measured: see benchmarks/RESULTS.md, section
        "Figures the code relies on", F11). A segment that cannot be mapped (address space) is read with
        pread.
        """
        if self.sealed:
            if self._map is None:
                size = os.fstat(self._data_fd).st_size
                try:
                    mapping = mmap.mmap(self._data_fd, size, prot=mmap.PROT_READ) if size else None
                except OSError:
                    self.sealed, mapping = False, None
                if mapping is not None:
                    mapping.madvise(mmap.MADV_SEQUENTIAL)
                    self._map = memoryview(mapping)
            # (a mapping ends where the file ended when it was made: past it, read_data says what is wrong)
            if self._map is not None and end <= len(self._map):
                return self._map[start:end]
        return self.read_data(start, end - start)

    def data_size(self) -> int:
        """The size of ``.data`` now."""
        return os.fstat(self._data_fd).st_size

    def read_data(self, position: int, size: int) -> bytes:
        """``size`` bytes of ``.data`` at ``position``; CorruptRecordError if the file is shorter."""
        data = pread_exact(self._data_fd, size, position)
        if len(data) != size:
            raise CorruptRecordError(
                "the index points past the end of the data", path=self.data_path, position=position + len(data)
            )
        return data

    def close(self) -> None:
        """Close the files; closing twice is harmless.

        The mapping is not closed here: views handed out (a ``RawRun``'s data) may still use it, and
        it goes away with the last of them.
        """
        if self.closed:
            return
        self.closed = True
        self._map = None
        for fd in (self._index_fd, self._data_fd, self._tag_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
