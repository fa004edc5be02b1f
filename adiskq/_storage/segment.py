"""One segment: the ``.data``/``.index``/``.timeindex``/``.tagindex``/``.keyindex`` files named by its first offset.

``.index`` holds 24 bytes a message (offset | position in .data | size, u64 LE each),
``.timeindex`` 16 bytes a message (offset | timestamp_ns), ``.tagindex`` 4 bytes a message, the
hash of its tag (format in ``adiskq/_sansio/tags.py``), and ``.keyindex`` (when the stream keeps a
key index; format in ``keyindex.py``) 4 bytes a message, the hash of its key. All are derived from
``.data`` and can be rebuilt from it. Write order is the whole consistency story:

1. the records are appended to ``.data``;
2. (``flush="sync"``: ``.data`` is fdatasync'ed here, so no index entry can outlive a power cut
   that takes its record back;)
3. the ``.timeindex`` entries are appended, then the ``.tagindex`` and ``.keyindex`` entries;
4. the ``.index`` entries are appended — the commit point: a message exists for readers once its
   index entry does, and by then its record is already in place.

A single push (``append_one``) buffers its ``.timeindex``, ``.tagindex`` and ``.keyindex`` entries
and writes them 128 at a time, or with the next batch, a roll or a close: a write call less each per
push. So the active segment's time, tag and key indexes may end up to 127 entries short of its
``.index``; readers take what they need for those messages from the records themselves (a
timestamp, a tag, a key), ``check`` accepts such a tail, and recovery rebuilds it after a crash.
Sealed segments are always complete. (A segment written before tags, format 1, has no
``.tagindex``: readers take every tag from the records there.)

A compressed stream's segments are *compact*: no ``.timeindex`` at all (readers take timestamps from
the records, where ``.index`` places them), and no ``.tagindex`` until the first entry that names a
tag is written, when the file is made holding a "no tag" entry for every message before it; from then
on it is kept as above. Their single pushes still count their entries in the time buffer, which
is then never written.

A failed write is cut back (``ftruncate``) so the files stay as they were before the batch, with one
exception: an ``.index`` write that fails after whole entries reached the file keeps those messages
(readers may have seen them; ``PartlyCommittedError`` says how many) and cuts only the rest.
Segment files are created ``.data`` first and ``.index`` last, because readers find segments by
their ``.index`` file and must find the others beside it (go-diskq's consumers died with ENOENT
when ``.data`` appeared before ``.index``).
"""

from __future__ import annotations

import array
import contextlib
import itertools
import mmap
import operator
import os
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, Self

from .._errors import CorruptRecordError
from .._sansio import keyindex as keyindex_format
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES, MIN_RECORD_BYTES
from .._sansio.compression import Dictionaries
from .._sansio.core import (
    PackedRecords,
    decode_at,
    decode_messages,
    index_entries,
    matching_records,
    rebase_entries,
    tag_column,
)
from .._sansio.naming import DATA, INDEX, KEYINDEX, TAGINDEX, TIMEINDEX, segment_file_name
from .._sansio.native import NATIVE
from .._sansio.run_entries import place_run_entries
from .._sansio.tags import TagFilter, names_a_tag
from .._sansio.values import Message
from . import keyindex
from .dictionaries import partition_stream_path, stream_dictionaries
from .files import DEFAULT_FILE_MODE, fsync_dir, open_append, open_read, pread_exact, write_all, writev_all

__all__ = [
    "ABSENT",
    "BUFFERED_ENTRIES",
    "INDEX_ENTRY",
    "INDEX_ENTRY_BYTES",
    "TAG_ENTRY_BYTES",
    "TIMEINDEX_ENTRY",
    "TIMEINDEX_ENTRY_BYTES",
    "TRUST_READ_BYTES",
    "PartlyCommittedError",
    "PendingBatch",
    "SegmentFileState",
    "SegmentReader",
    "SegmentWriter",
    "StoredRun",
    "count_within",
    "entry_columns",
    "open_for_reading",
    "segment_path",
]

