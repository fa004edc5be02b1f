"""Arrow record batches straight from raw runs of records: the Spark reader's hot path.

A run's records lie back to back in one buffer, so every column is built with a handful of
vectorised operations instead of one Python object per record:

- the fixed fields (size, CRC, magic, timestamp, key length) are gathered with numpy;
- ``key`` and ``value`` are Arrow *binary views* pointing into the buffer (16 bytes per row, made
  with numpy), which Arrow's C++ cast turns into ordinary ``binary`` arrays in one copy;
- headers, which most records lack, are decoded one record at a time for the records that have them;
- a run whose records all have one size and one key length and no headers (fixed-size keys and
  values: common, and the benchmark's case) needs no index arrays at all: every field lies at a
  fixed stride, and each column is one strided copy.

CRC-32C is checked for every record without a Python call per record. For each record the buffer
``body ‖ crc ‖ U`` is formed (``body`` is what the CRC covers, ``crc`` the stored value, little
endian, and ``U`` the constant below); for any body, CRC-32C over ``body ‖ crc32c(body)`` leaves a
fixed state, and ``U`` takes that state back to the initial one. So the CRC-32C of all these
buffers laid end to end (one Arrow cast or one strided copy, and one ``crc32c`` call) is 0 exactly
when every stored CRC matches, except that damage in two or more records can cancel out with
probability 2**-32. A single damaged record is always caught, because each record's error is
carried to the end multiplied by a power of x, which is never 0 modulo the CRC polynomial. On any
mismatch, and on any other inconsistency, the run is decoded again by the reference decoder
(``decode_messages``), which checks each record on its own and raises ``CorruptRecordError`` with
the file and byte position of the bad one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from .._errors import CorruptRecordError
from .._sansio.codec import (
    ATTRIBUTES_AT,
    KEY_AT,
    KEY_LENGTH_AT,
    KEYLESS,
    MAGIC_V1,
    MIN_RECORD_BYTES,
    NEED_MORE,
    TIMESTAMP_AT,
    TRANSACTIONAL,
    TransactionalBatch,
    decode_record,
)
from .._sansio.compression import COMPRESSED, Dictionaries
from .._sansio.core import crc32c, decode_messages
from .._sansio.values import Message
from .._storage.columns import RawRun
from .._storage.transaction_outcomes import TransactionOutcomes, committed

_NOT_PLAIN: Final = 0xFF ^ KEYLESS  # attributes bits that are not the uniform path's

__all__ = ["ARROW_SCHEMA", "CRC_RESET", "HEADERS_TYPE", "TransactionOpenError", "messages_to_batch", "run_to_batch"]


class TransactionOpenError(RuntimeError):
    """A Spark read planned past the first record of a Kafka transaction still open."""


HEADERS_TYPE: Final = pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary()))
ARROW_SCHEMA: Final = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADERS_TYPE),
        pa.field("tag", pa.string()),
    ]
)

# CRC-32C over ``body ‖ LE32(crc32c(body)) ‖ LE32(CRC_RESET)`` is 0 for every body (see the docstring).
CRC_RESET: Final = 0xD387D06C

# size u32 @0, crc u32 @4, magic u8 @8, attributes u8 @9, timestamp_ns i64 @10, key_len u32 @18
_FIXED_BYTES: Final = KEY_AT
_CRC_RESET_BYTES: Final = np.frombuffer(CRC_RESET.to_bytes(4, "little"), np.uint8)
_INLINE_MAX: Final = 12  # binary views hold up to 12 bytes inline
_BYTE_MASKS: Final = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], np.uint32)  # keep the first n bytes

_I64 = npt.NDArray[np.int64]


class _Inconsistent(Exception):
    """The fast path found something off; the reference decoder decides what it is."""


def _words(buffer: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """Little-endian u32 at every byte position (an unaligned, overlapping view: no copy)."""
    return np.ndarray((len(buffer) - 3,), "<u4", buffer, 0, (1,))


def _views(
    buffer: npt.NDArray[np.uint8], words: npt.NDArray[np.uint32], starts: _I64, lengths: _I64
) -> npt.NDArray[np.uint32]:
    """Arrow binary-view structs for the slices: (length, prefix, buffer 0, offset), or for a slice
    of at most 12 bytes (length, its bytes inline, zero-padded)."""
    views = np.empty((len(starts), 4), np.uint32)
    views[:, 0] = lengths
    long = lengths > _INLINE_MAX
    if long.all():
        views[:, 1] = words[starts]
        views[:, 2] = 0
        views[:, 3] = starts
        return views
    # Every row as if inline: three little-endian words, each masked to the bytes the slice has.
    last_word = len(words) - 1
    for word in range(3):
        at = starts + 4 * word
        np.minimum(at, last_word, out=at)
        views[:, 1 + word] = words[at] & _BYTE_MASKS[np.clip(lengths - 4 * word, 0, 4)]
    # A short slice within 12 bytes of the buffer's end was read from a clamped position: redo it.
    end = len(buffer)
    for row in np.flatnonzero((starts + _INLINE_MAX > end) & ~long).tolist():
        start, length = int(starts[row]), int(lengths[row])
        inline = np.zeros(_INLINE_MAX, np.uint8)
        inline[:length] = buffer[start : start + length]
        views[row, 1:4] = inline.view("<u4")
    if long.any():
        views[long, 2] = 0  # word 1 already holds the 4-byte prefix
        views[long, 3] = starts[long]
    return views


def _binary(views: npt.NDArray[np.uint32], data: pa.Buffer, count: int) -> pa.Array:
    """A ``binary`` array with the slices the views describe (one C++ copy)."""
    array = pa.Array.from_buffers(pa.binary_view(), count, [None, pa.py_buffer(views), data])
    return array.cast(pa.binary())


def _check_crcs(
    words: npt.NDArray[np.uint32], data: pa.Buffer, rel: _I64, sizes: _I64, stored: npt.NDArray[np.uint32]
) -> bool:
    """True when every record's stored CRC matches its bytes (see the module docstring)."""
    count = len(rel)
    views = np.empty((count, 2, 4), np.uint32)
    body = views[:, 0]
    body[:, 0] = sizes - 8
    body[:, 1] = words[rel + 8]
    body[:, 2] = 0
    body[:, 3] = rel + 8
    tail = views[:, 1]
    tail[:, 0] = 8
    tail[:, 1] = stored
    tail[:, 2] = CRC_RESET
    tail[:, 3] = 0
    chained = _binary(views.reshape(2 * count, 4), data, 2 * count)
    offsets_buffer, values_buffer = chained.buffers()[1:3]
    first, last = np.frombuffer(offsets_buffer, np.int32, 2 * count + 1, chained.offset * 4)[[0, -1]]
    return bool(crc32c(memoryview(values_buffer)[first:last]) == 0)


