"""The key index of a segment (``.keyindex``): which offsets may hold a key, without reading the log.

After RocketMQ's IndexFile, but one per segment and derived from ``.data`` like the other index
files, so recovery can always rebuild it. All integers are little-endian.

**The hash column** (the whole file while the segment is active): one ``u32`` per message, in offset
order, the CRC-32 (zlib's, the ISO-HDLC polynomial) of the message's key bytes. Entry ``i`` belongs
to offset ``base + i``; nothing else is stored. The producer writes a batch's entries beside its
``.index`` entries; single pushes are buffered and written up to 128 at a time, so the column may
lag the ``.index`` by a few entries: readers check the records past its end themselves. Recovery
checks the column against the data and rewrites what disagrees.

**Sealed** (when the segment rolls): the producer appends a sorted column and a trailer, so the
file becomes::

    u32 * n        the hash column (as above)
    u32 * d        sorted column: values (h >> (32 - hash_bits)) << block_bits | block, ascending,
                   where block = entry number >> block_shift: "some message of this block has a
                   key whose hash starts with these bits"
    32 bytes       trailer: 4s magic b"AKX1" | u32 n | u32 d | u8 block_shift | u8 hash_bits |
                   u16 0 | u32 CRC-32C of everything before this field | 12 zero bytes

A lookup of hash ``h`` bisects the sorted column for the blocks that may hold it, then finds ``h``
in those blocks of the hash column (``bytes.find`` at C speed). Where keys repeat within blocks,
blocks are 4,096 entries and the values distinct (one per key and block keeps the column short);
where they mostly do not (judged on a few sample blocks), blocks are 512 entries (an eighth of the
scan) and there is one value per message, duplicates and all (no set to build). Segments of over
2 or 16 million messages get larger blocks, so there are at most 4,096 of them. ``hash_bits +
block_bits`` is 30, so the sort sees only small integers. Building this takes bulk conversions
and ``sorted``: no Python code runs per message.

**Trust.** Every candidate offset is read back and its key compared, so a hash collision or a
damaged index never returns another key's message. A sealed index whose trailer, sizes or CRC-32C
do not agree with its segment is not used: the reader finds the key in the segment's data instead
(correct, slower) and logs a warning; the producer rebuilds a missing or malformed one when it
opens. The CRC is checked once per file and process.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import itertools
import logging
import mmap
import operator
import os
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Final, NamedTuple

from crc32c import crc32c

from .._sansio.codec import KEY_AT, KEY_LENGTH_AT
from .._sansio.naming import KEYINDEX, segment_file_name
from .files import DEFAULT_FILE_MODE, atomic_write, open_read, pread_exact, write_all

__all__ = [
    "ENTRY_BYTES",
    "TAIL_BUFFER_ENTRIES",
    "TRAILER_BYTES",
    "SealedKeyIndex",
    "column_candidates",
    "data_key_hashes",
    "data_key_matches",
    "forget_before",
    "key_hash",
    "pack_hashes",
    "record_key_hashes",
    "seal_column",
    "sealed_index",
    "sealed_problem",
    "sealed_tail",
    "unpack_hashes",
    "write_sealed_file",
]

logger: Final = logging.getLogger("adiskq.keyindex")

# The key hash. A module global looked up at each use (tests replace it to force collisions).
key_hash: Callable[[bytes], int] = zlib.crc32

ENTRY_BYTES: Final = 4
MAGIC: Final = b"AKX1"
TRAILER: Final = struct.Struct("<4sIIBBHI12x")
TRAILER_BYTES: Final = TRAILER.size
_TRAILER_CRC_AT: Final = 16  # the trailer's bytes before the CRC field are covered by it
# Single pushes are buffered and written this many at a time (readers check the rest in the data).
TAIL_BUFFER_ENTRIES: Final = 128
# Blocks of 4,096 messages, or of 512 where one value per message would be needed anyway (mostly
# distinct keys per block): then smaller blocks cost nothing to sort and an eighth to scan.
_LARGE_BLOCK_SHIFT: Final = 12
_SMALL_BLOCK_SHIFT: Final = 9
_SMALL_BLOCKS_FROM: Final = 0.75  # distinct values per message (large blocks) that choose small ones
_MAX_BLOCK_BITS: Final = 12
_SORT_BITS: Final = 30  # small ints: Python compares them fastest
_U32: Final = struct.Struct("<I")
_LITTLE_ENDIAN: Final = sys.byteorder == "little"
_KEY_LEN_AT: Final = KEY_LENGTH_AT  # where a record's u32 key_len is; the key follows it
_KEY_AT: Final = KEY_AT
_key_len_bytes = operator.itemgetter(slice(_KEY_LEN_AT, _KEY_AT))

if array.array("I").itemsize != ENTRY_BYTES:  # pragma: no cover - every platform CPython runs on
    raise ImportError("adiskq's key index needs a 4-byte array typecode 'I'")


# -- the hash column -------------------------------------------------------------------------------


def pack_hashes(hashes: Iterable[int]) -> bytes:
    """Hash column entries for these key hashes."""
    if type(hashes) is list:
        column = array.array("I")
        column.fromlist(hashes)  # ~20% faster than array("I", a_list)
    else:
        column = array.array("I", hashes)
    if not _LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts
        column.byteswap()
    return column.tobytes()


def unpack_hashes(raw: bytes | memoryview) -> array.array[int]:
    """The key hashes of a hash column (whole entries only)."""
    column = array.array("I")
    column.frombytes(raw[: len(raw) - len(raw) % ENTRY_BYTES])
    if not _LITTLE_ENDIAN:  # pragma: no cover - big-endian hosts
        column.byteswap()
    return column


def record_key_hashes(records: Sequence[bytes]) -> list[int]:
    """The key hashes of encoded records, cut from the records (for writers that did not hash keys).

    Records with keys of one length (the common case) are cut by one ``itemgetter`` in C.
    """
    if not records:
        return []
    lengths = set(map(_key_len_bytes, records))
    if len(lengths) == 1:
        (raw,) = lengths
        key_of = operator.itemgetter(slice(_KEY_AT, _KEY_AT + int.from_bytes(raw, "little")))
        return list(map(key_hash, map(key_of, records)))
    return [key_hash(r[_KEY_AT : _KEY_AT + int.from_bytes(r[_KEY_LEN_AT:_KEY_AT], "little")]) for r in records]


def data_key_hashes(data: bytes, positions: Iterable[int]) -> list[int]:
    """The key hashes of the records at these positions of a ``.data`` buffer."""
    starts = list(map(operator.add, positions, itertools.repeat(_KEY_AT)))
    lengths = map(
        operator.itemgetter(0),
        map(_U32.unpack_from, itertools.repeat(data), map(operator.sub, starts, itertools.repeat(4))),
    )
    keys = map(data.__getitem__, map(slice, starts, map(operator.add, starts, lengths)))
    return list(map(key_hash, keys))


def data_key_matches(data: bytes, positions: Sequence[int], key: bytes, *, origin: int = 0) -> list[int]:
    """Which of the records at ``positions`` (ascending, counted from ``origin``, where ``data``
    starts) have the key ``key``: their numbers in ``positions``.

    The search without an index: ``bytes.find`` looks for the key's length field followed by the
    key, at C speed; a hit counts only where a record starts just before it.
    """
    needle = _U32.pack(len(key)) + key
    found: list[int] = []
    hit = data.find(needle)
    while hit >= 0:
        start = origin + hit - _KEY_LEN_AT
        record = bisect.bisect_left(positions, start)
        if record < len(positions) and positions[record] == start:
            found.append(record)
        hit = data.find(needle, hit + 1)
    return found


def _aligned_matches(buffer: bytes | mmap.mmap, needle: bytes, start: int, end: int) -> list[int]:
    """Entry numbers in ``[start, end)`` (byte positions, multiples of 4) whose entry is ``needle``."""
    found: list[int] = []
    position = buffer.find(needle, start, end)
    while position >= 0:
        if position % ENTRY_BYTES:
            position = buffer.find(needle, position + 1, end)
        else:
            found.append(position // ENTRY_BYTES)
            position = buffer.find(needle, position + ENTRY_BYTES, end)
    return found


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
    return _aligned_matches(raw, _U32.pack(hash_value), 0, covered * ENTRY_BYTES), covered


# -- sealing ---------------------------------------------------------------------------------------


class _Layout(NamedTuple):
    block_shift: int
    block_bits: int
    hash_bits: int


def _layout(entry_count: int, block_shift: int) -> _Layout:
    """The value layout of the sorted column for a segment of ``entry_count`` messages in blocks of
    at least ``1 << block_shift`` (more where there would be over 4,096 blocks)."""
    while (max(entry_count - 1, 0) >> block_shift) >= 1 << _MAX_BLOCK_BITS:
        block_shift += 1
    blocks = (max(entry_count - 1, 0) >> block_shift) + 1
    block_bits = (blocks - 1).bit_length()
    return _Layout(block_shift, block_bits, _SORT_BITS - block_bits)


def _valid_layouts(entry_count: int) -> tuple[_Layout, ...]:
    return (_layout(entry_count, _LARGE_BLOCK_SHIFT), _layout(entry_count, _SMALL_BLOCK_SHIFT))


def _lanes(value: int, count: int) -> int:
    """An integer of ``count`` 32-bit lanes (little-endian), each holding ``value``."""
    return int.from_bytes(_U32.pack(value) * count, "little")


def _values(column: bytes, layout: _Layout) -> array.array[int]:
    """The sorted-column value of each entry of a hash column, in the given layout.

    Every message's value is computed on the whole column at once, as one big integer of 32-bit
    lanes: shift the hash bits down, mask each lane, move them up past the block bits and add each
    entry's block number. No lane overflows (hash_bits + block_bits = 30).
    """
    count = len(column) // ENTRY_BYTES
    lanes = int.from_bytes(column, "little") >> (32 - layout.hash_bits)
    lanes &= _lanes((1 << layout.hash_bits) - 1, count)
    if layout.block_bits:
        lanes <<= layout.block_bits
        block_size = 1 << layout.block_shift
        blocks = b"".join(
            _U32.pack(block) * min(block_size, count - (block << layout.block_shift))
            for block in range((count + block_size - 1) // block_size)
        )
        lanes |= int.from_bytes(blocks, "little")
    return unpack_hashes(lanes.to_bytes(count * ENTRY_BYTES, "little"))


def _mostly_distinct(column: bytes) -> bool:
    """True when keys seldom repeat within a large block, judged on a few sample blocks."""
    count = len(column) // ENTRY_BYTES
    size = 1 << _LARGE_BLOCK_SHIFT
    starts = sorted({0, max(0, count // 2 - size // 2), max(0, count - size)})
    samples = [unpack_hashes(column[start * ENTRY_BYTES : (start + size) * ENTRY_BYTES]) for start in starts]
    return sum(map(len, map(set, samples))) > _SMALL_BLOCKS_FROM * sum(map(len, samples))


def sealed_tail(column: bytes) -> bytes:
    """The sorted column and trailer that seal a hash column of whole entries."""
    count = len(column) // ENTRY_BYTES
    large, small = _valid_layouts(count)
    if small != large and _mostly_distinct(column):
        # One value per message: no set to build (a repeated value only costs a longer scan).
        layout = small
        ordered = sorted(_values(column, small))
    else:
        layout = large
        ordered = sorted(set(_values(column, large)))
    sorted_column = pack_hashes(ordered)
    head = TRAILER.pack(MAGIC, count, len(ordered), layout.block_shift, layout.hash_bits, 0, 0)[:_TRAILER_CRC_AT]
    checksum = crc32c(head, crc32c(sorted_column, crc32c(column)))
    return sorted_column + TRAILER.pack(MAGIC, count, len(ordered), layout.block_shift, layout.hash_bits, 0, checksum)


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


def _trailer_problem(trailer: tuple[bytes, int, int, int, int, int, int], size: int, entry_count: int) -> str | None:
    magic, count, values, block_shift, hash_bits, reserved, _ = trailer
    if magic != MAGIC:
        return "it is not sealed (no trailer)"
    if count != entry_count:
        return f"it covers {count} messages, the segment has {entry_count}"
    layouts = [(layout.block_shift, layout.hash_bits) for layout in _valid_layouts(count)]
    if (block_shift, hash_bits) not in layouts or reserved or values > count:
        return "its trailer is damaged"
    if size != (count + values) * ENTRY_BYTES + TRAILER_BYTES:
        return f"it is {size} bytes, its trailer says {(count + values) * ENTRY_BYTES + TRAILER_BYTES}"
    return None


def _checksum_of(buffer: bytes | mmap.mmap, size: int) -> int:
    with memoryview(buffer) as view:
        body = view[: size - TRAILER_BYTES + _TRAILER_CRC_AT]
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
        problem = _trailer_problem(trailer, size, entry_count)
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
        self._layout = _layout(entry_count, block_shift)

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
        problem = _trailer_problem(trailer, size, entry_count)
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
            found += _aligned_matches(self._buffer, needle, first * ENTRY_BYTES, end * ENTRY_BYTES)
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