INDEX_ENTRY: Final = struct.Struct("<QQQ")  # offset, position, size
TIMEINDEX_ENTRY: Final = struct.Struct("<Qq")  # offset, timestamp_ns
INDEX_ENTRY_BYTES: Final = INDEX_ENTRY.size
TAG_ENTRY_BYTES: Final = 4  # u32 LE: the tag hash (adiskq/_sansio/tags.py)
_NO_TAG_ENTRY: Final = bytes(TAG_ENTRY_BYTES)
_TAGGED: Final = 0x01  # the record's attributes bit that says it carries a tag
_ATTRIBUTES_AT: Final = 9
# How many time and key index entries single pushes buffer (a global, not an attribute, on the hot path).
BUFFERED_ENTRIES: Final = keyindex_format.TAIL_BUFFER_ENTRIES
# A single push below this many buffered entries writes none of them (its record and .index entry only).
_INLINE_ENTRIES: Final = BUFFERED_ENTRIES - 1
_JOIN_MAX_BYTES: Final = 1 << 20
TIMEINDEX_ENTRY_BYTES: Final = TIMEINDEX_ENTRY.size
_TAG_OF: Final = operator.itemgetter(6)  # Message.tag
# Candidates fewer than one in this many entries are read one by one (``_read_sparse``).
_SPARSE_SHARE: Final = 8
_TAG_FD_UNOPENED: Final = -1
_TAG_FD_NONE: Final = -2  # the segment has no .tagindex
# No record is larger (a u32 size field): an .index size above it is damage.
MAX_RECORD_BYTES_EVER: Final = 2**32 - 1
# Reads larger than this are first checked against the size of .data (one fstat).
TRUST_READ_BYTES: Final = 16 * 2**20


class StoredRun(NamedTuple):
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


def append_record_reference(
    write: Callable[[int, bytes], int], data_fd: int, index_fd: int, record: bytes, offset: int, position: int
) -> None:
    """Write ``record`` at the end of ``.data``, then its ``.index`` entry; the reference of the
    compiled core's ``append_record`` (adiskq/_csrc/append.c, which says the contract), and what the
    pure-Python core runs. ``write`` is ``os.write`` as the caller finds it (tests replace it)."""
    _write_through(write, data_fd, record)
    try:
        _write_through(write, index_fd, INDEX_ENTRY.pack(offset, position, len(record)))
    except BaseException as error:
        error.index_entry = True  # type: ignore[attr-defined]
        raise


def _write_through(write: Callable[[int, bytes], int], fd: int, data: bytes) -> None:
    done = 0
    while done < len(data):
        written = write(fd, data[done:] if done else data)
        if not 0 <= written <= len(data) - done:
            raise ValueError("append_record: write() returned an impossible byte count")
        done += written


append_record: Final = NATIVE.append_record if NATIVE is not None else append_record_reference


def append_one_reference(
    write: Callable[[int, bytes], int],
    data_fd: int,
    index_fd: int,
    record: bytes,
    offset: int,
    position: int,
    timestamp_ns: int,
    time_buffer: list[bytes],
    tag_entry: bytes,
    tag_buffer: list[bytes],
    key_hash: int,
    key_buffer: list[int] | None,
) -> None:
    """``append_record``, then the record's buffered entries noted: its ``.timeindex`` entry on
    ``time_buffer``, ``tag_entry`` on ``tag_buffer``, ``key_hash`` on ``key_buffer`` (unless None).
    The reference of the compiled core's ``append_one`` (adiskq/_csrc/append.c, which says the
    contract): every argument checked before the first write, the lists untouched by a failed one."""
    if not (
        type(record) is bytes
        and isinstance(offset, int)
        and isinstance(position, int)
        and isinstance(timestamp_ns, int)
        and type(time_buffer) is list
        and type(tag_entry) is bytes
        and type(tag_buffer) is list
        and type(key_hash) is int
        and (key_buffer is None or type(key_buffer) is list)
    ):
        raise TypeError(
            "append_one(write, data_fd, index_fd, record: bytes, offset: int, position: int, timestamp_ns: int, "
            "time_buffer: list, tag_entry: bytes, tag_buffer: list, key_hash: int, key_buffer: list | None)"
        )
    if len(tag_entry) != TAG_ENTRY_BYTES:
        raise ValueError("append_one: a .tagindex entry is 4 bytes")
    if not 0 <= key_hash <= 0xFFFFFFFF:
        raise OverflowError("append_one: a key index entry is a u32")
    if not (0 <= offset < 2**64 and 0 <= position < 2**64 and -(2**63) <= timestamp_ns < 2**63):
        raise OverflowError("append_one: an offset, position or timestamp out of its field's range")
    time_entry = TIMEINDEX_ENTRY.pack(offset, timestamp_ns)
    append_record_reference(write, data_fd, index_fd, record, offset, position)
    time_buffer.append(time_entry)
    tag_buffer.append(tag_entry)
    if key_buffer is not None:
        key_buffer.append(key_hash)