def _headers_array(count: int, rows: Sequence[int], headers: Sequence[dict[str, bytes]]) -> pa.Array:
    """The ``headers`` column: empty maps except at ``rows``."""
    lengths = np.zeros(count, np.int32)
    names: list[str] = []
    values: list[bytes] = []
    for row, row_headers in zip(rows, headers, strict=True):
        lengths[row] = len(row_headers)
        names.extend(row_headers)
        values.extend(row_headers.values())
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.array(offsets), pa.array(names, pa.string()), pa.array(values, pa.binary()), type=HEADERS_TYPE
    )


def run_to_batch(
    run: RawRun,
    *,
    max_record_bytes: int,
    dictionaries: Dictionaries | None = None,
    outcomes: TransactionOutcomes | None = None,
) -> pa.RecordBatch:
    """The run as a record batch of ``ARROW_SCHEMA``, every record checked (size, magic, CRC), the
    values of compressed records decompressed with the stream's ``dictionaries``. Of a Kafka
    transaction's records only the committed ones are rows, as ``outcomes`` (the partition's) says;
    a record of a transaction still open raises ``TransactionOpenError``: the planned range reaches
    past what a reader may be given yet."""
    try:
        return _fast_batch(run, max_record_bytes)
    except _Inconsistent:
        pass
    # The reference decoder names the bad record; if it finds none, its reading is the one we trust.
    try:
        messages = decode_messages(
            bytes(run.data),
            run.partition,
            run.first_offset,
            run.message_count,
            max_record_bytes=max_record_bytes,
            dictionaries=dictionaries,
        )
    except CorruptRecordError as error:
        raise error.with_path(run.data_path, run.data_position) from None
    if type(messages) is TransactionalBatch:
        if outcomes is None:
            raise ValueError("run_to_batch: a run holding a Kafka transaction's records needs its partition's outcomes")
        delivered, passed = committed(messages, outcomes)
        if passed < len(messages):
            offset = messages[passed].offset
            raise TransactionOpenError(
                f"offset {offset} of partition {run.partition} is a record of a Kafka transaction still open, and the "
                "read was planned past it: read again once the transaction ends (a running Kafka gateway ends it at "
                "its transaction.timeout.ms)"
            )
        return messages_to_batch(delivered)
    return messages_to_batch(messages)


