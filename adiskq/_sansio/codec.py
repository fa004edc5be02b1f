"""The record codec of the ``.data`` file, format version 5: bytes in, records out, no I/O.

A record, all integers little-endian::

    u32  size          bytes of the whole record, this field included
    u32  crc           CRC-32C (Castagnoli) of every byte after this field
    u8   magic         0xAD
    u8   attributes    bit 0: the record carries a tag; bit 1: the value is compressed (format 3,
                       ``compression.py``); bits 2, 3 and 4: transactional, control and keyless
                       (format 5, below); bits 5 to 7 are 0 (reserved)
    i64  timestamp_ns  UTC nanoseconds since the epoch
    u32  key_len       then key_len bytes of key
   [u16  tag_len       then tag_len bytes of UTF-8 tag: only when attributes bit 0 is set]
   [i64  producer_id   the Kafka transactional producer that wrote it: only when bit 2 is set
    i16  epoch         and that producer's epoch]
   [u8   marker        0 abort, 1 commit: only when bit 3 (control) is set, which needs bit 2
    i32  coordinator_epoch
    i64  first_offset  the offset of the transaction's first record in this partition, -1 for none]
    u16  header_count  then per header: u16 name_len, UTF-8 name, u32 value_len, value bytes
    ...  value         the rest of the record (may be empty)

The smallest record (empty key, no headers, empty value) is 24 bytes.

Headers as Kafka has them (format 5, ``adiskq/5``): a header whose ``value_len`` is 0xFFFFFFFF has
a null value (Kafka's null; no value bytes follow), and a name may appear more than once. Every
reader takes both, in order: such a record's Message holds a ``values.Headers`` (a mapping of each
name's last value, with ``all()`` for every header as it was) where any other record's holds a
``dict``; the compiled decoder leaves those buffers to this reference. Only a ``Headers`` makes the
encoder write either (a producer's push given one, or the Kafka gateway's record that has either);
producers refuse it on a stream of formats 1 to 4 (``settings.require_kafka_headers``), which hold
neither, and readers of those formats refuse a format-5 stream by its settings' format, since they
would take a null's length for a 4 GiB value and call the record damaged.

Versions. Format 1 (``settings.json`` ``"format": "adiskq/1"``) had no tags: attributes was always 0.
Format 2 added the tag behind attributes bit 0, so an untagged record is byte for byte what format
1 wrote, and a format-1 stream reads and is written unchanged (only ``adiskq upgrade`` moves its
settings on). The magic byte stays 0xAD for that reason: every record of either version is read by
the same rules, and recovery's search for the next valid record needs one magic. A reader that
only knows format 1 would misread a tagged record, so it is the stream's settings format that
says which readers may open it. A tag is 1 to ``MAX_TAG_BYTES`` (255) bytes of UTF-8. Format 3
(``adiskq/3``, a stream made with ``compression="zstd"``) adds attributes bit 1: the value is one zstd
frame, without its magic number, made with a dictionary kept in the stream's folder
(``compression.py`` says how), which readers of formats 1 and 2 would hand out as the value, so
they refuse the stream by its settings' format. A format-3 stream's segments also keep no
``.timeindex`` and a ``.tagindex`` only from their first tagged message (``_storage/segment_writer.py``).
Format 4 (``adiskq/4``) changes no record: the stream has an identity in its settings. Format 5
(``adiskq/5``, what a new stream is) adds the null header values and repeated names above; every
record of formats 1 to 4 is the same bytes in format 5, so ``adiskq upgrade`` moves a stream by its
settings alone, keeping its compression (attributes bit 1) and identity.

Transactions (format 5 too; ``_sansio/transactions.py`` holds what is built on these fields).
Attributes bit 2 (``TRANSACTIONAL``): the record was written in a Kafka transaction, and carries its
producer's id and epoch after the tag field (after the key when it has no tag). Bit 3 (``CONTROL``,
only with bit 2; a record with bit 3 alone is damaged): the record is a transaction marker, Kafka's
commit or abort control record; it has its own offset and index entry like any record (so a Kafka
offset and an adiskq offset are the same number), an empty key, no headers and an empty value, and
after the producer fields a ``u8`` that is 1 for commit and 0 for abort (anything else is damage),
the ``i32`` coordinator epoch, and the ``i64`` offset of the transaction's first record in the
partition (-1 when it wrote none there), so that a segment's markers alone say which offsets each
abort covers (``_storage/txn_index.py`` rebuilds its ``.txnindex`` from them). Bit 4
(``KEYLESS``): the key is the 8 bytes generated for a push given no key; they stay (the partition
was chosen by them, and the key index holds them), and only what a Kafka client reads through the
gateway is the null key it would have read from Kafka. A stream of formats 1 to 4 never holds a
record with bit 2, 3 or 4 (its producer writes none of them), and readers of those formats refuse a
format-5 stream by its settings, as above; bits 5 to 7 are reserved: a record with one set is damaged.

Decoding follows h11's rule: a buffer that ends early is not an error. ``decode_record`` answers
``NEED_MORE`` for every proper prefix of a valid record, and raises ``CorruptRecordError`` (with the
byte position) only when the bytes present already prove the record bad: a size below the minimum or
above the limit, a wrong magic byte, a CRC mismatch, or fields that overrun the record.

One concept drives this module's length (over 800 lines, this format's specification included):
the record format, whose encoders, decoders, scanners and validity checks read the same fields by
the same rules, kept together so that a change to the format is made in one place.
"""

