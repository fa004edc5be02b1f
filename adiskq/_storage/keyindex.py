"""The key index files of a segment (``.keyindex``): sealing one at a roll, and reading one.

The format (the hash column, the sealed form and its trailer, and why a lookup can trust it) is
written in ``adiskq._sansio.keyindex``, beside the code that makes and parses it; this module does
the I/O: it seals a column on disk, rewrites a sealed file atomically, checks one (trailer, sizes,
CRC-32C) and maps one for lookups, never cutting a file a reader may have mapped.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import mmap
import os
import struct
import sys
import threading
from typing import Final

from .._sansio.core import crc32c
from .._sansio.keyindex import (
    ENTRY_BYTES,
    TRAILER,
    TRAILER_BYTES,
    TRAILER_CRC_AT,
    aligned_matches,
    layout,
    sealed_tail,
    trailer_problem,
    unpack_hashes,
)
from .._sansio.naming import KEYINDEX, segment_file_name
from .files import DEFAULT_FILE_MODE, atomic_write, open_read, pread_exact, write_all

__all__ = [
    "SealedKeyIndex",
    "column_candidates",
    "forget_before",
    "seal_column",
    "sealed_index",
    "sealed_problem",
    "write_sealed_file",
]

logger: Final = logging.getLogger("adiskq.keyindex")
_U32: Final = struct.Struct("<I")
_LITTLE_ENDIAN: Final = sys.byteorder == "little"


def column_candidates(path: str, entry_count: int, hash_value: int) -> tuple[list[int], int]:
    """Entry numbers among the first ``entry_count`` of a hash column whose hash is ``hash_value``,
    and how many entries the column covers (the records past them are not indexed yet).

    Reads the column with ``pread``, never ``mmap``: an active segment's file may be cut back.
    """
    try:
        fd = open_read(path)
    except FileNotFoundError:
        return [], 0
    try:
        raw = pread_exact(fd, entry_count * ENTRY_BYTES, 0)
    finally:
        os.close(fd)
    covered = len(raw) // ENTRY_BYTES
    return aligned_matches(raw, _U32.pack(hash_value), 0, covered * ENTRY_BYTES), covered


def seal_column(fd: int, path: str, entry_count: int) -> None:
    """Seal the hash column at ``path``, open for appending at ``fd``, which must hold
    ``entry_count`` entries.

    Anything past the entries (a seal that failed half-way) is cut first; on failure the file is
    cut back to the bare column, which readers and the next producer treat as unsealed. A file that
    is already sealed for these entries (a roll retried after its seal succeeded and a later step
    failed) is left as it is: readers may have it mapped, and cutting it under them would kill them
    with SIGBUS.
    """
    size = entry_count * ENTRY_BYTES
    reader = open_read(path)
    try:
        whole = pread_exact(reader, os.fstat(reader).st_size, 0)
    finally:
        os.close(reader)
    column = whole[:size]
    if len(column) != size:
        raise ValueError(f"the key index {path} holds {len(column) // ENTRY_BYTES} entries, not {entry_count}")
    tail = sealed_tail(column)
    if whole[size:] == tail:
        os.fsync(fd)
        return
    os.ftruncate(fd, size)
    try:
        write_all(fd, tail)
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


def write_sealed_file(path: str, column: bytes, *, mode: int = DEFAULT_FILE_MODE) -> None:
    """Replace ``path`` with a sealed key index of ``column``, durably.

    Written to a temporary file and renamed over the old one, so a reader that has the old file
    mapped keeps reading it (it is never cut under a mapping).
    """
    atomic_write(path, column + sealed_tail(column), mode=mode)


# -- reading a sealed index ------------------------------------------------------------------------

_Identity = tuple[int, int, int, int]  # device, inode, size, modification time (ns)


def _checksum_of(buffer: bytes | mmap.mmap, size: int) -> int:
    with memoryview(buffer) as view:
        body = view[: size - TRAILER_BYTES + TRAILER_CRC_AT]
        try:
            return int(crc32c(body))
        finally:
            body.release()


def _open_sealed(path: str) -> tuple[int, int] | str:
    """An open descriptor and the size of a sealed key index, or why it cannot be one (the
    caller closes the descriptor)."""
    try:
        fd = open_read(path)
    except FileNotFoundError:
        return "it is missing"
    try:
        size = os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise
    if size < TRAILER_BYTES:
        os.close(fd)
        return "it is not sealed (no trailer)"
    return fd, size


def sealed_problem(path: str, entry_count: int, *, check_crc: bool) -> str | None:
    """Why the sealed key index at ``path`` cannot be used for a segment of ``entry_count``
    messages, or None if it can. Without ``check_crc`` only the trailer and sizes are checked."""
    opened = _open_sealed(path)
    if isinstance(opened, str):
        return opened
    fd, size = opened
    try:
        trailer = TRAILER.unpack(pread_exact(fd, TRAILER_BYTES, size - TRAILER_BYTES))
        problem = trailer_problem(trailer, size, entry_count)
        if problem is None and check_crc and _checksum_of(pread_exact(fd, size, 0), size) != trailer[6]:
            problem = "its CRC-32C does not match"
        return problem
    finally:
        os.close(fd)


def _blocks_in_range(section: memoryview, low_value: int, high_value: int) -> list[int]:
    """The values of a sorted column (bytes) in ``[low_value, high_value)``, found by bisection."""
    if not _LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts
        swapped = unpack_hashes(section.tobytes())
        low = bisect.bisect_left(swapped, low_value)
        return swapped[low : bisect.bisect_left(swapped, high_value, low)].tolist()
    with section.cast("I") as values:
        low = bisect.bisect_left(values, low_value)
        return values[low : bisect.bisect_left(values, high_value, low)].tolist()


class SealedKeyIndex:
    """A sealed key index, mapped read-only and checked (trailer, sizes, CRC-32C).

    ``sealed_index`` shares one per file among all lookups of the process: a sealed file is never
    changed in place (a rebuild replaces it), and a mapping stays readable after vacuum unlinks the
    file. The mapping is released when the last reference goes.
    """

    def __init__(self, buffer: mmap.mmap, entry_count: int, value_count: int, block_shift: int) -> None:
        self._buffer = buffer
        self.entry_count = entry_count
        self._value_count = value_count
        self._layout = layout(entry_count, block_shift)

    @classmethod
    def map(cls, path: str, entry_count: int) -> SealedKeyIndex | str:
        """The sealed key index at ``path`` of a segment of ``entry_count`` messages, or why it
        cannot be used."""
        opened = _open_sealed(path)
        if isinstance(opened, str):
            return opened
        fd, size = opened
        try:
            buffer = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        trailer = TRAILER.unpack_from(buffer, size - TRAILER_BYTES)
        problem = trailer_problem(trailer, size, entry_count)
        if problem is None and _checksum_of(buffer, size) != trailer[6]:
            problem = "its CRC-32C does not match"
        if problem is not None:
            buffer.close()
            return problem
        return cls(buffer, entry_count, trailer[2], trailer[3])

    def candidates(self, hash_value: int) -> list[int]:
        """Entry numbers (ascending) whose key hash is ``hash_value``."""
        layout = self._layout
        count = self.entry_count
        bucket = hash_value >> (32 - layout.hash_bits)
        start = count * ENTRY_BYTES
        with memoryview(self._buffer) as view, view[start : start + self._value_count * ENTRY_BYTES] as section:
            blocks = _blocks_in_range(section, bucket << layout.block_bits, (bucket + 1) << layout.block_bits)
        block_mask = (1 << layout.block_bits) - 1
        needle = _U32.pack(hash_value)
        found: list[int] = []
        for block in dict.fromkeys(value & block_mask for value in blocks):  # in order, once each
            first = block << layout.block_shift
            end = min(count, first + (1 << layout.block_shift))
            found += aligned_matches(self._buffer, needle, first * ENTRY_BYTES, end * ENTRY_BYTES)
        return found


# The sealed key indexes this process has mapped (or found unusable), by folder and segment.
_cache_lock: Final = threading.Lock()
_cache: dict[str, dict[int, tuple[_Identity, SealedKeyIndex | str]]] = {}
_CACHE_FOLDERS: Final = 64
_warned: set[_Identity] = set()


def sealed_index(directory: str, base_offset: int, entry_count: int) -> SealedKeyIndex | None:
    """The sealed key index of a segment of ``entry_count`` messages, or None if it is missing or
    cannot be trusted (then a warning is logged, once per file): the caller searches the data.

    Each file is mapped and its CRC checked once per process while it stays the same file (same
    inode, size and time); ``forget_before`` lets go of vacuumed ones.
    """
    path = os.path.join(directory, segment_file_name(base_offset, KEYINDEX))
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)
    with _cache_lock:
        cached = _cache.get(directory, {}).get(base_offset)
    if cached is not None and cached[0] == identity:
        index = cached[1]
    else:
        index = SealedKeyIndex.map(path, entry_count)
        with _cache_lock:
            if directory not in _cache and len(_cache) >= _CACHE_FOLDERS:
                del _cache[next(iter(_cache))]
            _cache.setdefault(directory, {})[base_offset] = (identity, index)
    if isinstance(index, SealedKeyIndex) and index.entry_count != entry_count:
        index = f"it covers {index.entry_count} messages, the segment has {entry_count}"
    if isinstance(index, str):
        _warn_once(path, identity, index)
        return None
    return index


def forget_before(directory: str, oldest_base: int) -> None:
    """Let go of the mappings of a folder's segments older than ``oldest_base`` (vacuumed)."""
    with _cache_lock:
        segments = _cache.get(directory)
        if segments:
            for base in [base for base in segments if base < oldest_base]:
                del segments[base]


def _warn_once(path: str, identity: _Identity, problem: str) -> None:
    with _cache_lock:
        first = identity not in _warned
        if first:
            if len(_warned) >= 4096:
                _warned.clear()
            _warned.add(identity)
    if first:
        logger.warning(
            "adiskq: key index %s is not used (%s); lookups search that segment's data instead, which is "
            "slower. Delete the file: the next Producer opened on the stream rebuilds it.",
            path,
            problem,
        )