append_one: Final = NATIVE.append_one if NATIVE is not None else append_one_reference


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


def segment_path(directory: str, base_offset: int, extension: str) -> str:
    """The path of one file of a segment."""
    return os.path.join(directory, segment_file_name(base_offset, extension))


def entry_columns(raw: bytes, typecode: str, width: int) -> list[array.array[int]]:
    """The columns of index entries of ``width`` little-endian 64-bit integers each (``typecode``
    ``"Q"`` or ``"q"``; whole entries only): ``.index`` has 3 (offset, position, size),
    ``.timeindex`` 2 (offset, timestamp)."""
    values = array.array(typecode)
    values.frombytes(raw[: len(raw) - len(raw) % (8 * width)])
    if sys.byteorder == "big":  # pragma: no cover - big-endian hosts
        values.byteswap()
    return [values[column::width] for column in range(width)]


def open_for_reading(directory: str, base_offset: int) -> tuple[int, int]:
    """The segment's ``.index`` and ``.data`` descriptors (FileNotFoundError if vacuum deleted it)."""
    index_fd = open_read(segment_path(directory, base_offset, INDEX))
    try:
        return index_fd, open_read(segment_path(directory, base_offset, DATA))
    except BaseException:
        os.close(index_fd)
        raise


def _open_writable(
    directory: str, base_offset: int, *, create: bool, mode: int, key_index: bool, compact: bool
) -> tuple[int, int, int, int | None, int]:
    """Append descriptors of ``.data``, ``.timeindex``, ``.index``, ``.keyindex`` (if kept) and
    ``.tagindex``, created in the order data, timeindex, tagindex, keyindex, index.

    A ``compact`` segment (a compressed stream's) has no ``.timeindex`` (its descriptor is -1), and
    a ``.tagindex`` only from its first tagged message on (-1 until then; ``_write_tags`` makes it)."""
    extensions = [DATA] if compact else [DATA, TIMEINDEX, TAGINDEX]
    if key_index:
        extensions.append(KEYINDEX)
    extensions.append(INDEX)
    opened: dict[str, int] = {}
    try:
        for extension in extensions:
            opened[extension] = open_append(segment_path(directory, base_offset, extension), create=create, mode=mode)
        if compact and not create:
            with contextlib.suppress(FileNotFoundError):
                opened[TAGINDEX] = open_append(segment_path(directory, base_offset, TAGINDEX), create=False)
    except BaseException:
        for fd in opened.values():
            os.close(fd)
        raise
    return opened[DATA], opened.get(TIMEINDEX, -1), opened[INDEX], opened.get(KEYINDEX), opened.get(TAGINDEX, -1)


# A file a segment does not have, in a SegmentFileState: a compact segment's .timeindex, and its
# .tagindex until its first tagged message.
ABSENT: Final = (-1, 0)