from __future__ import annotations

import enum
import functools
import itertools
import operator
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final, NamedTuple

from .._errors import CorruptRecordError, InvalidArgumentError
from .compression import COMPRESSED, Dictionaries
from .native import NATIVE
from .values import EMPTY_HEADERS, Headers, Message

if NATIVE is not None:
    crc32c: Callable[..., int] = NATIVE.crc32c  # the CPU's instruction; equal to the package's (tested)
else:
    from crc32c import crc32c

__all__ = [
    "ATTRIBUTES_AT",
    "CONTROL",
    "CRC_AT",
    "DEFAULT_MAX_RECORD_BYTES",
    "KEYLESS",
    "KEY_AT",
    "KEY_LENGTH_AT",
    "MAGIC_AT",
    "MAGIC_V1",
    "MAX_TAG_BYTES",
    "MIN_RECORD_BYTES",
    "NEED_MORE",
    "SIZE_AT",
    "TAGGED",
    "TIMESTAMP_AT",
    "TRANSACTIONAL",
    "DecodedRecord",
    "NeedMore",
    "RecordExtent",
    "ScannedRecords",
    "TransactionFields",
    "TransactionalBatch",
    "byte_count",
    "crc32c",
    "decode_messages",
    "decode_record",
    "encode_batch",
    "encode_record",
    "encoded_size",
    "is_valid_record",
    "next_valid_record",
    "raise_record_error",
    "record_key",
    "record_tag",
    "record_timestamp",
    "record_transaction",
    "scan_columns",
    "scan_records",
    "tag_bytes",
    "utf8",
]

MAGIC_V1: Final = 0xAD
TAGGED: Final = 0x01  # attributes bit 0: a tag follows the key
TRANSACTIONAL: Final = 0x04  # attributes bit 2: producer_id and epoch follow the tag (or the key)
CONTROL: Final = 0x08  # attributes bit 3 (with bit 2): a commit or abort marker
KEYLESS: Final = 0x10  # attributes bit 4: the key was generated for a push given none
_RESERVED: Final = 0xE0  # attributes bits 5 to 7: no record sets them
_NOT_PLAIN: Final = 0xFF ^ KEYLESS  # bits that send a record off the decoders' plain paths
MAX_TAG_BYTES: Final = 255

# size, crc, magic, attributes, timestamp_ns, key_len
_FIXED = struct.Struct("<IIBBqI")
_SIZE_CRC = struct.Struct("<II")
_AFTER_CRC = struct.Struct("<BBqI")  # magic, attributes, timestamp_ns, key_len
_U16 = struct.Struct("<H")
_PRODUCER = struct.Struct("<qh")  # producer_id, epoch: a transactional record's fields
_MARKER = struct.Struct("<Biq")  # commit (1) or abort (0), coordinator_epoch, first_offset: a control record's
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_FIXED_BYTES: Final = _FIXED.size  # 22
# Where readers that cut fields out of encoded records without decoding them find them.
SIZE_AT: Final = 0  # u32 size
CRC_AT: Final = 4  # u32 crc; it covers every byte from MAGIC_AT on
MAGIC_AT: Final = 8  # u8 magic
ATTRIBUTES_AT: Final = 9  # u8 attributes
TIMESTAMP_AT: Final = 10  # i64 timestamp_ns
KEY_LENGTH_AT: Final = 18  # u32 key_len
KEY_AT: Final = _FIXED_BYTES  # the key's first byte
MIN_RECORD_BYTES: Final = _FIXED_BYTES + 2  # plus header_count
_NO_HEADERS: Final = b"\x00\x00"
_MAX_U32: Final = 0xFFFF_FFFF
# A header's value_len that says its value is null (Kafka's null), with no value bytes after it.
_NULL_LENGTH: Final = 0xFFFF_FFFF
_NULL_HEADER_VALUE: Final = b"\xff\xff\xff\xff"
_MAX_HEADERS: Final = 0xFFFF
_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1

# Below this many records a batch is decoded record by record (column set-up costs more).
_UNIFORM_MIN_COUNT: Final = 8

# A sane upper bound for any single record; streams usually set a lower max_message_bytes.
DEFAULT_MAX_RECORD_BYTES: Final = 1 << 30


class NeedMore(enum.Enum):
    """The buffer ends before the record does; call again with more bytes."""

    NEED_MORE = "need more data"


NEED_MORE: Final = NeedMore.NEED_MORE


class TransactionFields(NamedTuple):
    """A transactional record's fields (attributes bit 2), and a marker's (bit 3)."""

    producer_id: int
    epoch: int
    commit: bool | None = None  # None: a record of the transaction; True, False: its commit or abort marker
    coordinator_epoch: int = -1  # a marker's; -1 for a record of the transaction
    first_offset: int = -1  # a marker's: where its transaction began in the partition (-1: it wrote nothing there)

    @property
    def is_marker(self) -> bool:
        return self.commit is not None


