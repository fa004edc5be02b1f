"""Kafka records as adiskq's stored records, and the rules between the two: no I/O.

The mapping, exact in both directions (the Kafka gateway's, ``adiskq/kafka/_records.py``):

- a Kafka timestamp in milliseconds is stored as ``ms * 1_000_000`` nanoseconds; a negative one (no
  timestamp), or any in a batch stamped LogAppendTime, is stored as the time of the write. One past
  ``MAX_TIMESTAMP_MS`` (in the year 2262) does not fit 64 bits of nanoseconds and is refused
  (``TimestampRefusedError``: Kafka's INVALID_TIMESTAMP, which a client does not retry);
- keys and values are bytes on both sides. Kafka also has null: a null key or value is stored as
  empty bytes plus the header ``NULLS_HEADER`` whose value names which were null (``key``,
  ``value`` or ``key,value``), added after the record's own headers;
- headers keep their order, exactly: a record that repeats a header name or has a null header
  value is stored with a ``values.Headers`` (every header as it came, which only a format-5 stream
  holds: the writer refuses it on an older one, saying to run ``adiskq upgrade``). A Kafka header
  named as the nulls header, or as it followed by ``~`` marks, is stored with one ``~`` more
  (``stored_header_name``), and served back with one fewer (``wire.codec.served_header_name``):
  ``adiskq.kafka.null`` round-trips, stored as ``adiskq.kafka.null~``.

``stored_records`` is the pure-Python reference of the compiled ``kafka_stored_records``
(``adiskq/_csrc/kafka/mapping.c``): a Kafka batch's records section (uncompressed) straight to a run
of stored records (``run_entries.py``): the bytes adiskq's encoder writes for them
(``codec.encode_record``) back to back, their ``.index`` and ``.timeindex`` entries numbered from 0,
and their key hashes (``keyindex.key_hash``, packed as the key index stores them), so a Produce
writes them without building a ``KafkaRecord``, a ``Record`` or a bytes object a message. Both
answer None for anything off the plain path (bytes the Kafka decoder refuses, a record the mapping
refuses or the encoder cannot store, a record with a null header value or a repeated header name,
a record with more than ``MAX_PLAIN_HEADERS`` headers); the
caller then takes the step by step path, whose errors name the fault.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Final

from ..._errors import InvalidArgumentError
from ..._sansio.codec import encode_record
from ..._sansio.entries import EncodedRun
from ..._sansio.keyindex import pack_hashes
from ..._sansio.native import NATIVE
from ..._sansio.values import Headers
from .codec import HEADER_ESCAPE, KafkaBatchError, KafkaRecord, decode_records

__all__ = [
    "MAX_PLAIN_HEADERS",
    "MAX_TIMESTAMP_MS",
    "NULLS_HEADER",
    "MappingRefusedError",
    "TimestampRefusedError",
    "record_fields",
    "stored_header_name",
    "stored_records",
    "stored_records_reference",
]

NULLS_HEADER: Final = "adiskq.kafka.null"
# Records with more headers than this are left to the step by step path (the compiled check for a
# repeated name compares each name with those before it).
MAX_PLAIN_HEADERS: Final = 64
# The latest Kafka timestamp adiskq stores: its nanoseconds are the largest that fit an int64.
MAX_TIMESTAMP_MS: Final = (2**63 - 1) // 1_000_000
_NULL_TEXT: Final = {(True, False): b"key", (False, True): b"value", (True, True): b"key,value"}


class MappingRefusedError(ValueError):
    """A Kafka record adiskq cannot store exactly; the message says why and what to send instead."""


class TimestampRefusedError(MappingRefusedError):
    """A Kafka timestamp later than adiskq stores (``MAX_TIMESTAMP_MS``)."""


def stored_header_name(name: str) -> str:
    """The name a Kafka header is stored under: itself, but for the nulls header's name and that name
    followed by escape marks, which take one mark more (so the stored nulls header is never a
    Kafka header's, and each stored name is one Kafka name)."""
    if name.startswith(NULLS_HEADER):
        marks = name[len(NULLS_HEADER) :]
        if marks == HEADER_ESCAPE * len(marks):
            return name + HEADER_ESCAPE
    return name


def record_fields(
    record: KafkaRecord, now_ns: int, log_append: bool
) -> tuple[bytes, bytes, Mapping[str, bytes] | None, int]:
    """The stored value, key, headers and timestamp (ns) of one Kafka record, by the rules above."""
    headers: dict[str, bytes] | None = None
    kafka_only = False  # a null value or a repeated name: kept as a Headers
    if record.headers:
        headers = {}
        for name, value in record.headers:
            stored_name = stored_header_name(name)  # (one stored name per Kafka name: repeats stay repeats)
            kafka_only = kafka_only or value is None or stored_name in headers
            headers[stored_name] = b"" if value is None else value
    key, value = record.key, record.value
    nulls = None if key is not None and value is not None else _NULL_TEXT[key is None, value is None]
    stored: Mapping[str, bytes] | None = headers
    if kafka_only:
        escaped = [(stored_header_name(name), header) for name, header in record.headers]
        stored = Headers([*escaped, *([] if nulls is None else [(NULLS_HEADER, nulls)])])
    elif nulls is not None:
        headers = headers or {}
        headers[NULLS_HEADER] = nulls
        stored = headers
    timestamp_ms = record.timestamp_ms
    if log_append or timestamp_ms < 0:
        timestamp_ns = now_ns
    elif timestamp_ms > MAX_TIMESTAMP_MS:
        raise TimestampRefusedError(
            f"timestamp {timestamp_ms} ms is later than adiskq stores (nanoseconds in 64 bits: up to "
            f"{MAX_TIMESTAMP_MS} ms, in the year 2262); send a timestamp in milliseconds, or none"
        )
    else:
        timestamp_ns = timestamp_ms * 1_000_000
    return b"" if value is None else value, b"" if key is None else key, stored, timestamp_ns


def stored_records_reference(
    buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_timestamp_ms: int, now_ns: int
) -> EncodedRun | None:
    """The ``count`` records filling ``buf[pos:end]`` (a CreateTime batch's), as adiskq stores
    them; None off the plain path (see the module's docstring), or for a negative count."""
    if count < 0:
        return None
    try:
        kafka_records = decode_records(bytes(buf), pos, end, count, base_timestamp_ms, "")
    except KafkaBatchError:
        return None
    records: list[bytes] = []
    index: list[int] = []
    timeindex: list[int] = []
    key_hashes: list[int] = []
    position = 0
    for offset, record in enumerate(kafka_records):
        if len(record.headers) > MAX_PLAIN_HEADERS:
            return None
        if any(name.startswith(NULLS_HEADER) for name, _ in record.headers):
            return None  # (maybe escaped: the step by step path stores it, as the compiled one leaves it)
        try:
            value, key, headers, timestamp_ns = record_fields(record, now_ns, False)
            if type(headers) is Headers:  # only a format-5 stream holds it: the producer checks that
                return None
            stored = encode_record(value, key, timestamp_ns, headers)
        except (MappingRefusedError, InvalidArgumentError):
            return None
        records.append(stored)
        index += (offset, position, len(stored))
        timeindex += (offset, timestamp_ns)
        position += len(stored)
        key_hashes.append(zlib.crc32(key))
    return EncodedRun(
        b"".join(records),
        struct.pack(f"<{len(index)}Q", *index),
        struct.pack(f"<{len(timeindex)}q", *timeindex),
        pack_hashes(key_hashes),
        b"",  # a Kafka record carries no tag
        max(map(len, records), default=0),
    )


def _compiled_stored_records(
    buf: bytes | bytearray | memoryview, pos: int, end: int, count: int, base_timestamp_ms: int, now_ns: int
) -> EncodedRun | None:
    assert NATIVE is not None
    found: tuple[bytes, bytes, bytes, bytes, bytes, int] | None = NATIVE.kafka_stored_records(
        buf, pos, end, count, base_timestamp_ms, now_ns, NULLS_HEADER
    )
    return None if found is None else tuple.__new__(EncodedRun, found)


# The compiled core's when it is built, the reference's otherwise.
stored_records: Final[Callable[[bytes | bytearray | memoryview, int, int, int, int, int], EncodedRun | None]] = (
    stored_records_reference if NATIVE is None else _compiled_stored_records
)