def _fast_batch(run: RawRun, max_record_bytes: int) -> pa.RecordBatch:
    count = run.message_count
    entries = np.frombuffer(run.entries, "<u8").reshape(count, 3)
    if len(run.data) >= 2**31:
        raise _Inconsistent  # binary views address at most 2 GiB; the reader keeps runs far smaller
    sizes = entries[:, 2].astype(np.int64)
    rel = np.zeros(count, np.int64)
    np.cumsum(sizes[:-1], out=rel[1:])
    # Offsets consecutive, records back to back and filling the buffer exactly.
    if (
        int(rel[-1] + sizes[-1]) != len(run.data)
        or not np.array_equal(entries[:, 1].astype(np.int64) - run.data_position, rel)
        or not np.array_equal(entries[:, 0], np.arange(run.first_offset, run.first_offset + count, dtype=np.uint64))
    ):
        raise _Inconsistent
    smallest, largest = int(sizes.min()), int(sizes.max())
    if smallest < MIN_RECORD_BYTES or largest > max_record_bytes:
        raise _Inconsistent
    buffer = np.frombuffer(run.data, np.uint8)
    if smallest == largest:
        uniform = _uniform_batch(run, buffer, smallest)
        if uniform is not None:
            return uniform
    data = pa.py_buffer(run.data)
    words = _words(buffer)
    if not np.array_equal(words[rel], sizes) or (buffer[rel + 8] != MAGIC_V1).any():
        raise _Inconsistent
    if (buffer[rel + ATTRIBUTES_AT] & (COMPRESSED | TRANSACTIONAL)).any():
        # Values to decompress, or a Kafka transaction's records (fields after the key; markers
        # and aborted records to leave out): decode_messages does it, record by record.
        raise _Inconsistent
    key_lengths = words[rel + KEY_LENGTH_AT].astype(np.int64)
    key_ends = rel + _FIXED_BYTES + key_lengths
    ends = rel + sizes
    if (key_ends + 2 > ends).any():
        raise _Inconsistent
    if not _check_crcs(words, data, rel, sizes, words[rel + 4]):
        raise _Inconsistent
    timestamps_ns = np.ndarray((len(buffer) - 7,), "<i8", buffer, 0, (1,))[rel + 10]
    # A record with headers or a tag (attributes bit 0) is decoded on its own; the rest are sliced.
    header_counts = buffer[key_ends] | buffer[key_ends + 1] | (buffer[rel + 9] & 1)
    value_starts = key_ends + 2
    careful = np.flatnonzero(header_counts).tolist()
    with_headers: list[int] = []
    header_maps: list[dict[str, bytes]] = []
    tags: list[str | None] = [None] * count
    for row in careful:
        decoded = decode_record(run.data, int(rel[row]), max_record_bytes=max_record_bytes)
        if decoded is NEED_MORE or decoded.end != ends[row]:
            raise _Inconsistent
        if decoded.headers:
            with_headers.append(row)
            header_maps.append(dict(decoded.headers))
        tags[row] = decoded.tag
        value_starts[row] = decoded.end - len(decoded.value)
    keys = _binary(_views(buffer, words, rel + _FIXED_BYTES, key_lengths), data, count)
    values = _binary(_views(buffer, words, value_starts, ends - value_starts), data, count)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(count, run.partition, np.int32)),
            pa.array(np.arange(run.first_offset, run.first_offset + count, dtype=np.int64)),
            pa.array(timestamps_ns // 1000, pa.timestamp("us", tz="UTC")),
            keys,
            values,
            _headers_array(count, with_headers, header_maps),
            pa.array(tags, pa.string()),
        ],
        schema=ARROW_SCHEMA,
    )