class TransactionalBatch(list[Message]):
    """What ``decode_messages`` returns for records of which some are a Kafka transaction's or its
    markers (attributes bit 2): the Messages of every record, and ``transactions``, the fields of
    those records by their place in the list. Readers that deliver only committed records
    (``_storage/transaction_outcomes.py``) take out the markers and the records of aborted and still
    open transactions; any other batch is a plain ``list``, which they pass on untouched."""

    transactions: dict[int, TransactionFields]


class DecodedRecord(NamedTuple):
    """One record decoded from a buffer, and the position just after it."""

    timestamp_ns: int
    key: bytes
    value: bytes
    headers: Mapping[str, bytes]
    attributes: int
    end: int
    tag: str | None = None
    transaction: TransactionFields | None = None


def _transaction_field(transaction: TransactionFields) -> tuple[bytes, int]:
    """The producer fields (and a marker's) a transactional record stores, and the attribute bits they need."""
    producer_id, epoch, commit, coordinator_epoch, first_offset = transaction
    if not _I64_MIN <= producer_id <= _I64_MAX or not -(2**15) <= epoch < 2**15:
        raise InvalidArgumentError(
            f"a transaction's producer id is a signed 64-bit integer and its epoch a signed 16-bit one, "
            f"not {producer_id} and {epoch}"
        )
    field = _PRODUCER.pack(producer_id, epoch)
    if commit is None:
        return field, TRANSACTIONAL
    if not -(2**31) <= coordinator_epoch < 2**31:
        raise InvalidArgumentError(f"a coordinator epoch is a signed 32-bit integer, not {coordinator_epoch}")
    if not -1 <= first_offset <= _I64_MAX:
        raise InvalidArgumentError(f"a transaction's first offset is -1 (none) or an offset, not {first_offset}")
    return field + _MARKER.pack(1 if commit else 0, coordinator_epoch, first_offset), TRANSACTIONAL | CONTROL


class RecordExtent(NamedTuple):
    """Where a valid record lies in a buffer, and what the indexes need of it."""

    position: int
    size: int
    timestamp_ns: int


def utf8(text: str, what: str) -> bytes:
    """The UTF-8 bytes of a key or header name (``what`` names it in the error): a str holding a
    lone surrogate (what ``os.fsdecode`` makes of bytes that are not UTF-8) has none."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            f"{what} {text[:40]!r} holds a lone surrogate, which UTF-8 cannot store: give valid text, or bytes"
        ) from None


def _header_items(headers: Mapping[str, bytes]) -> Iterable[tuple[str, bytes | None]]:
    """The headers a record stores: every one of a ``Headers`` (repeats and nulls included), a
    mapping's items otherwise."""
    return headers.all() if isinstance(headers, Headers) else headers.items()


def _encode_headers(headers: Mapping[str, bytes]) -> bytes:
    items = tuple(_header_items(headers))
    if len(items) > _MAX_HEADERS:
        raise InvalidArgumentError(f"a message has at most {_MAX_HEADERS} headers, not {len(items)}")
    parts = [_U16.pack(len(items))]
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header names are str, not {type(name).__name__}: {name!r}")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(
                f"header values are bytes, not {type(value).__name__} (header {name!r}); encode text with .encode()"
            )
        raw_name = utf8(name, "header name")
        if len(raw_name) > 0xFFFF:
            raise InvalidArgumentError(f"header name {name[:40]!r}... is over 65535 bytes")
        parts.append(_U16.pack(len(raw_name)))
        parts.append(raw_name)
        if value is None:  # only a Headers holds one
            parts.append(_NULL_HEADER_VALUE)
            continue
        # All of a buffer's bytes, and their count: len() of a view of wider items (array('I'), a
        # numpy array) counts items, not bytes.
        raw_value = value if type(value) is bytes else bytes(value)
        if len(raw_value) >= _MAX_U32:
            raise InvalidArgumentError(f"header {name[:40]!r} has a value of {len(raw_value)} bytes, over 4 GiB")
        parts.append(_U32.pack(len(raw_value)))
        parts.append(raw_value)
    return b"".join(parts)


def byte_count(value: bytes | bytearray | memoryview) -> int:
    """How many bytes a value or header value holds (a view's ``len()`` counts its items)."""
    return value.nbytes if isinstance(value, memoryview) else len(value)


def tag_bytes(tag: object) -> bytes:
    """The UTF-8 bytes of a tag, checked: a non-empty ``str`` of at most ``MAX_TAG_BYTES`` bytes."""
    if not isinstance(tag, str):
        raise TypeError(f"a tag is a str (or None for no tag), not {type(tag).__name__}: {tag!r}")
    try:
        raw = tag.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"tag {tag[:40]!r} holds a lone surrogate, which UTF-8 cannot store") from None
    if not raw or len(raw) > MAX_TAG_BYTES:
        raise InvalidArgumentError(
            f"tag {tag[:40]!r} is {len(raw)} bytes of UTF-8: "
            f"give a tag of 1 to {MAX_TAG_BYTES} bytes (or None for none)"
        )
    return raw


# The tag field (u16 tag_len | UTF-8 tag) of the tags seen lately, checked once: a single push of a
# tag it has seen costs a lookup. Bounded: more distinct tags than this start it over.
_TAG_FIELDS: dict[str, bytes] = {}
_MAX_TAG_FIELDS: Final = 4096


