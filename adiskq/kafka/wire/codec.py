"""Kafka's record batch v2 (magic 2): bytes in, batches out, no I/O — the pure-Python reference.

``wire/batch.py`` is what the gateway imports: it runs the compiled twin of this module
(``adiskq/_csrc/kafka/*.c``) when it is built and this one otherwise; the differential tests hold
the two to the same batches, bytes and errors.

A batch, all integers big-endian (Kafka's ``DefaultRecordBatch``)::

    i64  base_offset
    i32  batch_length            bytes after this field
    i32  partition_leader_epoch
    i8   magic                   2
    u32  crc                     CRC-32C (Castagnoli) of every byte after this field
    i16  attributes              bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
                                 bit 3 timestamp type (LogAppendTime), bit 4 transactional,
                                 bit 5 control batch, bit 6 a delete horizon in base_timestamp
    i32  last_offset_delta
    i64  base_timestamp_ms
    i64  max_timestamp_ms
    i64  producer_id
    i16  producer_epoch
    i32  base_sequence
    i32  record_count
    ...  records                 compressed as a whole by the codec attributes name

A record (``varint``: zig-zag, 7 bits a byte, low group first, at most 5 bytes for 32 bits;
``varlong``: the same in at most 10 bytes for 64 bits)::

    varint   length             bytes of the record after this field
    i8       attributes         unused (0)
    varlong  timestamp_delta    from base_timestamp_ms
    varint   offset_delta       from base_offset
    varint   key_length         -1 for a null key
    bytes    key
    varint   value_length       -1 for a null value
    bytes    value
    varint   header_count
    per header: varint key_length, UTF-8 key (never null), varint value_length (-1: null), value

Unlike adiskq's own codec, a short buffer is an error here, not "need more data": the gateway hands
over a Produce request's whole records field, whose length the request's framing already gave.
Every error is a ``KafkaBatchError`` naming the first thing wrong and its byte position, checked
in this order: the batch's magic byte (which sits at the same place in Kafka's older formats), its
length, its CRC, its attributes, then its records in order, each field in order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

from ..._errors import Error, InvalidArgumentError
from ..._sansio.native import NATIVE
from ..._sansio.values import Message, header_pairs
from . import compression as kafka_compression

if NATIVE is not None:
    crc32c: Callable[..., int] = NATIVE.crc32c  # the CPU's instruction; equal to the package's (tested)
else:
    from crc32c import crc32c

__all__ = [
    "ATTRIBUTES_AT",
    "COMPRESSION_MASK",
    "CONTROL",
    "CRC_AT",
    "DEFAULT_MAX_BYTES",
    "HEADER_BYTES",
    "LOG_APPEND_TIME",
    "MAGIC",
    "MAGIC_AT",
    "TRANSACTIONAL",
    "KafkaBatch",
    "KafkaBatchError",
    "KafkaCorruptBatchError",
    "KafkaRecord",
    "KafkaUnsupportedBatchError",
    "decode_batches",
    "decode_records",
    "encode_batch",
    "encode_control_batch",
    "encode_messages",
    "encode_records",
]

MAGIC: Final = 2
# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# base_timestamp_ms, max_timestamp_ms, producer_id, producer_epoch, base_sequence, record_count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_BYTES: Final = _HEADER.size  # 61
_LENGTH_PREFIX_BYTES: Final = 12  # base_offset and batch_length: what batch_length does not count
MAGIC_AT: Final = 16
CRC_AT: Final = 17
ATTRIBUTES_AT: Final = 21  # the CRC covers every byte from here to the batch's end
_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. record_count
_BEFORE_CRC = struct.Struct(">qiib")  # base_offset, batch_length, partition_leader_epoch, magic
_MIN_BATCH_LENGTH: Final = HEADER_BYTES - _LENGTH_PREFIX_BYTES  # 49: a batch of no records

COMPRESSION_MASK: Final = 0x07
LOG_APPEND_TIME: Final = 0x08
TRANSACTIONAL: Final = 0x10
CONTROL: Final = 0x20

# At most this many bytes of records (after decompression) in one decode_batches call, unless the
# caller says otherwise: what bounds a decompression bomb, and the memory the decoded records take.
DEFAULT_MAX_BYTES: Final = 128 * 2**20

_I16_MIN, _I16_MAX = -(2**15), 2**15 - 1
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_MIN_RECORD_BODY: Final = 6  # attributes and five one-byte varints: the smallest record after its length


class KafkaBatchError(Error, ValueError):
    """A record batch is malformed; ``position`` is the byte where the fault lies.

    Positions count from the start of the buffer handed to ``decode_batches``; inside a compressed
    batch they count from the start of its decompressed records, and the message says so.
    """

    def __init__(self, reason: str, *, position: int | None = None) -> None:
        self.reason = reason
        self.position = position
        super().__init__(reason if position is None else f"{reason} (at byte {position})")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.reason, self.position))


def _rebuild(cls: type[KafkaBatchError], reason: str, position: int | None) -> KafkaBatchError:
    return cls(reason, position=position)


class KafkaCorruptBatchError(KafkaBatchError):
    """A batch's CRC-32C does not match its bytes: it was damaged on the way (Kafka's CORRUPT_MESSAGE)."""


class KafkaUnsupportedBatchError(KafkaBatchError):
    """A well-formed batch this codec does not take: an older message format (magic 0 or 1), a
    transactional or control batch, or a compression codec Kafka does not define."""


class KafkaRecord(NamedTuple):
    """One record of a batch; ``timestamp_ms`` is absolute (base timestamp plus the record's delta)."""

    offset_delta: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class KafkaBatch(NamedTuple):
    """One decoded record batch: its header fields and its records (decompressed)."""

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[KafkaRecord]


# -- varints ----------------------------------------------------------------------------------------


def _read_varint(buf: bytes, pos: int, end: int, max_bytes: int, what: str, where: str) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` (at most ``max_bytes`` bytes: 5 for 32 bits, 10 for 64) and the
    position after it."""
    start = pos
    shift = 0
    raw = 0
    while True:
        if pos >= end:
            raise KafkaBatchError(f"{where}: {what} is cut off", position=start)
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise KafkaBatchError(f"{where}: {what} is a varint longer than {max_bytes} bytes", position=start)
    if raw >> (max_bytes * 7 - (3 if max_bytes == 5 else 6)):  # above 32 (or 64) bits
        raise KafkaBatchError(f"{where}: {what} does not fit in {32 if max_bytes == 5 else 64} bits", position=start)
    return (raw >> 1) ^ -(raw & 1), pos


def _varint_bytes(value: int) -> bytes:
    """The zig-zag varint of a value already known to fit in 64 bits."""
    raw = (value << 1) ^ (value >> 63) if value < 0 else value << 1
    out = bytearray()
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


_SMALL_VARINTS: Final = tuple(_varint_bytes(n) for n in range(-64, 64))


def _varint(value: int) -> bytes:
    if -64 <= value < 64:
        return _SMALL_VARINTS[value + 64]
    return _varint_bytes(value)


# -- decoding ---------------------------------------------------------------------------------------


def _read_bytes(buf: bytes, pos: int, end: int, what: str, where: str) -> tuple[bytes | None, int]:
    """A varint length (-1: null) and that many bytes."""
    length_at = pos
    length, pos = _read_varint(buf, pos, end, 5, f"{what} length", where)
    if length < 0:
        if length == -1:
            return None, pos
        raise KafkaBatchError(f"{where}: {what} length {length} is below -1", position=length_at)
    if pos + length > end:
        raise KafkaBatchError(f"{where}: {what} of {length} bytes overruns the record", position=length_at)
    return buf[pos : pos + length], pos + length


def decode_records(buf: bytes, pos: int, end: int, count: int, base_timestamp_ms: int, where: str) -> list[KafkaRecord]:
    """Exactly ``count`` records that fill ``buf[pos:end]``; ``where`` names the batch in errors."""
    records: list[KafkaRecord] = []
    append = records.append
    for index in range(count):
        record_at = pos
        here = f"{where}, record {index}"
        if pos >= end:
            raise KafkaBatchError(f"{where} says it holds {count} records but ends after {index}", position=pos)
        length, pos = _read_varint(buf, pos, end, 5, "record length", here)
        if length < _MIN_RECORD_BODY:
            raise KafkaBatchError(
                f"{here}: record length {length} is below the minimum {_MIN_RECORD_BODY}", position=record_at
            )
        if length > end - pos:
            raise KafkaBatchError(f"{here}: record of {length} bytes overruns the batch", position=record_at)
        record_end = pos + length
        pos += 1  # attributes: unused
        timestamp_delta, pos = _read_varint(buf, pos, record_end, 10, "timestamp delta", here)
        timestamp_ms = base_timestamp_ms + timestamp_delta
        if not _I64_MIN <= timestamp_ms <= _I64_MAX:
            raise KafkaBatchError(f"{here}: timestamp {timestamp_ms} does not fit in 64 bits", position=record_at)
        offset_delta, pos = _read_varint(buf, pos, record_end, 5, "offset delta", here)
        key, pos = _read_bytes(buf, pos, record_end, "key", here)
        value, pos = _read_bytes(buf, pos, record_end, "value", here)
        count_at = pos
        header_count, pos = _read_varint(buf, pos, record_end, 5, "header count", here)
        if header_count < 0:
            raise KafkaBatchError(f"{here}: header count {header_count} is negative", position=count_at)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            name_at = pos
            raw_name, pos = _read_bytes(buf, pos, record_end, "header key", here)
            if raw_name is None:
                raise KafkaBatchError(f"{here}: a header key is null", position=name_at)
            try:
                name = raw_name.decode("utf-8")
            except UnicodeDecodeError:
                raise KafkaBatchError(f"{here}: a header key is not UTF-8", position=name_at) from None
            header_value, pos = _read_bytes(buf, pos, record_end, "header value", here)
            headers.append((name, header_value))
        if pos != record_end:
            raise KafkaBatchError(
                f"{here}: {record_end - pos} bytes follow the record's last header", position=record_at
            )
        append(KafkaRecord(offset_delta, timestamp_ms, key, value, headers))
    if pos != end:
        raise KafkaBatchError(f"{where}: {end - pos} bytes follow its {count} records", position=pos)
    return records


DecodeRecords = Callable[[bytes, int, int, int, int, str], list[KafkaRecord]]


def decode_batches(
    data: bytes | bytearray | memoryview,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    records_decoder: DecodeRecords = decode_records,
    transactional: bool = False,
) -> list[KafkaBatch]:
    """Every batch of a Produce request's records field, back to back, which they must fill exactly.

    ``max_bytes`` bounds the bytes of records (after decompression) the whole call decodes: a
    decompression bomb stops there with a ``KafkaBatchError``. ``records_decoder`` is what decodes
    the records of a batch (the compiled twin passes its own). ``transactional``: the request is a
    transactional producer's, whose batches carry the transactional bit; without it such a batch is
    refused. A control batch (a commit or abort marker) is always refused: the broker writes those.
    """
    _check_int(max_bytes, 0, _I64_MAX, "max_bytes")
    buf = bytes(data)
    limit = len(buf)
    if limit == 0:
        raise KafkaBatchError("the records field holds no batch", position=0)
    budget = max_bytes
    batches: list[KafkaBatch] = []
    pos = 0
    while pos < limit:
        where = f"batch {len(batches)}"
        if limit - pos < _LENGTH_PREFIX_BYTES + 5:  # up to and including the magic byte
            raise KafkaBatchError(f"{where}: a partial batch of {limit - pos} bytes ends the data", position=pos)
        base_offset, batch_length, leader_epoch, magic = _BEFORE_CRC.unpack_from(buf, pos)
        if magic != MAGIC:
            raise KafkaUnsupportedBatchError(
                f"{where}: message format magic {magic} is not supported: only record batches of magic 2 "
                "(Kafka 0.11 and later clients) are",
                position=pos + MAGIC_AT,
            )
        if batch_length < _MIN_BATCH_LENGTH:
            raise KafkaBatchError(
                f"{where}: batch length {batch_length} is below the minimum {_MIN_BATCH_LENGTH}", position=pos + 8
            )
        end = pos + _LENGTH_PREFIX_BYTES + batch_length
        if end > limit:
            raise KafkaBatchError(
                f"{where}: batch length {batch_length} runs {end - limit} bytes past the end of the data",
                position=pos + 8,
            )
        (stored_crc,) = struct.unpack_from(">I", buf, pos + CRC_AT)
        if crc32c(memoryview(buf)[pos + ATTRIBUTES_AT : end]) != stored_crc:
            raise KafkaCorruptBatchError(f"{where}: CRC-32C mismatch", position=pos)
        (
            attributes,
            last_offset_delta,
            base_timestamp_ms,
            max_timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = _AFTER_CRC.unpack_from(buf, pos + ATTRIBUTES_AT)
        if attributes & CONTROL:
            raise KafkaUnsupportedBatchError(
                f"{where}: a control batch (attributes 0x{attributes:04x}) is written by the broker when a "
                "transaction ends, never sent by a producer",
                position=pos + ATTRIBUTES_AT,
            )
        if attributes & TRANSACTIONAL and not transactional:
            raise KafkaUnsupportedBatchError(
                f"{where}: a transactional batch (attributes 0x{attributes:04x}) in a request without a "
                "transactional id: a transactional producer names its transactional.id in every Produce",
                position=pos + ATTRIBUTES_AT,
            )
        compression = attributes & COMPRESSION_MASK
        if compression > kafka_compression.ZSTD:
            raise KafkaUnsupportedBatchError(
                f"{where}: compression codec {compression} is not one Kafka defines", position=pos + ATTRIBUTES_AT
            )
        if count < 0:
            raise KafkaBatchError(f"{where}: record count {count} is negative", position=pos + HEADER_BYTES - 4)
        records_at = pos + HEADER_BYTES
        if compression:
            try:
                section = kafka_compression.decompress(compression, buf[records_at:end], budget)
            except kafka_compression.DecompressionError as error:
                raise KafkaBatchError(f"{where}: {error}", position=records_at) from None
            budget -= len(section)
            records = records_decoder(
                section, 0, len(section), count, base_timestamp_ms, f"{where} (decompressed records)"
            )
        else:
            budget -= end - records_at
            if budget < 0:
                raise KafkaBatchError(f"{where}: the batches hold more than {max_bytes} bytes of records", position=pos)
            records = records_decoder(buf, records_at, end, count, base_timestamp_ms, where)
        batches.append(
            KafkaBatch(
                base_offset,
                leader_epoch,
                attributes,
                last_offset_delta,
                base_timestamp_ms,
                max_timestamp_ms,
                producer_id,
                producer_epoch,
                base_sequence,
                records,
            )
        )
        pos = end
    return batches


# -- encoding ---------------------------------------------------------------------------------------


def _check_int(value: object, low: int, high: int, name: str) -> int:
    if type(value) is not int:
        raise TypeError(f"{name} is an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgumentError(f"{name} {value} is out of range [{low}, {high}]")
    return value


def _bytes_field(value: object, what: str, index: int) -> bytes:
    """A length-prefixed field (key, value, header value): varint length (-1 for None) and bytes."""
    if value is None:
        return _SMALL_VARINTS[-1 + 64]
    if type(value) is not bytes:
        raise TypeError(f"record {index}: the {what} is bytes or None, not {type(value).__name__}")
    if len(value) > _I32_MAX:
        raise InvalidArgumentError(f"record {index}: the {what} of {len(value)} bytes is over Kafka's 2 GiB limit")
    return _varint(len(value)) + value


def encode_records(records: Sequence[KafkaRecord], base_timestamp_ms: int) -> tuple[bytes, int, int]:
    """The records section of a batch (uncompressed), its last offset delta and its max timestamp."""
    _check_int(base_timestamp_ms, _I64_MIN, _I64_MAX, "base_timestamp_ms")
    parts: list[bytes] = []
    previous_delta = -1
    max_timestamp_ms = _I64_MIN
    for index, record in enumerate(records):
        if not isinstance(record, tuple) or len(record) != 5:
            raise TypeError(f"record {index} is a KafkaRecord, not {type(record).__name__}")
        offset_delta, timestamp_ms, key, value, headers = record
        _check_int(offset_delta, 0, _I32_MAX, f"record {index}: offset_delta")
        if offset_delta <= previous_delta:
            raise InvalidArgumentError(f"record {index}: offset_delta {offset_delta} does not follow {previous_delta}")
        previous_delta = offset_delta
        _check_int(timestamp_ms, _I64_MIN, _I64_MAX, f"record {index}: timestamp_ms")
        timestamp_delta = timestamp_ms - base_timestamp_ms
        if not _I64_MIN <= timestamp_delta <= _I64_MAX:
            raise InvalidArgumentError(
                f"record {index}: timestamp_ms {timestamp_ms} is too far from base_timestamp_ms {base_timestamp_ms}"
            )
        max_timestamp_ms = max(max_timestamp_ms, timestamp_ms)
        if not isinstance(headers, list | tuple):
            raise TypeError(f"record {index}: headers are a list of (str, bytes | None), not {type(headers).__name__}")
        body = [b"\x00", _varint(timestamp_delta), _varint(offset_delta)]
        body.append(_bytes_field(key, "key", index))
        body.append(_bytes_field(value, "value", index))
        body.append(_varint(len(headers)))
        for header in headers:
            if not isinstance(header, tuple) or len(header) != 2:
                raise TypeError(f"record {index}: a header is a (str, bytes | None) pair, not {header!r:.60}")
            name, header_value = header
            if type(name) is not str:
                raise TypeError(f"record {index}: a header key is a str, not {type(name).__name__}")
            try:
                raw_name = name.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArgumentError(f"record {index}: header key {name[:40]!r} is not valid UTF-8") from None
            body.append(_bytes_field(raw_name, "header key", index))
            body.append(_bytes_field(header_value, "header value", index))
        joined = b"".join(body)
        if len(joined) > _I32_MAX:
            raise InvalidArgumentError(f"record {index} is over Kafka's 2 GiB limit")
        parts.append(_varint(len(joined)))
        parts.append(joined)
    return b"".join(parts), previous_delta, max_timestamp_ms


def encode_batch(
    *,
    base_offset: int,
    records: Sequence[KafkaRecord],
    base_timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    partition_leader_epoch: int = 0,
    records_encoder: Callable[[Sequence[KafkaRecord], int], tuple[bytes, int, int]] = encode_records,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """The bytes of one batch of ``records`` (at least one; offset deltas increasing from 0 or more).

    ``max_timestamp_ms`` is the records' latest timestamp; the timestamp type is CreateTime.
    ``partition_leader_epoch`` is the epoch Metadata reports for the partition. ``transactional``
    and ``control`` set attributes bits 4 and 5: records of ``producer_id``'s transaction, and its
    commit or abort marker (``encode_control_batch``).
    """
    _check_int(base_offset, _I64_MIN, _I64_MAX, "base_offset")
    _check_int(base_timestamp_ms, _I64_MIN, _I64_MAX, "base_timestamp_ms")
    _check_int(producer_id, _I64_MIN, _I64_MAX, "producer_id")
    _check_int(producer_epoch, _I16_MIN, _I16_MAX, "producer_epoch")
    _check_int(base_sequence, _I32_MIN, _I32_MAX, "base_sequence")
    _check_int(compression, 0, kafka_compression.ZSTD, "compression")
    _check_int(partition_leader_epoch, _I32_MIN, _I32_MAX, "partition_leader_epoch")
    if not isinstance(records, Sequence) or isinstance(records, str | bytes):
        raise TypeError(f"records are a sequence of KafkaRecord, not {type(records).__name__}")
    if not records:
        raise InvalidArgumentError("a batch holds at least one record")
    section, last_offset_delta, max_timestamp_ms = records_encoder(records, base_timestamp_ms)
    if compression:
        section = kafka_compression.compress(compression, section)
    batch_length = HEADER_BYTES - _LENGTH_PREFIX_BYTES + len(section)
    if batch_length > _I32_MAX:
        raise InvalidArgumentError(f"a batch of {batch_length} bytes is over Kafka's 2 GiB limit")
    attributes = compression | (TRANSACTIONAL if transactional else 0) | (CONTROL if control else 0)
    after_crc = (
        _AFTER_CRC.pack(
            attributes,
            last_offset_delta,
            base_timestamp_ms,
            max_timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + section
    )
    return b"".join(
        (
            _BEFORE_CRC.pack(base_offset, batch_length, partition_leader_epoch, MAGIC),
            struct.pack(">I", crc32c(after_crc)),
            after_crc,
        )
    )


_CONTROL_KEY: Final = struct.Struct(">hh")  # version 0, type: 0 abort, 1 commit
_CONTROL_VALUE: Final = struct.Struct(">hi")  # version 0, coordinator epoch


def encode_control_batch(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    partition_leader_epoch: int = 0,
) -> bytes:
    """The control batch Kafka writes when a transaction ends: one record at ``offset`` whose key
    says commit or abort (version 0, type 1 or 0) and whose value holds the coordinator epoch
    (version 0), in a batch with attributes bits 4 and 5 and the transaction's producer."""
    _check_int(coordinator_epoch, _I32_MIN, _I32_MAX, "coordinator_epoch")
    record = KafkaRecord(
        0,
        timestamp_ms,
        _CONTROL_KEY.pack(0, 1 if commit else 0),
        _CONTROL_VALUE.pack(0, coordinator_epoch),
        [],
    )
    return encode_batch(
        base_offset=offset,
        records=[record],
        base_timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        transactional=True,
        control=True,
    )


# A Kafka header whose name is the nulls header's, or that name and escape marks, is stored with one
# escape mark more (``wire.mapping.stored_header_name``), and served with one fewer.
HEADER_ESCAPE: Final = "~"


def served_header_name(name: str, nulls_header: str) -> str:
    """The Kafka header name a stored one stands for: ``nulls_header`` and escape marks lose one mark
    (the stored name of a Kafka header called like the nulls header itself); any other is itself."""
    if len(name) > len(nulls_header) and name.startswith(nulls_header):
        marks = name[len(nulls_header) :]
        if marks == HEADER_ESCAPE * len(marks):
            return name[:-1]
    return name


def encode_messages(
    messages: Sequence[Message],
    *,
    nulls_header: str | None = None,
    partition_leader_epoch: int = 0,
    transaction: tuple[int, int] | None = None,
) -> bytes:
    """One uncompressed batch of stored messages: consecutive offsets of one partition, as a reader
    returns them (what a Fetch answers with); with ``transaction`` (producer id, epoch), a
    transactional batch of that producer.

    The batch's base offset is the first message's; timestamps are nanoseconds floored to
    milliseconds; headers keep their order. ``nulls_header`` names the header (if any) in which a
    message records that its Kafka key or value was null: its value lists ``key``, ``value`` or
    both, comma-separated; such a key or value is written as null, and the header is left out. A
    header named ``nulls_header`` and escape marks is served with one mark fewer
    (``served_header_name``).
    """
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidArgumentError("a batch holds at least one message")
    first = messages[0].offset
    records = []
    for message in messages:
        key: bytes | None = message.key
        value: bytes | None = message.value
        headers = message.headers
        pairs: list[tuple[str, bytes | None]]
        if not headers:
            pairs = []
        elif nulls_header is not None and nulls_header in headers:
            nulls = headers[nulls_header].split(b",")
            if b"key" in nulls:
                key = None
            if b"value" in nulls:
                value = None
            pairs = [
                (served_header_name(name, nulls_header), header)
                for name, header in header_pairs(headers)
                if name != nulls_header
            ]
        elif nulls_header is not None:
            pairs = [(served_header_name(name, nulls_header), header) for name, header in header_pairs(headers)]
        else:
            pairs = list(header_pairs(headers))
        records.append(KafkaRecord(message.offset - first, message.timestamp_ns // 1_000_000, key, value, pairs))
    producer_id, producer_epoch = (-1, -1) if transaction is None else transaction
    return encode_batch(
        base_offset=first,
        records=records,
        base_timestamp_ms=records[0].timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        transactional=transaction is not None,
    )
