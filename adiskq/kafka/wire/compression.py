"""The compression codecs of Kafka's record batches, through libraries, with the output bounded.

gzip through the standard library's zlib; snappy, lz4 and zstd through cramjam (Rust bindings of
the reference implementations, one wheel, no system libraries). Nothing here compresses or
decompresses by hand: what is written here is only the containers Kafka's clients put the codecs in.

- gzip (1): one or more gzip members (RFC 1952).
- snappy (2): the Java client and kafka-python send snappy-java's "xerial" framing — the 8 bytes
  ``\\x82SNAPPY\\x00``, i32 version, i32 compatible version, then blocks of (i32 length, raw snappy
  block), big-endian; librdkafka sends one raw snappy block. Both are read; xerial is written, as the
  Java client writes it (blocks of 32 KiB before compression).
- lz4 (3): an LZ4 frame. Written with independent blocks, which every client's reader takes.
- zstd (4): a zstd frame.

Every decompression is bounded: past ``limit`` bytes of output it stops with ``DecompressionError``
and never holds more than about that much memory — a decompression bomb costs a bounded amount of
work. The formats that state their decompressed size up front (raw snappy blocks) are checked before
any work is done.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

import cramjam

__all__ = ["GZIP", "LZ4", "NONE", "SNAPPY", "ZSTD", "DecompressionError", "compress", "decompress"]

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
NAMES: Final = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version
_XERIAL_VERSION: Final = 1
_XERIAL_BLOCK_BYTES: Final = 32 * 1024
_I32 = struct.Struct(">i")
# cramjam's message when the output buffer fills before the input is used up (Rust's WriteZero).
_OUTPUT_FULL: Final = "failed to write whole buffer"
_FIRST_GUESS_RATIO: Final = 8
_MIN_FIRST_GUESS: Final = 64 * 1024


class DecompressionError(ValueError):
    """Compressed records that do not decompress, or decompress to more than the limit allows."""


def _too_large(name: str, limit: int) -> DecompressionError:
    return DecompressionError(f"its {name} records decompress to more than the {limit} bytes allowed")


def _gzip(data: bytes, limit: int) -> bytes:
    out: list[bytes] = []
    total = 0
    rest = data
    while rest:
        member = zlib.decompressobj(wbits=31)
        try:
            chunk = member.decompress(rest, limit + 1 - total)
        except zlib.error as error:
            raise DecompressionError(f"its gzip records do not decompress: {error}") from None
        total += len(chunk)
        if total > limit:
            raise _too_large("gzip", limit)
        out.append(chunk)
        if not member.eof:
            if member.unconsumed_tail:  # stopped at the limit with input left: it would be larger
                raise _too_large("gzip", limit)
            raise DecompressionError("its gzip records end inside a gzip member")
        rest = member.unused_data
    return b"".join(out)


def _raw_snappy(block: bytes, room: int, limit: int) -> bytes:
    """One raw snappy block, refused before any work when its stated size is above ``room``."""
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as error:
        raise DecompressionError(f"its snappy records do not decompress: {error}") from None
    if size > room:
        raise _too_large("snappy", limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as error:
        raise DecompressionError(f"its snappy records do not decompress: {error}") from None


def _snappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _raw_snappy(data, limit, limit)
    if len(data) < _XERIAL_HEADER.size:
        raise DecompressionError("its snappy records end inside the xerial header")
    out: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER.size
    while pos < len(data):
        if len(data) - pos < 4:
            raise DecompressionError("its snappy records end inside a xerial block's length")
        (length,) = _I32.unpack_from(data, pos)
        pos += 4
        if length < 0 or length > len(data) - pos:
            raise DecompressionError(f"a xerial snappy block of {length} bytes overruns the records")
        block = _raw_snappy(data[pos : pos + length], limit - total, limit)
        total += len(block)
        out.append(block)
        pos += length
    return b"".join(out)


def _bounded(name: str, decompress_into: object, data: bytes, limit: int) -> bytes:
    """Decompress into a buffer of a guessed size, four times larger on each try, never above
    ``limit + 1`` bytes: output that fills that much is over the limit."""
    size = min(limit + 1, max(_MIN_FIRST_GUESS, _FIRST_GUESS_RATIO * len(data)))
    while True:
        out = bytearray(size)
        try:
            written: int = decompress_into(data, out)  # type: ignore[operator]
        except cramjam.DecompressionError as error:
            if _OUTPUT_FULL not in str(error):
                raise DecompressionError(f"its {name} records do not decompress: {error}") from None
            if size > limit:
                raise _too_large(name, limit) from None
            size = min(limit + 1, size * 4)
            continue
        if written > limit:
            raise _too_large(name, limit)
        return bytes(memoryview(out)[:written])


def decompress(codec: int, data: bytes, limit: int) -> bytes:
    """The records a batch's ``codec`` compressed, at most ``limit`` bytes of them."""
    if codec == GZIP:
        return _gzip(data, limit)
    if codec == SNAPPY:
        return _snappy(data, limit)
    if codec == LZ4:
        return _bounded("lz4", cramjam.lz4.decompress_into, data, limit)
    if codec == ZSTD:
        return _bounded("zstd", cramjam.zstd.decompress_into, data, limit)
    raise ValueError(f"compression codec {codec} is not one Kafka defines")


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as a batch's ``codec`` says (gzip, xerial snappy, lz4 frame, zstd)."""
    if codec == GZIP:
        compressor = zlib.compressobj(wbits=31)
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION)]
        for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK_BYTES]))
            parts.append(_I32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == LZ4:
        # Independent blocks: the Java client's reader decompresses each block on its own.
        lz4 = cramjam.lz4.Compressor(block_linked=False)
        lz4.compress(data)
        return bytes(lz4.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"compression codec {codec} is not one Kafka defines")
