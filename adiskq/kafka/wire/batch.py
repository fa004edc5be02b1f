"""Kafka record batches (v2) for the Kafka gateway: decode a Produce request's batches, encode Fetch's.

The compiled core (``adiskq/_csrc/kafka/*.c``) does the per-record work when it is built; the
pure-Python reference (``wire/codec.py``, which has the format) runs with ``ADISKQ_NO_EXTENSIONS=1``
and names every fault: the compiled functions answer None or NotImplemented for anything but plain,
valid input, and the reference then raises its own error, so errors are the reference's word for
word. Compression (``wire/compression.py``) stays in Python, through its libraries; the compiled core
decodes and encodes the uncompressed records around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..._sansio.native import NATIVE
from ..._sansio.values import Message
from . import codec as reference
from .codec import (
    DEFAULT_MAX_BYTES,
    KafkaBatch,
    KafkaBatchError,
    KafkaCorruptBatchError,
    KafkaRecord,
    KafkaUnsupportedBatchError,
)

__all__ = [
    "COMPILED",
    "DEFAULT_MAX_BYTES",
    "KafkaBatch",
    "KafkaBatchError",
    "KafkaCorruptBatchError",
    "KafkaRecord",
    "KafkaUnsupportedBatchError",
    "decode_batches",
    "encode_batch",
    "encode_batch_from_messages",
]

COMPILED: Final = NATIVE is not None


def _compiled_decode_records(
    buf: bytes, pos: int, end: int, count: int, base_timestamp_ms: int, where: str
) -> list[KafkaRecord]:
    assert NATIVE is not None
    records: list[KafkaRecord] | None = NATIVE.kafka_decode_records(
        buf, pos, end, count, base_timestamp_ms, KafkaRecord
    )
    if records is None:  # bad bytes: the reference says what is wrong, and where
        return reference.decode_records(buf, pos, end, count, base_timestamp_ms, where)
    return records


def _compiled_encode_records(records: Sequence[KafkaRecord], base_timestamp_ms: int) -> tuple[bytes, int, int]:
    assert NATIVE is not None
    encoded: tuple[bytes, int, int] = NATIVE.kafka_encode_records(records, base_timestamp_ms)
    if encoded is NotImplemented:
        return reference.encode_records(records, base_timestamp_ms)
    return encoded


def decode_batches(
    data: bytes | bytearray | memoryview, *, max_bytes: int = DEFAULT_MAX_BYTES, transactional: bool = False
) -> list[KafkaBatch]:
    """Every batch of a Produce request's records field, back to back, which they must fill exactly.

    Raises ``KafkaBatchError`` (``KafkaCorruptBatchError`` for a CRC mismatch,
    ``KafkaUnsupportedBatchError`` for older formats, control batches, and transactional batches
    unless ``transactional``) naming the first fault and its byte. ``max_bytes`` bounds the bytes
    of records, after decompression, of the call. (The compiled decoder leaves a transactional
    batch to the reference.)
    """
    if NATIVE is None or type(max_bytes) is not int or max_bytes < 0:
        return reference.decode_batches(data, max_bytes=max_bytes, transactional=transactional)
    if isinstance(data, bytes | bytearray | memoryview) and (type(data) is not memoryview or data.c_contiguous):
        batches: list[KafkaBatch] | None = NATIVE.kafka_decode_batches(data, max_bytes, KafkaRecord, KafkaBatch)
        if batches is not None:
            return batches
    # Compressed batches (decompressed in Python), or a fault the reference names.
    return reference.decode_batches(
        data, max_bytes=max_bytes, records_decoder=_compiled_decode_records, transactional=transactional
    )


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
) -> bytes:
    """The bytes of one batch of ``records`` (at least one; offset deltas increasing from 0 or more).

    ``compression`` is Kafka's codec number (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd);
    ``max_timestamp_ms`` is the records' latest; the timestamp type is CreateTime;
    ``partition_leader_epoch`` is the epoch Metadata reports for the partition.
    """
    records_encoder = reference.encode_records
    if NATIVE is not None:
        if compression == 0 and type(compression) is int:
            encoded: bytes = NATIVE.kafka_encode_batch(
                base_offset,
                records,
                base_timestamp_ms,
                producer_id,
                producer_epoch,
                base_sequence,
                partition_leader_epoch,
            )
            if encoded is not NotImplemented:
                return encoded
        # Compressed batches, or input the compiled encoder leaves to the reference to name.
        records_encoder = _compiled_encode_records
    return reference.encode_batch(
        base_offset=base_offset,
        records=records,
        base_timestamp_ms=base_timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression=compression,
        partition_leader_epoch=partition_leader_epoch,
        records_encoder=records_encoder,
    )


def encode_batch_from_messages(
    messages: Sequence[Message], *, nulls_header: str | None = None, partition_leader_epoch: int = 0
) -> bytes:
    """One uncompressed batch of stored messages (consecutive offsets of one partition, as a reader
    returns them), built without a KafkaRecord in between: what a Fetch answers with.

    The base offset is the first message's, timestamps are floored to milliseconds, headers keep
    their order; ``nulls_header`` names the header in which a message records that its Kafka key or
    value was null (``key``, ``value`` or ``key,value``): that key or value is written as null and
    the header left out.
    """
    if NATIVE is not None and (nulls_header is None or type(nulls_header) is str):
        encoded: bytes = NATIVE.kafka_encode_messages(messages, nulls_header, partition_leader_epoch)
        if encoded is not NotImplemented:
            return encoded
    return reference.encode_messages(messages, nulls_header=nulls_header, partition_leader_epoch=partition_leader_epoch)
