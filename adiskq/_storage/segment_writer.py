"""One segment written: its ``.data``/``.index``/``.timeindex``/``.tagindex``/``.keyindex`` files, appended.

The entries of the side files are described in ``adiskq/_sansio/entries.py``; all are derived
from ``.data`` and can be rebuilt from it. Write order is the whole consistency story:

1. the records are appended to ``.data``;
2. (``flush="sync"``: ``.data`` is fdatasync'ed here, so no index entry can outlive a power cut
   that takes its record back;)
3. the ``.timeindex`` entries are appended, then the ``.tagindex`` and ``.keyindex`` entries;
4. the ``.index`` entries are appended — the commit point: a message exists for readers once its
   index entry does, and by then its record is already in place.

A single push (``append_one``) buffers its ``.timeindex``, ``.tagindex`` and ``.keyindex`` entries
and writes them ``BUFFERED_ENTRIES`` at a time, or with the next batch, a roll or a close: a write
call less each per push (the side columns' rules, this one and the compact segments', are the table
of ``entries.py``). A compact segment's single pushes still count their entries in the time buffer,
which is then never written. (A segment written before tags, format 1, has no ``.tagindex``:
readers take every tag from the records there.)

A failed write is cut back (``ftruncate``) so the files stay as they were before the batch, with one
exception: an ``.index`` write that fails after whole entries reached the file keeps those messages
(readers may have seen them; ``PartlyCommittedError`` says how many) and cuts only the rest.
Segment files are created ``.data`` first and ``.index`` last, because readers find segments by
their ``.index`` file and must find the others beside it (go-diskq's consumers died with ENOENT
when ``.data`` appeared before ``.index``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Sequence
from typing import Final, NamedTuple

from .._sansio import keyindex as keyindex_format
from .._sansio.core import index_entries, tag_column
from .._sansio.entries import (
    BUFFERED_ENTRIES,
    INDEX_ENTRY,
    INDEX_ENTRY_BYTES,
    KEY_ENTRY_BYTES,
    TAG_ENTRY_BYTES,
    TIMEINDEX_ENTRY,
    TIMEINDEX_ENTRY_BYTES,
    EncodedRun,
)
from .._sansio.naming import INDEX, KEYINDEX, TAGINDEX
from .._sansio.run_entries import place_entries
from .._sansio.tags import names_a_tag
from . import keyindex
from .append import append_one
from .files import DEFAULT_FILE_MODE, fsync_dir, open_append, open_read, pread_exact, write_all, writev_all
from .segment_files import SegmentFileState, fd_state, open_writable, segment_path

__all__ = ["PartlyCommittedError", "PendingBatch", "SegmentWriter"]

_NO_TAG_ENTRY: Final = bytes(TAG_ENTRY_BYTES)
_TAGGED: Final = 0x01  # the record's attributes bit that says it carries a tag
_ATTRIBUTES_AT: Final = 9
# A single push below this many buffered entries writes none of them (its record and .index entry only).
_INLINE_ENTRIES: Final = BUFFERED_ENTRIES - 1
_JOIN_MAX_BYTES: Final = 1 << 20


class PartlyCommittedError(OSError):
    """A batch's ``.index`` write failed after some of its entries reached the file whole.

    A message exists for readers once its index entry does, and readers may already have read
    those entries (and delivered their messages), so the first ``committed`` messages of the batch,
    from ``first_offset``, stay committed: an entry a reader could have seen is never taken back. The
    rest of the batch is cut back. ``errno`` is that of the failed write.
    """

    def __init__(self, cause: OSError, first_offset: int, committed: int) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.first_offset = first_offset
        self.committed = committed


class PendingBatch(NamedTuple):
    """Records written to ``.data`` whose index entries are not written yet."""

    first_offset: int
    message_count: int
    data_start: int
    data_end: int
    index_bytes: bytes
    timeindex_bytes: bytes
    keyindex_bytes: bytes = b""  # the batch's key index entries, after any buffered single pushes'
    tagindex_bytes: bytes = b""  # the batch's tag index entries, after any buffered single pushes'


class SegmentWriter:
    """The active segment of a partition, open for appending by the stream's one producer."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        next_offset: int,
        data_size: int,
        fds: tuple[int, int, int, int | None, int],
        *,
        mode: int = DEFAULT_FILE_MODE,
    ) -> None:
        self.directory = directory
        self._mode = mode  # of a .tagindex a compact segment makes later (_write_tags)
        self.base_offset = base_offset
        self.next_offset = next_offset
        self.data_size = data_size
        self._data_fd, self._timeindex_fd, self._index_fd, keyindex_fd, self._tagindex_fd = fds
        # The single pushes' time, tag and key index entries waiting to be written: with the entries
        # on disk, one per committed message (so the files hold ``_written_entries(buffer)``). The
        # tag buffer always holds as many as the time buffer; the key buffer is None when there is
        # no key index.
        self._time_buffer: list[bytes] = []
        self._tag_buffer: list[bytes] = []
        self._keyindex_fd = -1 if keyindex_fd is None else keyindex_fd
        self._key_buffer: list[int] | None = None if keyindex_fd is None else []
        self._pending: PendingBatch | None = None
        self._broken: OSError | None = None
        self._index_read_fd = -1  # opened by tail_state (shared producers) when first needed
        self.closed = False
        # Parked: the files closed, the position kept (``park``); None when open, else whether the
        # segment is compact (which files ``unpark`` opens again).
        self._parked_compact: bool | None = None

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: str,
        base_offset: int,
        *,
        mode: int = DEFAULT_FILE_MODE,
        key_index: bool = True,
        compact: bool = False,
    ) -> SegmentWriter:
        """Create the files of a new, empty segment (``.index`` last) and make them durable."""
        fds = open_writable(directory, base_offset, create=True, mode=mode, key_index=key_index, compact=compact)
        try:
            fsync_dir(directory)
        except BaseException:
            for fd in fds:
                if fd is not None and fd >= 0:
                    os.close(fd)
            raise
        return cls(directory, base_offset, base_offset, 0, fds, mode=mode)

    @classmethod
    def open(
        cls,
        directory: str,
        base_offset: int,
        *,
        next_offset: int,
        data_size: int,
        key_index: bool = True,
        mode: int = DEFAULT_FILE_MODE,
        compact: bool = False,
    ) -> SegmentWriter:
        """Open an existing, recovered segment for appending at ``next_offset``.

        Its ``.timeindex`` and ``.tagindex`` (and with ``key_index``, its ``.keyindex``) must exist
        and hold one entry per message (recovery makes it so), except in a ``compact`` segment, which
        has no ``.timeindex`` and may have no ``.tagindex`` yet.
        """
        fds = open_writable(directory, base_offset, create=False, mode=mode, key_index=key_index, compact=compact)
        return cls(directory, base_offset, next_offset, data_size, fds, mode=mode)

    # -- writing -------------------------------------------------------------------------------

    @property
    def message_count(self) -> int:
        """Messages committed to this segment."""
        return self.next_offset - self.base_offset

    def _written_entries(self, buffer: list[bytes] | list[int]) -> int:
        """Entries of the time or key index file whose single pushes buffer ``buffer``."""
        return self.next_offset - self.base_offset - len(buffer)

    def _check_usable(self) -> None:
        if self.closed:
            raise ValueError("the segment writer is closed")
        if self._parked_compact is not None:
            raise ValueError("the segment writer is parked (its files closed): unpark it before writing")
        if self._broken is not None:
            raise OSError(
                self._broken.errno,
                f"this segment could not be restored after an I/O error ({self._broken.strerror}); "
                "close the producer and open it again: recovery will repair the segment",
            )

    def write_data(
        self,
        records: Sequence[bytes],
        timestamps: Sequence[int],
        key_hashes: Sequence[int] | bytes | None = None,
        tagindex: bytes | None = None,
    ) -> PendingBatch:
        """Append the records to ``.data`` only; their index entries wait for ``write_entries``.

        ``key_hashes`` (``keyindex_format.key_hash`` of each record's key, as ints or already packed
        as the key index stores them, ``keyindex_format.pack_hashes``) spares cutting the keys out of
        the records again when the stream keeps a key index, and ``tagindex`` (their ``.tagindex``
        entries, computed where the tags were at hand) the tags.
        """
        self._check_usable()
        if self._pending is not None:
            raise RuntimeError("a batch is already waiting for its index entries")
        first_offset = self.next_offset
        start = self.data_size
        count = len(records)
        if type(key_hashes) is bytes and len(key_hashes) != count * keyindex_format.ENTRY_BYTES:
            raise ValueError(
                f"{len(key_hashes)} bytes of packed key hashes for {count} records: give one "
                f"{keyindex_format.ENTRY_BYTES}-byte entry a record"
            )
        if count == 1:
            size = len(records[0])
            index_bytes = INDEX_ENTRY.pack(first_offset, start, size)
            timeindex_bytes = TIMEINDEX_ENTRY.pack(first_offset, timestamps[0])
            end = start + size
        else:
            index_bytes, timeindex_bytes, end = index_entries(first_offset, start, records, timestamps)
        if tagindex is None or len(tagindex) != count * TAG_ENTRY_BYTES:
            tagindex = tag_column(records)
        tagindex_bytes = tagindex
        if self._time_buffer:  # single pushes' entries go first, in one write with the batch's
            timeindex_bytes = b"".join(self._time_buffer) + timeindex_bytes
            tagindex_bytes = b"".join(self._tag_buffer) + tagindex_bytes
        try:
            if end - start <= _JOIN_MAX_BYTES:
                # Measured: for many small records one copy and one write beats writev (Python
                # builds a buffer view per iovec); big batches skip the copy.
                write_all(self._data_fd, b"".join(records) if count > 1 else records[0])
            else:
                writev_all(self._data_fd, records)
        except OSError:
            self._cut_back(self._data_fd, start)
            raise
        self.data_size = end
        keyindex_bytes = b""
        key_buffer = self._key_buffer
        if key_buffer is not None:
            if type(key_hashes) is bytes:  # packed already: the single pushes' buffered entries go first
                keyindex_bytes = keyindex_format.pack_hashes(key_buffer) + key_hashes if key_buffer else key_hashes
            else:
                hashes = keyindex_format.record_key_hashes(records) if key_hashes is None else key_hashes
                keyindex_bytes = keyindex_format.pack_hashes(
                    itertools.chain(key_buffer, hashes) if key_buffer else hashes
                )
        pending = PendingBatch(
            first_offset, count, start, end, index_bytes, timeindex_bytes, keyindex_bytes, tagindex_bytes
        )
        self._pending = pending
        return pending

    def write_run(self, run: EncodedRun) -> PendingBatch:
        """``write_data`` of an ``EncodedRun`` (push_many's packed batch, a Kafka Produce's batch):
        its ``.data`` bytes written as they are, in one write, no object a record; its entries
        placed at this segment's next offset and position, and checked against its records first
        (``run_entries.place_entries``: ValueError and nothing written if they disagree). A run
        without a tag column (``b""``) gets a "no tag" ``.tagindex`` entry a record."""
        self._check_usable()
        if self._pending is not None:
            raise RuntimeError("a batch is already waiting for its index entries")
        tag_entries = run.tag_entries
        index_bytes, timeindex_bytes = place_entries(
            run.data, run.index_entries, run.time_entries, tag_entries, self.next_offset, self.data_size
        )
        count = len(index_bytes) // INDEX_ENTRY_BYTES
        if len(run.key_hashes) != count * KEY_ENTRY_BYTES:
            raise ValueError(
                f"{len(run.key_hashes)} bytes of packed key hashes for {count} records: give one "
                f"{KEY_ENTRY_BYTES}-byte entry a record"
            )
        return self._write_placed(
            run.data, count, index_bytes, timeindex_bytes, tag_entries or bytes(count * TAG_ENTRY_BYTES), run.key_hashes
        )

    def _write_placed(
        self,
        data: bytes,
        count: int,
        index_bytes: bytes,
        timeindex_bytes: bytes,
        tagindex_bytes: bytes,
        key_hashes: bytes,
    ) -> PendingBatch:
        """The ``write_data`` of a run, its entries already placed at this
        segment's next offset and position: ``data`` written as it is, the single pushes' buffered
        entries put before the batch's."""
        first_offset = self.next_offset
        start = self.data_size
        if self._time_buffer:  # single pushes' entries go first, in one write with the batch's
            timeindex_bytes = b"".join(self._time_buffer) + timeindex_bytes
            tagindex_bytes = b"".join(self._tag_buffer) + tagindex_bytes
        try:
            write_all(self._data_fd, data)
        except OSError:
            self._cut_back(self._data_fd, start)
            raise
        end = start + len(data)
        self.data_size = end
        keyindex_bytes = b""
        key_buffer = self._key_buffer
        if key_buffer is not None:  # the single pushes' buffered entries go first
            keyindex_bytes = keyindex_format.pack_hashes(key_buffer) + key_hashes if key_buffer else key_hashes
        pending = PendingBatch(
            first_offset, count, start, end, index_bytes, timeindex_bytes, keyindex_bytes, tagindex_bytes
        )
        self._pending = pending
        return pending

    def write_entries(self, pending: PendingBatch) -> None:
        """Append the batch's ``.timeindex`` then ``.index`` entries: the batch becomes visible.

        Raises ``PartlyCommittedError`` when the ``.index`` write failed after whole entries had
        reached the file: readers may have seen those, so they stay committed (see the class).
        """
        self._check_usable()
        if pending is not self._pending:
            raise RuntimeError("write_entries() takes the batch the last write_data() returned")
        index_size = (self.next_offset - self.base_offset) * INDEX_ENTRY_BYTES
        key_buffer = self._key_buffer
        try:
            if self._timeindex_fd >= 0:
                write_all(self._timeindex_fd, pending.timeindex_bytes)
            self._write_tags(pending.tagindex_bytes, self._written_entries(self._tag_buffer))
            if key_buffer is not None:
                write_all(self._keyindex_fd, pending.keyindex_bytes)
            write_all(self._index_fd, pending.index_bytes)
        except OSError as error:
            committed = self._entries_on_disk(index_size, pending.message_count)
            if committed:
                self._commit_prefix(pending, committed)
                raise PartlyCommittedError(error, pending.first_offset, committed) from error
            self._pending = None
            self._cut_back_to(self.next_offset - self.base_offset, pending.data_start)
            raise
        self._pending = None
        self.next_offset = pending.first_offset + pending.message_count
        self._time_buffer.clear()
        self._tag_buffer.clear()
        if key_buffer is not None:
            key_buffer.clear()

    def _entries_on_disk(self, index_size: int, most: int) -> int:
        """Whole entries of a failed ``.index`` write that reached the file (readers count them)."""
        try:
            size = os.fstat(self._index_fd).st_size
        except OSError as error:
            # Unknown: a reader may have seen any of them, so cut nothing, write nothing more, and
            # leave it to recovery on the next open (every entry points at a whole, valid record).
            self._broken = error
            raise
        return min(max(0, size - index_size) // INDEX_ENTRY_BYTES, most)

    def _commit_prefix(self, pending: PendingBatch, committed: int) -> None:
        """Keep the first ``committed`` messages of a batch whose ``.index`` write failed after
        them, and cut the rest of the batch (and a torn entry) out of every file."""
        self._pending = None
        self.next_offset = pending.first_offset + committed
        self.drop_buffered_entries()  # written with the batch's: the kept entries hold them
        if committed < pending.message_count:  # the first record cut: where the kept data ends
            _, kept_end, _ = INDEX_ENTRY.unpack_from(pending.index_bytes, committed * INDEX_ENTRY_BYTES)
        else:
            kept_end = pending.data_end
        self._cut_back_to(self.next_offset - self.base_offset, kept_end)

    def abandon(self, pending: PendingBatch) -> None:
        """Forget a batch whose data was written but must not be committed (its fsync failed)."""
        if pending is not self._pending:
            raise RuntimeError("abandon() takes the batch the last write_data() returned")
        self._pending = None
        self._cut_back(self._data_fd, pending.data_start)
        self.data_size = pending.data_start

    def append(
        self,
        records: Sequence[bytes],
        timestamps: Sequence[int],
        key_hashes: Sequence[int] | bytes | None = None,
        tagindex: bytes | None = None,
    ) -> int:
        """Append and commit the records; returns the offset of the first."""
        pending = self.write_data(records, timestamps, key_hashes, tagindex)
        self.write_entries(pending)
        return pending.first_offset

    def append_run(self, run: EncodedRun) -> int:
        """``append`` of an ``EncodedRun`` (``write_run``); returns the offset of its first record."""
        pending = self.write_run(run)
        self.write_entries(pending)
        return pending.first_offset

    def append_one(
        self, record: bytes, timestamp_ns: int, key_hash: int | None = None, tag_entry: bytes | None = None
    ) -> int:
        """``append`` for a single record: the producer's hot path, with nothing but the writes.

        Its time and key index entries are buffered and written with the next batch, or once 128
        wait: two writes a push (``.data``, ``.index``).
        """
        if self._pending is not None or self.closed or self._broken is not None:
            self._check_usable()
            raise RuntimeError("a batch is already waiting for its index entries")
        key_buffer = self._key_buffer
        if key_hash is None or key_buffer is None:  # hashed before any write: a record it cannot read changes nothing
            key_hash = 0 if key_buffer is None else keyindex_format.record_key_hashes((record,))[0]
        offset = self.next_offset
        start = self.data_size
        time_buffer = self._time_buffer
        if tag_entry is None:  # also before any write: once the .index entry is in, nothing may fail
            tag_entry = tag_column([record]) if record[_ATTRIBUTES_AT] & _TAGGED else _NO_TAG_ENTRY
        if len(time_buffer) < _INLINE_ENTRIES:  # no buffered entries due: the record, its entry, noted
            try:
                append_one(
                    os.write,
                    self._data_fd,
                    self._index_fd,
                    record,
                    offset,
                    start,
                    timestamp_ns,
                    time_buffer,
                    tag_entry,
                    self._tag_buffer,
                    key_hash,
                    key_buffer,
                )
            except BaseException as error:
                if getattr(error, "index_entry", False):
                    self._cut_back(self._index_fd, (offset - self.base_offset) * INDEX_ENTRY_BYTES)
                self._cut_back(self._data_fd, start)
                raise
            self.data_size = start + len(record)
            self.next_offset = offset + 1
            return offset
        size = len(record)
        # The entries buffered so far are written now, before the record's .index entry: the entry
        # makes the record visible, so it goes last, and a failure before it takes back nothing a
        # reader could have seen.
        try:
            written = os.write(self._data_fd, record)
            if written != size:  # a short write (the disk filling up): the rest raises or goes through
                write_all(self._data_fd, memoryview(record)[written:])
        except OSError:
            self._cut_back(self._data_fd, start)
            raise
        tag_buffer = self._tag_buffer
        time_buffer.append(TIMEINDEX_ENTRY.pack(offset, timestamp_ns))
        tag_buffer.append(tag_entry)
        if key_buffer is not None:
            key_buffer.append(key_hash)
        flushed = len(time_buffer) >= BUFFERED_ENTRIES
        try:
            if flushed:
                if self._timeindex_fd >= 0:
                    write_all(self._timeindex_fd, b"".join(time_buffer))
                # On disk: the entries before the buffered ones, this record's among them.
                self._write_tags(b"".join(tag_buffer), self._written_entries(tag_buffer) + 1)
                if key_buffer is not None:
                    write_all(self._keyindex_fd, keyindex_format.pack_hashes(key_buffer))
            # Plain os.write with the short-write fallback spelled out: a call less per entry.
            entry = INDEX_ENTRY.pack(offset, start, size)
            written = os.write(self._index_fd, entry)
            if written != INDEX_ENTRY_BYTES:
                write_all(self._index_fd, entry[written:])
        except OSError:
            time_buffer.pop()
            tag_buffer.pop()
            if key_buffer is not None:
                key_buffer.pop()
            self._cut_back_to(offset - self.base_offset, start)
            raise
        self.data_size = start + size
        self.next_offset = offset + 1
        if flushed:
            time_buffer.clear()
            tag_buffer.clear()
            if key_buffer is not None:
                key_buffer.clear()
        return offset

    # -- shared appends (several producers, each under the partition's lock) -------------------

    def tail_state(self) -> tuple[int, int] | None:
        """``(next_offset, data_size)`` as the files say now, if they agree with each other: whole
        index entries, the last one ending exactly where ``.data`` ends, and a time (and key) index
        entry for each. None when they do not (a writer died mid-append: recovery must look) or
        when this writer is unusable.

        For shared producers, under the partition's lock, with no entries buffered: other
        producers may have appended since this one last held the lock.
        """
        if self.closed or self._broken is not None or self._pending is not None or self._time_buffer:
            return None
        index_size = os.fstat(self._index_fd).st_size
        entries, partial = divmod(index_size, INDEX_ENTRY_BYTES)
        data_size = os.fstat(self._data_fd).st_size
        if partial:
            return None
        if entries != self.next_offset - self.base_offset or data_size != self.data_size:
            if entries:
                if self._index_read_fd < 0:  # the append descriptor cannot read
                    try:
                        self._index_read_fd = open_read(segment_path(self.directory, self.base_offset, INDEX))
                    except FileNotFoundError:
                        # Other shared producers rolled past this segment and one of them vacuumed
                        # it (under the vacuum lock, not this partition's): the view is stale, and
                        # the caller's full refresh follows the roll.
                        return None
                last = pread_exact(self._index_read_fd, INDEX_ENTRY_BYTES, index_size - INDEX_ENTRY_BYTES)
                if len(last) != INDEX_ENTRY_BYTES:
                    return None
                offset, position, size = INDEX_ENTRY.unpack(last)
                if offset != self.base_offset + entries - 1 or position + size != data_size:
                    return None
            elif data_size:
                return None
        if self._timeindex_fd >= 0 and os.fstat(self._timeindex_fd).st_size != entries * TIMEINDEX_ENTRY_BYTES:
            return None
        if self._tagindex_fd < 0:  # compact: another producer may have made it since
            with contextlib.suppress(FileNotFoundError):
                self._tagindex_fd = open_append(segment_path(self.directory, self.base_offset, TAGINDEX), create=False)
        if self._tagindex_fd >= 0 and os.fstat(self._tagindex_fd).st_size != entries * TAG_ENTRY_BYTES:
            return None
        keys = self._key_buffer is not None
        if keys and os.fstat(self._keyindex_fd).st_size != entries * keyindex_format.ENTRY_BYTES:
            return None
        return self.base_offset + entries, data_size

    def adopt(self, next_offset: int, data_size: int) -> None:
        """Continue after what other producers appended (``tail_state``'s figures)."""
        self.next_offset = next_offset
        self.data_size = data_size

    def drop_buffered_entries(self) -> None:
        """Forget buffered time and key index entries that could not be written: the files are then
        short of entries, which the next holder's tail check finds and recovery rebuilds."""
        self._time_buffer.clear()
        self._tag_buffer.clear()
        if self._key_buffer is not None:
            self._key_buffer.clear()

    # -- buffered entries and the key index ----------------------------------------------------

    def flush_buffered_entries(self) -> None:
        """Write the time, tag and key index entries single pushes left buffered (before a seal or close)."""
        time_buffer = self._time_buffer
        if time_buffer:
            if self._timeindex_fd >= 0:  # a compact segment only counts its pushes by this buffer
                self._check_usable()
                try:
                    write_all(self._timeindex_fd, b"".join(time_buffer))
                except OSError:
                    self._cut_back(self._timeindex_fd, self._written_entries(time_buffer) * TIMEINDEX_ENTRY_BYTES)
                    raise
            time_buffer.clear()
        tag_buffer = self._tag_buffer
        if tag_buffer:
            self._check_usable()
            try:
                self._write_tags(b"".join(tag_buffer), self._written_entries(tag_buffer))
            except OSError:
                self._cut_back(self._tagindex_fd, self._written_entries(tag_buffer) * TAG_ENTRY_BYTES)
                raise
            tag_buffer.clear()
        key_buffer = self._key_buffer
        if key_buffer:
            self._check_usable()
            try:
                write_all(self._keyindex_fd, keyindex_format.pack_hashes(key_buffer))
            except OSError:
                self._cut_back(self._keyindex_fd, self._written_entries(key_buffer) * keyindex_format.ENTRY_BYTES)
                raise
            key_buffer.clear()

    def _write_tags(self, entries: bytes, on_disk: int) -> None:
        """Append ``.tagindex`` entries after the ``on_disk`` ones the file holds. A compact segment
        makes its ``.tagindex`` when the first entry that names a tag comes, the messages before
        it entered as "no tag" (zeros): until then readers take tags from the records."""
        fd = self._tagindex_fd
        if fd < 0:
            if not names_a_tag(entries):
                return
            path = segment_path(self.directory, self.base_offset, TAGINDEX)
            fd = self._tagindex_fd = open_append(path, create=True, mode=self._mode)
            os.ftruncate(fd, on_disk * TAG_ENTRY_BYTES)
        write_all(fd, entries)

    def seal_key_index(self) -> None:
        """Append the sorted column and trailer that seal the key index (when the segment rolls)."""
        if self._key_buffer is None:
            return
        self.flush_buffered_entries()
        keyindex.seal_column(
            self._keyindex_fd, segment_path(self.directory, self.base_offset, KEYINDEX), self.message_count
        )

    def _cut_back_to(self, entries: int, data_end: int) -> None:
        """Take a failed write back: every file cut to the segment's first ``entries`` messages,
        ``.data`` to ``data_end``. ``.index`` keeps ``entries`` entries; each side file keeps those
        its buffer of single pushes does not hold (buffered entries were never written). Cut in the
        reverse of the write order, the commit point first."""
        self._cut_back(self._index_fd, entries * INDEX_ENTRY_BYTES)
        key_buffer = self._key_buffer
        if key_buffer is not None:
            self._cut_back(self._keyindex_fd, (entries - len(key_buffer)) * KEY_ENTRY_BYTES)
        self._cut_back(self._tagindex_fd, (entries - len(self._tag_buffer)) * TAG_ENTRY_BYTES)
        self._cut_back(self._timeindex_fd, (entries - len(self._time_buffer)) * TIMEINDEX_ENTRY_BYTES)
        self._cut_back(self._data_fd, data_end)
        self.data_size = data_end

    def _cut_back(self, fd: int, size: int) -> None:
        """Undo a partial write; if even that fails, refuse further writes until a reopen. (A file
        a compact segment does not have, fd -1, has nothing to undo.)"""
        if fd < 0:
            return
        try:
            os.ftruncate(fd, size)
        except OSError as error:
            self._broken = error

    def sync(self, *, data_only: bool = False) -> None:
        """fdatasync ``.data`` (and, unless ``data_only``, the index files); nothing for a parked
        segment, whose files were synced when it was parked and not written since."""
        if self._parked_compact is not None:
            return
        self._check_usable()
        os.fdatasync(self._data_fd)
        if not data_only:
            for fd in (self._timeindex_fd, self._tagindex_fd):
                if fd >= 0:
                    os.fdatasync(fd)
            if self._key_buffer is not None:
                os.fdatasync(self._keyindex_fd)
            os.fdatasync(self._index_fd)

    def file_state(self) -> SegmentFileState:
        """Sizes and modification times of the open files (for the clean-close record); a parked
        segment's from the files' names."""
        if self._parked_compact is not None:
            state = SegmentFileState.of_files(self.directory, self.base_offset)
            if state is None:
                raise FileNotFoundError(f"the parked segment {self.base_offset} of {self.directory} lost its files")
            return state
        self._check_usable()
        data, timeindex, index, tags = (
            fd_state(fd) for fd in (self._data_fd, self._timeindex_fd, self._index_fd, self._tagindex_fd)
        )
        keys = None if self._key_buffer is None else fd_state(self._keyindex_fd)
        return SegmentFileState(self.base_offset, data, index, timeindex, keys, tags)

    def close(self) -> None:
        """Close the files (without syncing); closing twice is harmless."""
        if self.closed:
            return
        self.closed = True
        self._close_files()

    def _close_files(self) -> None:
        fds = (
            self._data_fd,
            self._timeindex_fd,
            self._tagindex_fd,
            self._keyindex_fd,
            self._index_fd,
            self._index_read_fd,
        )
        # -1 first: a write that comes by mistake fails (EBADF) instead of reaching a file that
        # reuses a descriptor's number.
        self._data_fd = self._timeindex_fd = self._tagindex_fd = self._keyindex_fd = self._index_fd = -1
        self._index_read_fd = -1
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    # -- parking: a writer of more partitions than it may keep open -------------------------------

    @property
    def parked(self) -> bool:
        """True while the files are closed by ``park``."""
        return self._parked_compact is not None

    def park(self, *, sync: bool = True) -> None:
        """Write the buffered entries, fsync and close the files, keeping the position in memory:
        ``unpark`` opens them again without a scan (nothing else writes the segment meanwhile: the
        stream's one producer parked it). ``sync=False`` when nothing was written since the files
        were last fsynced (buffered entries written here are fsynced all the same): a parked
        segment's files are durable, as a clean close takes them to be. Only between writes
        (RuntimeError with a batch waiting for its entries); parking twice is harmless. A failure
        leaves the segment open."""
        if self._parked_compact is not None or self.closed:
            return
        if self._pending is not None:
            raise RuntimeError("a batch is waiting for its index entries: park the segment after it")
        buffered = bool(self._time_buffer or self._tag_buffer or self._key_buffer)
        self.flush_buffered_entries()
        if sync or buffered:
            self.sync()
        self._parked_compact = self._timeindex_fd < 0
        self._close_files()

    def unpark(self) -> None:
        """Open the files of a parked segment again (OSError, and still parked, if that fails)."""
        compact = self._parked_compact
        if compact is None or self.closed:
            return
        fds = open_writable(
            self.directory,
            self.base_offset,
            create=False,
            mode=self._mode,
            key_index=self._key_buffer is not None,
            compact=compact,
        )
        self._data_fd, self._timeindex_fd, self._index_fd, keyindex_fd, self._tagindex_fd = fds
        self._keyindex_fd = -1 if keyindex_fd is None else keyindex_fd
        self._parked_compact = None