class SegmentFileState(NamedTuple):
    """Size and modification time (ns) of each file of a segment, as a clean close left them."""

    base_offset: int
    data_file: tuple[int, int]
    index_file: tuple[int, int]
    timeindex_file: tuple[int, int]  # ABSENT in a compact segment
    keyindex_file: tuple[int, int] | None = None  # None: the segment has no key index
    tagindex_file: tuple[int, int] | None = None  # None: not recorded (a clean close before tags)

    @classmethod
    def of_files(cls, directory: str, base_offset: int) -> SegmentFileState | None:
        """The state of the segment's files now, or None if ``.data`` or ``.index`` is missing
        (symlinks are not followed); a missing time or tag index is ABSENT."""
        try:
            states = [os.lstat(segment_path(directory, base_offset, ext)) for ext in (DATA, INDEX)]
        except FileNotFoundError:
            return None
        data, index = ((st.st_size, st.st_mtime_ns) for st in states)
        timeindex, tags = (_file_state(segment_path(directory, base_offset, ext)) for ext in (TIMEINDEX, TAGINDEX))
        try:
            key_status = os.lstat(segment_path(directory, base_offset, KEYINDEX))
        except FileNotFoundError:
            return cls(base_offset, data, index, timeindex, None, tags)
        return cls(base_offset, data, index, timeindex, (key_status.st_size, key_status.st_mtime_ns), tags)

    @property
    def message_count(self) -> int | None:
        """Messages the files hold, or None when the index files do not agree on it."""
        entries, partial = divmod(self.index_file[0], INDEX_ENTRY_BYTES)
        if partial:
            return None
        if self.timeindex_file != ABSENT and self.timeindex_file[0] != entries * TIMEINDEX_ENTRY_BYTES:
            return None
        tags = self.tagindex_file
        if tags is None or (tags != ABSENT and tags[0] != entries * TAG_ENTRY_BYTES):
            return None
        return entries


def _fd_state(fd: int) -> tuple[int, int]:
    if fd < 0:
        return ABSENT
    status = os.fstat(fd)
    return status.st_size, status.st_mtime_ns


