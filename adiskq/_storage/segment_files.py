"""A partition folder's segment files: which segments exist, and what their index files hold.

Segments are named by their first offset (``naming.py``); only regular files count, so a folder or
a symbolic link with a segment's name is a stray and ignored. Shared by the partition's writer,
its reader, recovery and ``check``.
"""

from __future__ import annotations

import array
import mmap
import os
import struct
from typing import Final

from .._sansio.codec import TIMESTAMP_AT
from .._sansio.naming import DATA, INDEX, parse_segment_file
from .files import open_read, pread_exact
from .segment import INDEX_ENTRY_BYTES, entry_columns, segment_path

__all__ = ["entry_count", "file_size", "index_positions", "list_segment_files", "record_timestamps", "timestamps"]

_TIMESTAMP: Final = struct.Struct("<q")


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
