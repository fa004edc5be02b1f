"""A mirrored record, both ways between adiskq messages and Kafka records: no I/O.

The rules (``docs/MIRROR.md``, "What maps, and what does not"):

- key and value are bytes both ways. A Kafka null key or value is stored as empty bytes plus the
  header ``adiskq.kafka.null`` (the gateway's rule, ``kafka/wire/mapping.py``); a local record
  with that header goes to Kafka with null where it says, and without the header;
- a Kafka timestamp (ms) is stored as ``ms * 1_000_000`` ns; a local one reaches Kafka as its
  millisecond (the sub-millisecond part is dropped);
- a local record's tag travels as the header ``adiskq.tag`` (its UTF-8), and that header coming back
  from Kafka becomes the tag again;
- Kafka headers are a list. A format-5 stream stores one as it is (``adiskq.Headers``: repeated
  names and null values in order), so a record that repeats a name or has a null value is stored
  with its headers as Kafka had them, plus the mirror's own. On an older stream (one value a name),
  and for a record using a name the mirror reserves, the record keeps, as headers, the first value
  of each other name, and its exact list in the header ``adiskq.kafka.headers`` (the format below),
  from which the way back restores the list;
- the Kafka offset a record came from is the header ``adiskq.kafka.offset`` (decimal ASCII): the
  mirror's position in a local stream. It does not go back to Kafka.

``adiskq.kafka.headers`` holds a header list exactly, big-endian as Kafka's own protocol: u16 count,
then per header u16 name length, the UTF-8 name, i32 value length (-1: null), the value bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from .._sansio.codec import encode_record
from .._sansio.values import Headers, Message, Record, header_pairs
from .wire.mapping import NULLS_HEADER

__all__ = [
    "EXACT_HEADERS",
    "OFFSET_HEADER",
    "RESERVED_HEADERS",
    "TAG_HEADER",
    "KafkaSide",
    "decode_header_list",
    "encode_header_list",
    "local_record",
    "offset_of",
    "record_crc",
    "to_kafka",
]

OFFSET_HEADER: Final = "adiskq.kafka.offset"
EXACT_HEADERS: Final = "adiskq.kafka.headers"
TAG_HEADER: Final = "adiskq.tag"
RESERVED_HEADERS: Final = frozenset({OFFSET_HEADER, EXACT_HEADERS, NULLS_HEADER})
_MAX_TAG_BYTES: Final = 255

KafkaHeaders = list[tuple[str, bytes | None]]


class KafkaSide(NamedTuple):
    """A record as the mirror produces it to Kafka."""

    key: bytes | None
    value: bytes | None
    headers: KafkaHeaders
    timestamp_ms: int


def encode_header_list(headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    """The exact header list, in ``adiskq.kafka.headers``'s format."""
    parts = [struct.pack(">H", len(headers))]
    for name, value in headers:
        encoded = name.encode()
        parts.append(struct.pack(">H", len(encoded)) + encoded)
        parts.append(struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value)
    return b"".join(parts)


def decode_header_list(data: bytes) -> KafkaHeaders:
    """The header list ``encode_header_list`` wrote; ValueError for other bytes."""
    try:
        (count,) = struct.unpack_from(">H", data, 0)
        position = 2
        headers: KafkaHeaders = []
        for _ in range(count):
            (name_length,) = struct.unpack_from(">H", data, position)
            position += 2
            if position + name_length > len(data):
                raise ValueError(f"header {EXACT_HEADERS!r} is damaged: a name runs past the end")
            name = data[position : position + name_length].decode()
            position += name_length
            (value_length,) = struct.unpack_from(">i", data, position)
            position += 4
            if value_length < 0:
                headers.append((name, None))
            else:
                if position + value_length > len(data):
                    raise ValueError(f"header {EXACT_HEADERS!r} is damaged: a value runs past the end")
                headers.append((name, data[position : position + value_length]))
                position += value_length
    except (struct.error, UnicodeDecodeError) as error:
        raise ValueError(f"header {EXACT_HEADERS!r} is damaged: {error}") from None
    if position != len(data):
        raise ValueError(f"header {EXACT_HEADERS!r} has {len(data) - position} bytes past its list")
    return headers