def _file_state(path: str) -> tuple[int, int]:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return ABSENT
    return status.st_size, status.st_mtime_ns


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
        fds = _open_writable(directory, base_offset, create=True, mode=mode, key_index=key_index, compact=compact)
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
        fds = _open_writable(directory, base_offset, create=False, mode=mode, key_index=key_index, compact=compact)
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

    def write_run(self, data: bytes, index: bytes, timeindex: bytes, key_hashes: bytes) -> PendingBatch:
        """``write_data`` of a run (``adiskq/_sansio/run_entries.py``): ``data`` the records back to
        back, ``index`` and ``timeindex`` their entries numbered from 0 (placed here, and checked
        against ``data`` first: ValueError and nothing written if they disagree), ``key_hashes``
        packed as the key index stores them. A run's records carry no tag, so its ``.tagindex``
        entries are all "no tag". One write of ``data`` as it is, no object a record."""
        self._check_usable()
        if self._pending is not None:
            raise RuntimeError("a batch is already waiting for its index entries")
        index_bytes, timeindex_bytes = place_run_entries(data, index, timeindex, self.next_offset, self.data_size)
        count = len(index_bytes) // INDEX_ENTRY_BYTES
        if len(key_hashes) != count * keyindex_format.ENTRY_BYTES:
            raise ValueError(
                f"{len(key_hashes)} bytes of packed key hashes for {count} records: give one "
                f"{keyindex_format.ENTRY_BYTES}-byte entry a record"
            )
        return self._write_placed(data, count, index_bytes, timeindex_bytes, bytes(count * TAG_ENTRY_BYTES), key_hashes)

    def write_packed(self, packed: PackedRecords) -> PendingBatch:
        """``write_data`` of a batch packed by ``pack_records``: its ``.data`` bytes written as they
        are, its entries moved to the offset and position it is written at."""
        self._check_usable()
        if self._pending is not None:
            raise RuntimeError("a batch is already waiting for its index entries")
        count = len(packed.index_entries) // INDEX_ENTRY_BYTES
        if (
            len(packed.index_entries) != count * INDEX_ENTRY_BYTES
            or len(packed.time_entries) != count * TIMEINDEX_ENTRY_BYTES
            or len(packed.key_hashes) != count * keyindex_format.ENTRY_BYTES
            or len(packed.tag_entries) != count * TAG_ENTRY_BYTES
        ):
            raise ValueError("a packed batch has one entry a record in each of its columns (see pack_records)")
        index_bytes, timeindex_bytes = rebase_entries(
            packed.index_entries, packed.time_entries, self.next_offset, self.data_size
        )
        return self._write_placed(
            packed.data, count, index_bytes, timeindex_bytes, packed.tag_entries, packed.key_hashes
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
        """The ``write_data`` of a run or a packed batch, its entries already placed at this
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
        timeindex_size = self._written_entries(self._time_buffer) * TIMEINDEX_ENTRY_BYTES
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
            self._cut_back(self._index_fd, index_size)
            if key_buffer is not None:
                self._cut_back(self._keyindex_fd, self._written_entries(key_buffer) * keyindex_format.ENTRY_BYTES)
            self._cut_back(self._tagindex_fd, self._written_entries(self._tag_buffer) * TAG_ENTRY_BYTES)
            self._cut_back(self._timeindex_fd, timeindex_size)
            self.abandon(pending)
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
        self._time_buffer.clear()
        self._tag_buffer.clear()
        entries = self.next_offset - self.base_offset
        self._cut_back(self._index_fd, entries * INDEX_ENTRY_BYTES)
        self._cut_back(self._timeindex_fd, entries * TIMEINDEX_ENTRY_BYTES)
        self._cut_back(self._tagindex_fd, entries * TAG_ENTRY_BYTES)
        if self._key_buffer is not None:
            self._key_buffer.clear()
            self._cut_back(self._keyindex_fd, entries * keyindex_format.ENTRY_BYTES)
        if committed < pending.message_count:  # the first record cut: where the kept data ends
            _, kept_end, _ = INDEX_ENTRY.unpack_from(pending.index_bytes, committed * INDEX_ENTRY_BYTES)
        else:
            kept_end = pending.data_end
        self._cut_back(self._data_fd, kept_end)
        self.data_size = kept_end

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

    def append_run(self, data: bytes, index: bytes, timeindex: bytes, key_hashes: bytes) -> int:
        """``append`` of a run (``write_run``); returns the offset of the first record."""
        pending = self.write_run(data, index, timeindex, key_hashes)
        self.write_entries(pending)
        return pending.first_offset

    def append_packed(self, packed: PackedRecords) -> int:
        """``append`` of a batch packed by ``pack_records``; returns the offset of its first record."""
        pending = self.write_packed(packed)
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
            self._cut_back(self._index_fd, (offset - self.base_offset) * INDEX_ENTRY_BYTES)
            time_buffer.pop()
            tag_buffer.pop()
            self._cut_back(self._timeindex_fd, self._written_entries(time_buffer) * TIMEINDEX_ENTRY_BYTES)
            self._cut_back(self._tagindex_fd, self._written_entries(tag_buffer) * TAG_ENTRY_BYTES)
            if key_buffer is not None:
                key_buffer.pop()
                self._cut_back(self._keyindex_fd, self._written_entries(key_buffer) * keyindex_format.ENTRY_BYTES)
            self._cut_back(self._data_fd, start)
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
            _fd_state(fd) for fd in (self._data_fd, self._timeindex_fd, self._index_fd, self._tagindex_fd)
        )
        keys = None if self._key_buffer is None else _fd_state(self._keyindex_fd)
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
        fds = _open_writable(
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

    def read_stored(self, offset: int, max_count: int, max_bytes: int | None = None) -> StoredRun | None:
        """The stored bytes of up to ``max_count`` records from ``offset`` on (at least one if any,
        then ``max_bytes``), as ``read_messages`` would decode them; None when there is no record at
        ``offset`` yet. The caller checks the records (``read_messages`` names any damage)."""
        located = self.locate(offset, max_count, max_bytes)
        if located is None:
            return None
        _, count, start, end = located
        return StoredRun(offset, count, self.read_span(start, end), self.max_record_bytes, self.dictionaries)

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
        Measured on W4's batches() read: the kernel's copy into a fresh buffer was ~15 ns of ~100 a
        message; with the mapping, the read's system time fell from 20-36 to 12-20 ns a message
        (benchmarks/RESULTS.md). A segment that cannot be mapped (address space) is read with pread.
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