def _fixed_width(block: npt.NDArray[np.uint8], width: int, count: int) -> pa.Array:
    """A ``binary`` array of ``count`` values of ``width`` bytes, the rows of a strided block."""
    data = np.ascontiguousarray(block)
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(width)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _uniform_batch(run: RawRun, buffer: npt.NDArray[np.uint8], size: int) -> pa.RecordBatch | None:
    """The batch of a run whose records all have one size and one key length, and no headers.

    Such runs are common (fixed-size keys and values), and every field then sits at a fixed stride,
    so columns are strided copies without any index arrays. None if the run is not of that kind.
    """
    count = run.message_count
    rows = buffer.reshape(count, size)

    def field(dtype: str, offset: int) -> npt.NDArray[np.generic]:
        return np.ndarray((count,), dtype, buffer, offset, (size,))

    if not (field("<u4", 0) == size).all() or (rows[:, 8] != MAGIC_V1).any():
        raise _Inconsistent
    if (rows[:, 9] & _NOT_PLAIN).any():
        return None  # some records have a tag (a keyless record's generated key is its key here)
    key_lengths = field("<u4", KEY_LENGTH_AT)
    key_length = int(key_lengths[0])
    if not (key_lengths == key_length).all():
        return None
    value_start = _FIXED_BYTES + key_length + 2
    if value_start > size:
        raise _Inconsistent
    if rows[:, value_start - 2 : value_start].any():
        return None  # some records have headers
    chained = np.empty((count, size), np.uint8)  # body ‖ crc ‖ CRC_RESET for each record
    chained[:, : size - 8] = rows[:, 8:]
    chained[:, size - 8 : size - 4] = rows[:, 4:8]
    chained[:, size - 4 :] = _CRC_RESET_BYTES
    if crc32c(chained.data) != 0:
        raise _Inconsistent
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(count, run.partition, np.int32)),
            pa.array(np.arange(run.first_offset, run.first_offset + count, dtype=np.int64)),
            pa.array(field("<i8", TIMESTAMP_AT) // 1000, pa.timestamp("us", tz="UTC")),
            _fixed_width(rows[:, _FIXED_BYTES : _FIXED_BYTES + key_length], key_length, count),
            _fixed_width(rows[:, value_start:], size - value_start, count),
            _headers_array(count, [], []),
            pa.nulls(count, pa.string()),
        ],
        schema=ARROW_SCHEMA,
    )


def messages_to_batch(messages: Sequence[Message]) -> pa.RecordBatch:
    """A record batch of ``ARROW_SCHEMA`` from decoded messages (the slow, reference path)."""
    with_headers = [row for row, message in enumerate(messages) if message.headers]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.partition for m in messages], pa.int32()),
            pa.array([m.offset for m in messages], pa.int64()),
            pa.array([m.timestamp_ns // 1000 for m in messages], pa.timestamp("us", tz="UTC")),
            pa.array([bytes(m.key) for m in messages], pa.binary()),
            pa.array([bytes(m.value) for m in messages], pa.binary()),
            _headers_array(len(messages), with_headers, [dict(messages[row].headers) for row in with_headers]),
            pa.array([m.tag for m in messages], pa.string()),
        ],
        schema=ARROW_SCHEMA,
    )
