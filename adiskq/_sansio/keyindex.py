"""The key index format (``.keyindex``): which offsets may hold a key, without reading the log. No I/O.

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
block_bits`` is 30, so the values are small integers: the compiled core sorts them in three
counting passes of 10 bits (``adiskq/_csrc/log/keyindex.c``), the reference with bulk conversions and
``sorted`` (no Python code runs per message).

**Trust.** Every candidate offset is read back and its key compared, so a hash collision or a
damaged index never returns another key's message. A sealed index whose trailer, sizes or CRC-32C
do not agree with its segment is not used: the reader finds the key in the segment's data instead
(correct, slower) and logs a warning; the producer rebuilds a missing or malformed one when it
opens. The CRC is checked once per file and process.
"""

from __future__ import annotations

import array
import bisect
import itertools
import operator
import struct
import sys
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

if TYPE_CHECKING:
    import mmap

from .codec import KEY_AT, KEY_LENGTH_AT
from .core import crc32c, raw_sorted_key_values
from .entries import KEY_ENTRY_BYTES

# What the searches take: bytes, or a sealed file mapped into memory.
Buffer: TypeAlias = "bytes | mmap.mmap"

__all__ = [
    "ENTRY_BYTES",
    "MAGIC",
    "TRAILER",
    "TRAILER_BYTES",
    "TRAILER_CRC_AT",
    "Layout",
    "aligned_matches",
    "data_key_hashes",
    "data_key_matches",
    "key_hash",
    "layout",
    "pack_hashes",
    "record_key_hashes",
    "sealed_tail",
    "trailer_problem",
    "unpack_hashes",
]

# The key hash. A module global looked up at each use (tests replace it to force collisions).
key_hash: Callable[[bytes], int] = zlib.crc32

ENTRY_BYTES: Final = KEY_ENTRY_BYTES
MAGIC: Final = b"AKX1"
TRAILER: Final = struct.Struct("<4sIIBBHI12x")
TRAILER_BYTES: Final = TRAILER.size
TRAILER_CRC_AT: Final = 16  # the trailer's bytes before the CRC field are covered by it
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
    if type(hashes) is array.array and hashes.typecode == "I":  # the compiled encoder's: the column already
        column = hashes if _LITTLE_ENDIAN else array.array("I", hashes)  # a copy to byteswap, not the caller's
    elif type(hashes) is list:
        column = array.array("I")
        column.fromlist(hashes)  # faster than array("I", a_list): RESULTS.md, F15
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


def aligned_matches(buffer: Buffer, needle: bytes, start: int, end: int) -> list[int]:
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


# -- the sealed form ---------------------------------------------------------------------------------------


class Layout(NamedTuple):
    block_shift: int
    block_bits: int
    hash_bits: int


def layout(entry_count: int, block_shift: int) -> Layout:
    """The value layout of the sorted column for a segment of ``entry_count`` messages in blocks of
    at least ``1 << block_shift`` (more where there would be over 4,096 blocks)."""
    while (max(entry_count - 1, 0) >> block_shift) >= 1 << _MAX_BLOCK_BITS:
        block_shift += 1
    blocks = (max(entry_count - 1, 0) >> block_shift) + 1
    block_bits = (blocks - 1).bit_length()
    return Layout(block_shift, block_bits, _SORT_BITS - block_bits)


def _valid_layouts(entry_count: int) -> tuple[Layout, ...]:
    return (layout(entry_count, _LARGE_BLOCK_SHIFT), layout(entry_count, _SMALL_BLOCK_SHIFT))


def _lanes(value: int, count: int) -> int:
    """An integer of ``count`` 32-bit lanes (little-endian), each holding ``value``."""
    return int.from_bytes(_U32.pack(value) * count, "little")


def _values(column: bytes, layout: Layout) -> array.array[int]:
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
        layout, unique = small, False
    else:
        layout, unique = large, True
    sorted_column = sorted_values(column, layout, unique)
    values = len(sorted_column) // ENTRY_BYTES
    head = TRAILER.pack(MAGIC, count, values, layout.block_shift, layout.hash_bits, 0, 0)[:TRAILER_CRC_AT]
    checksum = crc32c(head, crc32c(sorted_column, crc32c(column)))
    return sorted_column + TRAILER.pack(MAGIC, count, values, layout.block_shift, layout.hash_bits, 0, checksum)


def sorted_values(column: bytes, layout: Layout, unique: bool) -> bytes:
    """The sorted column of a hash column: every entry's value in ascending order (each value once
    when ``unique``), packed. A radix sort in the compiled core (``log/keyindex.c``), or the reference."""
    if raw_sorted_key_values is not None:
        packed = raw_sorted_key_values(column, layout.hash_bits, layout.block_bits, layout.block_shift, unique)
        if isinstance(packed, bytes):  # else NotImplemented: a layout outside the format
            return packed
    return reference_sorted_values(column, layout, unique)


def reference_sorted_values(column: bytes, layout: Layout, unique: bool) -> bytes:
    """``sorted_values`` by bulk conversions and ``sorted``: no Python code runs per message."""
    values = _values(column, layout)
    return pack_hashes(sorted(set(values)) if unique else sorted(values))


def trailer_problem(trailer: tuple[bytes, int, int, int, int, int, int], size: int, entry_count: int) -> str | None:
    """Why a sealed file of ``size`` bytes with this (unpacked) trailer is not the key index of a
    segment of ``entry_count`` messages, or None if it may be (its CRC-32C is checked apart)."""
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
