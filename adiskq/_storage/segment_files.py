"""A partition folder's segment files: which segments exist, and what their index files hold.

Segments are named by their first offset (``naming.py``); only regular files count, so a folder or
a symbolic link with a segment's name is a stray and ignored. Shared by the partition's writer,
its reader, recovery and ``check``.
"""

from __future__ import annotations

import array
import os

from .._sansio.naming import INDEX, parse_segment_file
from .files import open_read, pread_exact
from .segment import INDEX_ENTRY_BYTES, entry_columns, segment_path

__all__ = ["entry_count", "file_size", "index_positions", "list_segment_files", "timestamps"]


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