def _tag_field(tag: object) -> bytes:
    raw = tag_bytes(tag)  # the clear error for a bad tag
    if len(_TAG_FIELDS) >= _MAX_TAG_FIELDS:
        _TAG_FIELDS.clear()
    field = _TAG_FIELDS[tag] = _U16.pack(len(raw)) + raw  # type: ignore[index]  # tag_bytes took a str
    return field


def encoded_size(value: bytes, key: bytes, headers: Mapping[str, bytes] | None = None, tag: str | None = None) -> int:
    """The size in bytes of the record ``encode_record`` would make."""
    size = MIN_RECORD_BYTES + byte_count(key) + byte_count(value)
    if tag is not None:
        size += 2 + len(tag_bytes(tag))
    if headers:
        for name, header_value in _header_items(headers):
            size += 6 + len(utf8(name, "header name")) + (0 if header_value is None else byte_count(header_value))
    return size


def encode_record(
    value: bytes,
    key: bytes,
    timestamp_ns: int,
    headers: Mapping[str, bytes] | None = None,
    attributes: int = 0,
    tag: str | None = None,
    transaction: TransactionFields | None = None,
) -> bytes:
    """The bytes of one record (``tag``: None, or a str that ``tag_bytes`` takes; ``transaction``:
    None, or the fields of a transactional record or marker, which set attributes bits 2 and 3)."""
    if not _I64_MIN <= timestamp_ns <= _I64_MAX:
        raise InvalidArgumentError(f"timestamp_ns {timestamp_ns} does not fit in a signed 64-bit integer")
    if attributes & (TRANSACTIONAL | CONTROL | _RESERVED):
        raise InvalidArgumentError(
            f"attributes 0x{attributes:02x}: bits 2 and 3 come with a transaction's fields (transaction=), "
            "bits 5 to 7 are reserved"
        )
    header_bytes = _encode_headers(headers) if headers else _NO_HEADERS
    if type(key) is not bytes:
        key = bytes(key)  # its key_len is its bytes' count, whatever a view's items are
    if transaction is not None:  # its fields come after the tag field, before the headers
        producer_field, transaction_bits = _transaction_field(transaction)
        header_bytes = producer_field + header_bytes
        attributes |= transaction_bits
    if tag is not None:
        field = _TAG_FIELDS.get(tag) if type(tag) is str else None
        if field is None:
            field = _tag_field(tag)
        header_bytes = field + header_bytes
        attributes |= TAGGED
    body = b"".join((_AFTER_CRC.pack(MAGIC_V1, attributes, timestamp_ns, len(key)), key, header_bytes, value))
    size = len(body) + 8
    if size > _MAX_U32:
        raise InvalidArgumentError(f"a record is at most {_MAX_U32} bytes, this one would be {size}")
    return _SIZE_CRC.pack(size, crc32c(body)) + body


def encode_batch(
    values: Sequence[bytes],
    keys: Sequence[bytes],
    timestamps: Sequence[int],
    headers: Sequence[Mapping[str, bytes] | None] | None = None,
    tags: Sequence[str | None] | None = None,
) -> list[bytes]:
    """``encode_record`` for many records at once (same bytes, a fraction of the calls)."""
    if tags is not None and headers is not None:
        return [
            encode_record(v, k, t, h, 0, tag)
            for v, k, t, h, tag in zip(values, keys, timestamps, headers, tags, strict=True)
        ]
    if tags is not None:
        return _encode_tagged_batch(values, keys, timestamps, tags)
    if headers is not None:
        return [encode_record(v, k, t, h) for v, k, t, h in zip(values, keys, timestamps, headers, strict=True)]
    pack = _AFTER_CRC.pack
    pack_size_crc = _SIZE_CRC.pack
    join = b"".join
    crc = crc32c
    out: list[bytes] = []
    append = out.append
    try:
        for value, key, timestamp_ns in zip(values, keys, timestamps, strict=True):
            body = join((pack(MAGIC_V1, 0, timestamp_ns, len(key)), key, _NO_HEADERS, value))
            append(pack_size_crc(len(body) + 8, crc(body)) + body)
    except struct.error as error:
        raise InvalidArgumentError(f"a record field is out of range ({error}): timestamps are signed 64-bit") from None
    return out


def _encode_tagged_batch(
    values: Sequence[bytes], keys: Sequence[bytes], timestamps: Sequence[int], tags: Sequence[str | None]
) -> list[bytes]:
    """``encode_batch`` of records without headers, some tagged: each distinct tag's field (u16
    tag_len | UTF-8 tag | header_count 0) and attributes are checked and built once, then looked up
    a record by ``map`` (in C), so a tagged record costs what an untagged one does."""
    pack = _AFTER_CRC.pack
    pack_size_crc = _SIZE_CRC.pack
    join = b"".join
    crc = crc32c
    fields: dict[str | None, bytes] = {None: _NO_HEADERS}
    flags: dict[str | None, int] = {None: 0}
    for tag in set(tags):
        if tag not in fields:
            raw = tag_bytes(tag)
            fields[tag] = _U16.pack(len(raw)) + raw + _NO_HEADERS
            flags[tag] = TAGGED
    out: list[bytes] = []
    append = out.append
    try:
        for value, key, timestamp_ns, field, attributes in zip(
            values, keys, timestamps, map(fields.__getitem__, tags), map(flags.__getitem__, tags), strict=True
        ):
            body = join((pack(MAGIC_V1, attributes, timestamp_ns, len(key)), key, field, value))
            append(pack_size_crc(len(body) + 8, crc(body)) + body)
    except struct.error as error:
        raise InvalidArgumentError(f"a record field is out of range ({error}): timestamps are signed 64-bit") from None
    return out


