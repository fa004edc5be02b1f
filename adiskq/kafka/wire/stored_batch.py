"""adiskq's stored records straight to one Kafka record batch (v2): what a Fetch answers with. No I/O.

``batch_from_stored`` takes the bytes of a run of stored records (as the segment's ``.data`` holds
them: ``codec.py`` has the layout) and returns the batch ``wire.codec.encode_messages`` makes of
the Messages a reader decodes from them, mapped by the gateway's rules (``wire/mapping.py``): base
offset the run's first, timestamps floored from nanoseconds to milliseconds, headers in their stored
order, a key or value the ``nulls_header`` names as null written as null and that header left out,
the generated key of a push given none (``codec.py``: attributes bit 4) written as null,
compressed values decompressed. The compiled core does it in one call a run, without a ``Message`` a
record (``adiskq/_csrc/kafka/stored_batch.c``); ``batch_from_stored_reference`` is its pure-Python reference,
which decodes and encodes through the two references.

Both answer None off the plain path: a record that is not whole and valid, records that end before
the bytes do, a value that will not decompress (for the compiled core: whose dictionary is not
prepared yet), a record written in a Kafka transaction or a marker (``codec.py``: attributes bit 2;
the gateway sends those in batches of their own), a record that repeats a header name or has a null
header value (its Message holds a ``Headers``) or has more than ``MAX_PLAIN_HEADERS`` headers, a
batch over 2**31 - 1 bytes. Escaped header names are served unescaped
(``wire.codec.served_header_name``). The caller then reads
Messages, which raise the error naming the damage, or handle the unusual record.
"""

from __future__ import annotations

import struct
from typing import Final

from ..._errors import CorruptRecordError
from ..._sansio import codec
from ..._sansio.codec import ATTRIBUTES_AT, KEY_AT, KEY_LENGTH_AT, KEYLESS, MIN_RECORD_BYTES, TAGGED, TRANSACTIONAL
from ..._sansio.compression import Dictionaries
from ..._sansio.native import NATIVE
from .codec import encode_messages
from .mapping import MAX_PLAIN_HEADERS

__all__ = ["batch_from_stored", "batch_from_stored_reference"]

_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_MAX_BATCH_BYTES: Final = 2**31 - 1
_MAX_OFFSET: Final = 2**63 - 1
_NULL_LENGTH: Final = 0xFFFF_FFFF  # a header value_len that says the value is null (codec.py)


def _check_arguments(first_offset: int, count: int, max_record_bytes: int, partition_leader_epoch: int) -> None:
    """The compiled function's checks, with its errors."""
    for name, value, low, high in (
        ("first_offset", first_offset, 0, _MAX_OFFSET),
        ("count", count, 1, 2**31 - 1),
        ("max_record_bytes", max_record_bytes, 0, _MAX_OFFSET),
        ("partition_leader_epoch", partition_leader_epoch, -(2**31), 2**31 - 1),
    ):
        if not isinstance(value, int):
            raise TypeError(f"kafka_batch_from_stored: {name} is an int")
        if not low <= value <= high:
            raise ValueError(f"kafka_batch_from_stored: {name} must be within [{low}, {high}]")
    if first_offset > _MAX_OFFSET - (count - 1):
        raise ValueError("kafka_batch_from_stored: the last offset is past 2**63 - 1")


def _header_names(buf: bytes, pos: int) -> list[bytes] | None:
    """The header names of the (checked) record at ``pos``, in their stored order; None when a
    header's value is null (Kafka's null: off the plain path)."""
    at = pos + KEY_AT + _U32.unpack_from(buf, pos + KEY_LENGTH_AT)[0]
    if buf[pos + ATTRIBUTES_AT] & TAGGED:
        at += 2 + _U16.unpack_from(buf, at)[0]
    (count,) = _U16.unpack_from(buf, at)
    at += 2
    names = []
    for _ in range(count):
        (length,) = _U16.unpack_from(buf, at)
        names.append(buf[at + 2 : at + 2 + length])
        at += 2 + length
        (value_length,) = _U32.unpack_from(buf, at)
        if value_length == _NULL_LENGTH:
            return None
        at += 4 + value_length
    return names


def batch_from_stored_reference(
    data: bytes | bytearray | memoryview,
    first_offset: int,
    count: int,
    *,
    max_record_bytes: int,
    dictionaries: Dictionaries | None,
    nulls_header: str | None,
    partition_leader_epoch: int = 0,
) -> bytes | None:
    """The batch of the ``count`` stored records filling ``data``, numbered from ``first_offset``;
    None off the plain path (see the module's docstring)."""
    _check_arguments(first_offset, count, max_record_bytes, partition_leader_epoch)
    if nulls_header is not None and not isinstance(nulls_header, str):
        raise TypeError("kafka_batch_from_stored: nulls_header is a str or None")
    buf = bytes(data)
    if count > len(buf) // MIN_RECORD_BYTES:
        return None
    try:
        messages = codec.decode_messages(
            buf, 0, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
        )
    except CorruptRecordError:
        return None
    pos = 0
    for number in range(count):
        attributes = buf[pos + ATTRIBUTES_AT]
        if attributes & TRANSACTIONAL:
            return None  # a transaction's records and markers go out in batches of their own
        if attributes & KEYLESS:  # a push given no key: served as Kafka's null key
            messages[number] = messages[number]._replace(key=None)  # type: ignore[arg-type]
        names = _header_names(buf, pos)
        if names is None or len(names) > MAX_PLAIN_HEADERS or len(set(names)) != len(names):
            return None
        pos += _U32.unpack_from(buf, pos)[0]
    batch = encode_messages(messages, nulls_header=nulls_header, partition_leader_epoch=partition_leader_epoch)
    return None if len(batch) > _MAX_BATCH_BYTES else batch


def batch_from_stored(
    data: bytes | bytearray | memoryview,
    first_offset: int,
    count: int,
    *,
    max_record_bytes: int,
    dictionaries: Dictionaries | None,
    nulls_header: str | None,
    partition_leader_epoch: int = 0,
) -> bytes | None:
    """``batch_from_stored_reference``, by the compiled core when it is built."""
    if NATIVE is None:
        return batch_from_stored_reference(
            data,
            first_offset,
            count,
            max_record_bytes=max_record_bytes,
            dictionaries=dictionaries,
            nulls_header=nulls_header,
            partition_leader_epoch=partition_leader_epoch,
        )
    batch: bytes | None = NATIVE.kafka_batch_from_stored(
        data,
        first_offset,
        count,
        max_record_bytes,
        None if dictionaries is None else dictionaries.compiled,
        nulls_header,
        partition_leader_epoch,
    )
    return batch
