"""A segment's files and a partition folder's: their paths, opening them, their state, which
segments exist, and what their index files hold.

Segments are named by their first offset (``naming.py``); only regular files count, so a folder or
a symbolic link with a segment's name is a stray and ignored. Shared by the partition's writer,
its reader, recovery and ``check``.
"""

from __future__ import annotations

import array
import contextlib
import mmap
import os
import struct
import sys
from typing import Final, NamedTuple

from .._sansio.codec import TIMESTAMP_AT
from .._sansio.entries import INDEX_ENTRY_BYTES, SIDE_COLUMNS, TAG_COLUMN, TIME_COLUMN
from .._sansio.naming import DATA, INDEX, KEYINDEX, TAGINDEX, TIMEINDEX, parse_segment_file, segment_file_name
from .files import open_append, open_read, pread_exact

__all__ = [
    "ABSENT",
    "SegmentFileState",
    "entry_columns",
    "entry_count",
    "fd_state",
    "file_size",
    "index_positions",
    "list_segment_files",
    "open_for_reading",
    "open_writable",
    "record_timestamps",
    "segment_path",
    "timestamps",
]

_TIMESTAMP: Final = struct.Struct("<q")


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


def open_writable(
    directory: str, base_offset: int, *, create: bool, mode: int, key_index: bool, compact: bool
) -> tuple[int, int, int, int | None, int]:
    """Append descriptors of ``.data``, ``.timeindex``, ``.index``, ``.keyindex`` (if kept) and
    ``.tagindex``, created in the order data, timeindex, tagindex, keyindex, index.

    A ``compact`` segment (a compressed stream's) has no ``.timeindex`` (its descriptor is -1), and
    a ``.tagindex`` only from its first tagged message on (-1 until then; ``SegmentWriter`` makes it)."""
    made = [column for column in SIDE_COLUMNS if column.made_with_segment(compact=compact, key_index=key_index)]
    # A compact segment's .tagindex exists from its first tagged message on: opened if it is there.
    later = [column for column in SIDE_COLUMNS if compact and column.from_first_tag and not create]
    opened: dict[str, int] = {}
    try:
        for extension in (DATA, *(column.extension for column in made), INDEX):
            opened[extension] = open_append(segment_path(directory, base_offset, extension), create=create, mode=mode)
        for column in later:
            with contextlib.suppress(FileNotFoundError):
                opened[column.extension] = open_append(
                    segment_path(directory, base_offset, column.extension), create=False
                )
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
        if self.tagindex_file is None:
            return None
        for state, column in ((self.timeindex_file, TIME_COLUMN), (self.tagindex_file, TAG_COLUMN)):
            if state != ABSENT and state[0] != entries * column.width:
                return None
        return entries


def fd_state(fd: int) -> tuple[int, int]:
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


def list_segment_files(directory: str) -> dict[int, set[str]]:
    """Base offset -> extensions present, for every segment file in the folder (strays ignored).

    Only regular files count: a folder or a symlink with a segment's name is a stray (segment
    files are never opened through a symlink).
    """
    segments: dict[int, set[str]] = {}
    with os.scandir(directory) as entries:
        for entry in entries:
            parsed = parse_segment_file(entry.name)
            if parsed is not None and entry.is_file(follow_symlinks=False):
                segments.setdefault(parsed[0], set()).add(parsed[1])
    return segments


def file_size(path: str) -> int:
    """The size of a file, 0 if it is gone."""
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return 0


def entry_count(directory: str, base: int) -> int:
    """Whole entries in a segment's ``.index``: its committed messages (0 once vacuumed)."""
    return file_size(segment_path(directory, base, INDEX)) // INDEX_ENTRY_BYTES


def timestamps(raw: bytes) -> array.array[int]:
    """The timestamps of a ``.timeindex`` buffer."""
    return entry_columns(raw, "q", 2)[1]


def index_positions(directory: str, base: int, entries: int) -> array.array[int]:
    """The data positions of a segment's first ``entries`` index entries."""
    fd = open_read(segment_path(directory, base, INDEX))
    try:
        raw = pread_exact(fd, entries * INDEX_ENTRY_BYTES, 0)
    finally:
        os.close(fd)
    return entry_columns(raw, "Q", 3)[1]


def record_timestamps(directory: str, base: int, first: int, end: int) -> list[int]:
    """The timestamps of a segment's messages numbered ``[first, end)`` from its first, read from
    their records where ``.index`` places them: for the messages a ``.timeindex`` lacks (a compact
    segment keeps none; a producer may still buffer the last entries of one). Like a ``.timeindex``
    entry, a timestamp read here is not checked against its record's CRC. Fewer when an entry
    points past the data or the segment was vacuumed meanwhile. (Only committed records are read,
    and no committed byte is ever cut, so the mapping stays valid.)"""
    if end <= first:
        return []
    try:
        index_fd = open_read(segment_path(directory, base, INDEX))
    except FileNotFoundError:
        return []
    try:
        positions = entry_columns(
            pread_exact(index_fd, (end - first) * INDEX_ENTRY_BYTES, first * INDEX_ENTRY_BYTES), "Q", 3
        )[1]
        data_fd = open_read(segment_path(directory, base, DATA))
    except FileNotFoundError:
        return []
    finally:
        os.close(index_fd)
    try:
        size = os.fstat(data_fd).st_size
        if not positions or not size:
            return []
        last = size - TIMESTAMP_AT - _TIMESTAMP.size  # the last position a timestamp can be read at
        stamps: list[int] = []
        with mmap.mmap(data_fd, size, prot=mmap.PROT_READ) as data:
            unpack = _TIMESTAMP.unpack_from
            for position in positions:
                if position > last:
                    break
                stamps.append(unpack(data, position + TIMESTAMP_AT)[0])
        return stamps
    finally:
        os.close(data_fd)