def _check_size(size: int, position: int, max_record_bytes: int) -> None:
    if size < MIN_RECORD_BYTES:
        raise CorruptRecordError(f"record size {size} is below the minimum {MIN_RECORD_BYTES}", position=position)
    if size > max_record_bytes:
        raise CorruptRecordError(f"record size {size} is above the limit {max_record_bytes}", position=position)


def _parse_tag(buf: bytes | bytearray | memoryview, pos: int, end: int, record_position: int) -> tuple[str, int]:
    """The tag starting at ``pos`` (its tag_len field) of a record that has one; returns it and
    where the header_count field starts."""
    if pos + 2 > end:
        raise CorruptRecordError("key overruns the record", position=record_position)
    (tag_len,) = _U16.unpack_from(buf, pos)
    pos += 2
    if pos + tag_len + 2 > end:
        raise CorruptRecordError("the tag overruns the record", position=record_position)
    try:
        tag = bytes(buf[pos : pos + tag_len]).decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecordError("the tag is not UTF-8", position=record_position) from None
    return tag, pos + tag_len


def _parse_transaction(
    buf: bytes | bytearray | memoryview, pos: int, end: int, attributes: int, record_position: int
) -> tuple[TransactionFields | None, int]:
    """The transactional fields starting at ``pos`` (after the tag field) of a record whose attributes
    are ``attributes``; returns them (None for a record outside transactions) and where the
    header_count field starts. Raises for reserved bits, and for a marker without producer fields."""
    if attributes & _RESERVED:
        raise CorruptRecordError(f"reserved attribute bits are set (0x{attributes:02x})", position=record_position)
    if not attributes & TRANSACTIONAL:
        if attributes & CONTROL:
            raise CorruptRecordError("a control record without its transaction's fields", position=record_position)
        return None, pos
    if pos + _PRODUCER.size + 2 > end:
        raise CorruptRecordError("the transaction's fields overrun the record", position=record_position)
    producer_id, epoch = _PRODUCER.unpack_from(buf, pos)
    pos += _PRODUCER.size
    if not attributes & CONTROL:
        return TransactionFields(producer_id, epoch), pos
    if pos + _MARKER.size + 2 > end:
        raise CorruptRecordError("the marker's fields overrun the record", position=record_position)
    kind, coordinator_epoch, first_offset = _MARKER.unpack_from(buf, pos)
    if kind > 1:
        raise CorruptRecordError(f"a marker is 0 (abort) or 1 (commit), not {kind}", position=record_position)
    return TransactionFields(producer_id, epoch, kind == 1, coordinator_epoch, first_offset), pos + _MARKER.size