def to_kafka(message: Message) -> KafkaSide:
    """A local message as the Kafka record the mirror produces for it."""
    stored: Mapping[str, bytes] = message.headers or {}
    exact = stored.get(EXACT_HEADERS)
    if exact is not None:
        headers = decode_header_list(exact)
    else:  # every header in order: a Headers' repeats and nulls too
        headers = [(name, value) for name, value in header_pairs(stored) if name not in RESERVED_HEADERS]
    if message.tag is not None:
        headers.append((TAG_HEADER, message.tag.encode()))
    nulls = stored.get(NULLS_HEADER, b"").split(b",")
    key = None if b"key" in nulls else message.key
    value = None if b"value" in nulls else message.value
    return KafkaSide(key, value, headers, message.timestamp_ns // 1_000_000)


def _tag_from(value: bytes | None) -> str | None:
    """The tag a Kafka ``adiskq.tag`` header names, or None when adiskq could not store it as one."""
    if value is None or not 1 <= len(value) <= _MAX_TAG_BYTES:
        return None
    try:
        return value.decode()
    except UnicodeDecodeError:
        return None


def local_record(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    timestamp_ms: int,
    offset: int,
    *,
    kafka_headers: bool = False,
) -> Record:
    """A Kafka record (from ``offset``) as the local record the mirror pushes; a negative timestamp
    (none) leaves the producer to stamp the write's time. ``kafka_headers``: the stream stores
    ``adiskq.Headers`` (format 5), so repeated names and null values are kept as they are."""
    timestamp = timestamp_ms * 1_000_000 if timestamp_ms >= 0 else None
    if not headers and key is not None and value is not None:  # the common case, without the checks below
        return Record(value, key=key, headers={OFFSET_HEADER: b"%d" % offset}, timestamp=timestamp)
    kafka_list = list(headers or ())
    tag: str | None = None
    tag_at = [i for i, (name, _) in enumerate(kafka_list) if name == TAG_HEADER]
    if len(tag_at) == 1:
        tag = _tag_from(kafka_list[tag_at[0]][1])
        if tag is not None:
            del kafka_list[tag_at[0]]
    names = [name for name, _ in kafka_list]
    plain = (
        len(set(names)) == len(names)
        and all(value is not None for _, value in kafka_list)
        and not RESERVED_HEADERS.intersection(names)
    )
    nulls = b",".join(name for name, missing in ((b"key", key is None), (b"value", value is None)) if missing)
    if not plain and kafka_headers and not RESERVED_HEADERS.intersection(names):
        pairs = list(kafka_list)
        if nulls:
            pairs.append((NULLS_HEADER, nulls))
        pairs.append((OFFSET_HEADER, b"%d" % offset))
        return Record(
            b"" if value is None else value,
            key=b"" if key is None else key,
            headers=Headers(pairs),
            timestamp=timestamp,
            tag=tag,
        )
    stored: dict[str, bytes] = {}
    for name, header_value in kafka_list:
        if header_value is not None and name not in RESERVED_HEADERS and name not in stored:
            stored[name] = header_value
    if not plain:
        stored[EXACT_HEADERS] = encode_header_list(kafka_list)
    if nulls:
        stored[NULLS_HEADER] = nulls
    stored[OFFSET_HEADER] = b"%d" % offset
    return Record(
        b"" if value is None else value,
        key=b"" if key is None else key,
        headers=stored,
        timestamp=timestamp,
        tag=tag,
    )


def offset_of(message: Message) -> int | None:
    """The Kafka offset a local record came from (its ``adiskq.kafka.offset``), None without one."""
    raw = (message.headers or {}).get(OFFSET_HEADER)
    if raw is None or not raw.isdigit():
        return None
    return int(raw)


def record_crc(message: Message) -> int:
    """CRC-32C of the message as adiskq's encoder writes it uncompressed (timestamp, key, tag,
    headers, value): what the mirror's position remembers of the record it shipped last."""
    encoded = encode_record(message.value, message.key, message.timestamp_ns, message.headers or None, 0, message.tag)
    crc: int = struct.unpack_from("<I", encoded, 4)[0]
    return crc