def _parse_headers(
    buf: bytes | bytearray | memoryview, pos: int, end: int, record_position: int
) -> tuple[Mapping[str, bytes], int]:
    """Headers starting at ``pos`` (the header_count field); returns them and the value's start."""
    if pos + 2 > end:
        raise CorruptRecordError("key overruns the record", position=record_position)
    (count,) = _U16.unpack_from(buf, pos)
    pos += 2
    if not count:
        return EMPTY_HEADERS, pos
    pairs: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        if pos + 2 > end:
            raise CorruptRecordError("headers overrun the record", position=record_position)
        (name_len,) = _U16.unpack_from(buf, pos)
        pos += 2
        if pos + name_len + 4 > end:
            raise CorruptRecordError("a header name overruns the record", position=record_position)
        try:
            name = bytes(buf[pos : pos + name_len]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("a header name is not UTF-8", position=record_position) from None
        pos += name_len
        (value_len,) = _U32.unpack_from(buf, pos)
        pos += 4
        if value_len == _NULL_LENGTH:
            pairs.append((name, None))
            continue
        if pos + value_len > end:
            raise CorruptRecordError("a header value overruns the record", position=record_position)
        pairs.append((name, bytes(buf[pos : pos + value_len])))
        pos += value_len
    headers = dict(pairs)  # one value per name: what every record without a repeat or a null gives
    if len(headers) != len(pairs) or None in headers.values():
        return Headers(pairs), pos
    return headers, pos  # type: ignore[return-value]  # no value is None: checked above


def decode_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> DecodedRecord | NeedMore:
    """Decode the record at ``buf[pos:]``, or say ``NEED_MORE`` if the buffer ends first."""
    available = len(buf) - pos
    if available < 4:
        return NEED_MORE
    (size,) = _U32.unpack_from(buf, pos)
    _check_size(size, pos, max_record_bytes)
    if available > MAGIC_AT and buf[pos + MAGIC_AT] != MAGIC_V1:
        raise CorruptRecordError(f"magic byte is 0x{buf[pos + MAGIC_AT]:02x}, not 0x{MAGIC_V1:02x}", position=pos)
    if available < size:
        return NEED_MORE
    end = pos + size
    _, stored_crc, _, attributes, timestamp_ns, key_len = _FIXED.unpack_from(buf, pos)
    if crc32c(memoryview(buf)[pos + MAGIC_AT : end]) != stored_crc:
        raise CorruptRecordError("CRC-32C mismatch", position=pos)
    key_start = pos + _FIXED_BYTES
    key_end = key_start + key_len
    if key_end > end:
        raise CorruptRecordError("key overruns the record", position=pos)
    tag, fields_at = _parse_tag(buf, key_end, end, pos) if attributes & TAGGED else (None, key_end)
    transaction, headers_at = (
        _parse_transaction(buf, fields_at, end, attributes, pos) if attributes else (None, fields_at)
    )
    headers, value_start = _parse_headers(buf, headers_at, end, pos)
    return DecodedRecord(
        timestamp_ns,
        bytes(buf[key_start:key_end]),
        bytes(buf[value_start:end]),
        headers,
        attributes,
        end,
        tag,
        transaction,
    )


def _plain_and_sound(
    buf: bytes, pos: int, end: int, limit: int, magic: int, attributes: int, stored_crc: int, key_len: int
) -> bool:
    """The fast check of the scans and the batch decoder: the record at ``pos`` (its fixed fields
    already unpacked) ends by ``limit``, has no tag and no headers, and its magic byte and CRC-32C
    are right. False sends the record to the careful path, which decides what is wrong (or that
    nothing is)."""
    key_end = pos + _FIXED_BYTES + key_len
    return (
        end <= limit
        and key_end + 2 <= end
        and magic == MAGIC_V1
        and not attributes & _NOT_PLAIN
        and not buf[key_end]
        and not buf[key_end + 1]
        and crc32c(buf[pos + MAGIC_AT : end]) == stored_crc
    )


def raise_record_error(buf: bytes, pos: int, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
    """Raise the ``CorruptRecordError`` that ``decode_messages`` raises for the record at ``pos``
    (which must be torn or bad): what the compiled decoder asks the reference for."""
    _decode_one(buf, pos, len(buf), max_record_bytes)
    raise AssertionError(f"the record at byte {pos} is whole and valid")


class ScannedRecords(NamedTuple):
    """The valid records at the start of a buffer, as columns, and where and why the scan stopped."""

    positions: list[int]
    sizes: list[int]
    timestamps: list[int]
    end: int  # just after the last valid record
    error: CorruptRecordError | None  # the bad record that stopped the scan; None if the buffer ran out


def scan_columns(buf: bytes, pos: int = 0, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> ScannedRecords:
    """Check every record from ``pos`` on (size, magic, CRC, fields), up to the first that is bad or torn.

    Recovery's hot path: a plain record (no headers) is checked with one combined test and nothing
    copied but the CRC'd bytes; any other record goes through ``decode_record``, which decides
    between "a torn tail" (the buffer ends inside it) and "bad" exactly as for a single record.
    """
    unpack = _FIXED.unpack_from
    positions: list[int] = []
    sizes: list[int] = []
    timestamps: list[int] = []
    add_position, add_size, add_timestamp = positions.append, sizes.append, timestamps.append
    limit = len(buf)
    start = pos
    careful = limit > max_record_bytes  # otherwise no record that fits the buffer can be too large
    error: CorruptRecordError | None = None
    try:
        while pos < limit:
            try:
                size, stored_crc, magic, attributes, timestamp_ns, key_len = unpack(buf, pos)
            except struct.error:  # fewer than 22 bytes left
                decode_record(buf, pos, max_record_bytes=max_record_bytes)  # raises, or it is a torn tail
                break
            end = pos + size
            if careful or not _plain_and_sound(buf, pos, end, limit, magic, attributes, stored_crc, key_len):
                decoded = decode_record(buf, pos, max_record_bytes=max_record_bytes)
                if decoded is NEED_MORE:
                    break
                end = decoded.end
            add_position(pos)
            add_size(size)
            add_timestamp(timestamp_ns)
            pos = end
    except CorruptRecordError as bad:
        error = bad
    valid_end = positions[-1] + sizes[-1] if positions else start
    return ScannedRecords(positions, sizes, timestamps, valid_end, error)


def is_valid_record(
    buf: bytes | bytearray | memoryview, pos: int, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> bool:
    """Whether a whole, valid record starts at ``pos``."""
    try:
        return decode_record(buf, pos, max_record_bytes=max_record_bytes) is not NEED_MORE
    except CorruptRecordError:
        return False


def next_valid_record(buf: bytes, start: int, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> int | None:
    """The first position at or after ``start`` where a whole, valid record begins, or None.

    Only positions with the magic byte in its place are tried, each with a CRC: on bytes that look
    like record headers that is quadratic, which is why recovery does not search this way (it tries
    only the positions an ``.index`` entry names: ``adiskq/_storage/recovery_plan.py``).
    """
    magic = bytes((MAGIC_V1,))
    candidate = buf.find(magic, start + MAGIC_AT)
    while candidate != -1:
        if is_valid_record(buf, candidate - MAGIC_AT, max_record_bytes=max_record_bytes):
            return candidate - MAGIC_AT
        candidate = buf.find(magic, candidate + 1)
    return None


def scan_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    scan: Callable[..., ScannedRecords] | None = None,
) -> Iterator[RecordExtent]:
    """The valid records from ``pos`` on, in order, up to the end of the buffer.

    Stops quietly where the buffer ends (a torn tail) and raises ``CorruptRecordError`` at the first
    bad record; recovery uses the position of either to know where the valid data ends.
    """
    scanned = (scan or scan_columns)(bytes(buf), pos, max_record_bytes=max_record_bytes)
    yield from map(RecordExtent, scanned.positions, scanned.sizes, scanned.timestamps)
    if scanned.error is not None:
        raise scanned.error


_new_message = tuple.__new__


def _decode_one(
    buf: bytes, pos: int, limit: int, max_record_bytes: int
) -> tuple[int, bytes, bytes, Mapping[str, bytes], int, str | None]:
    """The record at ``pos`` of a batch as (timestamp, key, value, headers, end, tag), checked field
    by field in order so that a CorruptRecordError names the first thing wrong."""
    if pos + MIN_RECORD_BYTES > limit:
        raise CorruptRecordError("the index points past the end of the data", position=pos)
    size, stored_crc, magic, attributes, timestamp_ns, key_len = _FIXED.unpack_from(buf, pos)
    end = pos + size
    if size < MIN_RECORD_BYTES or size > max_record_bytes or end > limit:
        _check_size(size, pos, max_record_bytes)
        raise CorruptRecordError("the record runs past the data its index entry covers", position=pos)
    if magic != MAGIC_V1:
        raise CorruptRecordError(f"magic byte is 0x{magic:02x}, not 0x{MAGIC_V1:02x}", position=pos)
    if crc32c(buf[pos + MAGIC_AT : end]) != stored_crc:
        raise CorruptRecordError("CRC-32C mismatch", position=pos)
    key_end = pos + _FIXED_BYTES + key_len
    if key_end + 2 > end:
        raise CorruptRecordError("key overruns the record", position=pos)
    tag, fields_at = _parse_tag(buf, key_end, end, pos) if attributes & TAGGED else (None, key_end)
    _, headers_at = _parse_transaction(buf, fields_at, end, attributes, pos) if attributes else (None, fields_at)
    headers, value_start = _parse_headers(buf, headers_at, end, pos)
    return timestamp_ns, buf[pos + _FIXED_BYTES : key_end], buf[value_start:end], headers, end, tag


@functools.lru_cache(maxsize=16)
def _uniform_getters(
    size: int, key_len: int, count: int
) -> tuple[
    Callable[[bytes], tuple[bytes, ...]], Callable[[bytes], tuple[bytes, ...]], Callable[[bytes], tuple[bytes, ...]]
]:
    """Functions that cut the CRC'd bodies, the keys and the values out of ``count`` records of
    ``size`` bytes: one ``itemgetter`` of many slices cuts them all in one C loop (measured ~2x
    faster than mapping over the slices). ``count`` is at least 2, so each returns a tuple."""
    total = size * count
    value_start = _FIXED_BYTES + key_len + 2

    def spans(start: int, stop: int) -> Callable[[bytes], tuple[bytes, ...]]:
        slices = map(slice, range(start, start + total, size), range(stop, stop + total, size))
        return operator.itemgetter(*slices)

    return spans(MAGIC_AT, size), spans(_FIXED_BYTES, _FIXED_BYTES + key_len), spans(value_start, size)


def _column(buf: bytes, offset: int, width: int, size: int, count: int) -> bytes:
    """The ``width`` bytes at ``offset`` of each of ``count`` records of ``size`` bytes, end to end."""
    column = bytearray(width * count)
    for byte in range(width):
        column[byte::width] = buf[offset + byte :: size]
    return bytes(column)


def _decode_uniform(buf: bytes, partition: int, first_offset: int, count: int) -> list[Message] | None:
    """The Messages of a batch of same-sized records with same-sized keys and no headers, or None.

    Such batches (fixed-size values: the common case) are checked and decoded column by column at C
    speed: every record's size, magic, key length and header count must equal the first record's,
    and every CRC must match, or this returns None and the record-by-record path (which also names
    the first bad byte) takes over.
    """
    size, rest = divmod(len(buf), count)
    if rest or size < MIN_RECORD_BYTES:
        return None
    (key_len,) = _U32.unpack_from(buf, KEY_LENGTH_AT)
    header_count_at = _FIXED_BYTES + key_len
    if (
        header_count_at + 2 > size
        or _U32.unpack_from(buf, SIZE_AT)[0] != size
        or buf[MAGIC_AT] != MAGIC_V1
        or buf[ATTRIBUTES_AT] & _NOT_PLAIN
    ):
        return None
    if buf[header_count_at] or buf[header_count_at + 1]:
        return None
    # Bytes that must be the same in every record: size, magic, attributes (no tag; keyless or not), key_len,
    # header_count.
    same = (*range(SIZE_AT, SIZE_AT + 4), MAGIC_AT, ATTRIBUTES_AT, *range(KEY_LENGTH_AT, KEY_LENGTH_AT + 4))
    for offset in (*same, header_count_at, header_count_at + 1):
        if buf[offset::size] != buf[offset : offset + 1] * count:
            return None
    bodies, keys, values = _uniform_getters(size, key_len, count)
    stored_crcs = struct.unpack(f"<{count}I", _column(buf, CRC_AT, 4, size, count))
    if tuple(map(crc32c, bodies(buf))) != stored_crcs:
        return None
    timestamps = struct.unpack(f"<{count}q", _column(buf, TIMESTAMP_AT, 8, size, count))
    return list(
        map(
            _new_message,
            itertools.repeat(Message),
            zip(
                itertools.repeat(partition),
                range(first_offset, first_offset + count),
                timestamps,
                keys(buf),
                values(buf),
                itertools.repeat(EMPTY_HEADERS),
                itertools.repeat(None),
            ),
        )
    )


def decode_messages(
    buf: bytes,
    partition: int,
    first_offset: int,
    count: int,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    dictionaries: Dictionaries | None = None,
) -> list[Message]:
    """Exactly ``count`` records that fill ``buf``, as Messages numbered from ``first_offset``.

    This is the read hot path: it trusts nothing (size, magic and CRC of every record are checked)
    but avoids every per-record cost it can. Positions in errors count from the start of ``buf``.
    A compressed record's value is decompressed with the stream's ``dictionaries`` (compression.py).
    """
    limit = len(buf)
    if count >= _UNIFORM_MIN_COUNT and limit <= max_record_bytes:
        uniform = _decode_uniform(buf, partition, first_offset, count)
        if uniform is not None:
            return uniform
    unpack = _FIXED.unpack_from
    new = _new_message
    message_type = Message
    no_headers = EMPTY_HEADERS
    messages: list[Message] = []
    append = messages.append
    pos = 0
    offset = first_offset
    # When the whole buffer is within max_record_bytes, no record in it can be larger, and the
    # fast loop below need not check each size against it.
    careful = limit > max_record_bytes
    transactions: dict[int, TransactionFields] = {}
    try:
        for offset in range(first_offset, first_offset + count):
            size, stored_crc, magic, attributes, timestamp_ns, key_len = unpack(buf, pos)
            end = pos + size
            # Anything but a plain record, whole and sound (a tag, headers, damage, a record cut
            # short, a size too small) goes through _decode_one, which says what is wrong.
            if careful or not _plain_and_sound(buf, pos, end, limit, magic, attributes, stored_crc, key_len):
                timestamp_ns, key, value, headers, end, tag = _decode_one(buf, pos, limit, max_record_bytes)
                attributes = buf[pos + ATTRIBUTES_AT]
                if attributes & COMPRESSED:
                    value = _decompressed(dictionaries, value, max_record_bytes, pos)
                if attributes & TRANSACTIONAL:
                    fields = record_transaction(buf[pos:end])
                    assert fields is not None
                    transactions[offset - first_offset] = fields
                append(new(message_type, (partition, offset, timestamp_ns, key, value, headers, tag)))
            else:
                key_end = pos + _FIXED_BYTES + key_len
                append(
                    new(
                        message_type,
                        (
                            partition,
                            offset,
                            timestamp_ns,
                            buf[pos + _FIXED_BYTES : key_end],
                            buf[key_end + 2 : end],
                            no_headers,
                            None,
                        ),
                    )
                )
            pos = end
    except struct.error:  # fewer than 22 bytes left: _decode_one says so precisely
        _decode_one(buf, pos, limit, max_record_bytes)
        raise  # pragma: no cover - _decode_one always raises here
    if pos != limit:
        raise CorruptRecordError("records and index entries disagree about the data's length", position=pos)
    if transactions:
        batch = TransactionalBatch(messages)
        batch.transactions = transactions
        return batch
    return messages


def _decompressed(dictionaries: Dictionaries | None, frame: bytes, limit: int, position: int) -> bytes:
    """A compressed record's value, or CorruptRecordError when no dictionaries were given."""
    if dictionaries is None:
        raise CorruptRecordError(
            "the record's value is compressed, and this reader was given no zstd dictionaries: read it through "
            "its stream",
            position=position,
        )
    return dictionaries.decompress(frame, limit, position)


def record_key(record: bytes) -> bytes:
    """The key of one encoded (and already checked) record."""
    length = _U32.unpack_from(record, KEY_LENGTH_AT)[0]
    return record[KEY_AT : KEY_AT + length]


def record_tag(record: bytes) -> bytes | None:
    """The UTF-8 tag of one encoded (and already checked) record, or None when it has none."""
    if not record[ATTRIBUTES_AT] & TAGGED:
        return None
    tag_at = KEY_AT + _U32.unpack_from(record, KEY_LENGTH_AT)[0]
    (length,) = _U16.unpack_from(record, tag_at)
    return record[tag_at + 2 : tag_at + 2 + length]


def record_transaction(record: bytes) -> TransactionFields | None:
    """The transactional fields of one encoded (and already checked) record, or None outside transactions."""
    attributes = record[ATTRIBUTES_AT]
    if not attributes & TRANSACTIONAL:
        return None
    at = KEY_AT + _U32.unpack_from(record, KEY_LENGTH_AT)[0]
    if attributes & TAGGED:
        at += 2 + _U16.unpack_from(record, at)[0]
    return _parse_transaction(record, at, len(record), attributes, 0)[0]


def record_timestamp(record: bytes) -> int:
    """The timestamp_ns of one encoded (and already checked) record."""
    return int(_I64.unpack_from(record, TIMESTAMP_AT)[0])
