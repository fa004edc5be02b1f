"""The Produce and Fetch responses written straight to bytes: the answers of the gateway's hot path.

Every other response is a kio dataclass written by kio; these two are answered per message batch, and
building their dataclasses and walking them through kio's generic writer cost more than the rest of
a small request's handling. So their handlers give the fields to the functions here, which write
exactly the bytes kio writes for the same response (``tests/kafka/wire/test_fast_responses.py`` compares
them for every version the gateway serves). The payloads, after the response header, from Kafka's
``ProduceResponse.json`` and ``FetchResponse.json``; ``[X]`` is an array of X, big-endian integers::

    ProduceResponse v3..v11
        [topic]          name: string; [partition]
            partition    index: i32, error_code: i16, base_offset: i64, log_append_time_ms: i64 (-1),
                         log_start_offset: i64 (v5+), [record_error] (v8+), error_message (v8+)
            record_error batch_index: i32, batch_index_error_message: nullable string
        throttle_time_ms: i32

    FetchResponse v4..v16
        throttle_time_ms: i32, error_code: i16 (v7+), session_id: i32 (v7+)
        [topic]          topic: string (v4..v12) | topic_id: uuid, 16 bytes (v13+); [partition]
            partition    partition_index: i32, error_code: i16, high_watermark: i64,
                         last_stable_offset: i64, log_start_offset: i64 (v5+),
                         aborted_transactions: nullable array (always null here),
                         preferred_read_replica: i32 (v11+), records: nullable bytes

Flexible versions (Produce v9+, Fetch v12+) write strings, arrays and bytes in their compact forms
(an unsigned varint of length + 1, 0 for null) and end every structure with its tagged fields: one
0 byte, none written. The tagged fields those versions define all tell a client where a partition's
leader moved (Produce v10+: a partition's ``CurrentLeader`` and the response's ``NodeEndpoints``;
Fetch v12+: ``DivergingEpoch``, ``CurrentLeader`` and ``SnapshotId``, v16+: ``NodeEndpoints``), and
are left out at their defaults: this single broker leads every partition, for one epoch, and never
answers NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, which is when Kafka fills them in.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Final, NamedTuple

__all__ = [
    "FETCH_FLEXIBLE",
    "FETCH_TOPIC_IDS",
    "PRODUCE_FLEXIBLE",
    "FetchedPartition",
    "PiecesOfRecords",
    "ProducedPartition",
    "fetch_response",
    "fetch_response_pieces",
    "produce_response",
]

PRODUCE_FLEXIBLE: Final = 9  # the first Produce version with compact fields and tagged fields
FETCH_FLEXIBLE: Final = 12  # the same for Fetch
FETCH_TOPIC_IDS: Final = 13  # the first Fetch version naming topics by id instead of by name

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_PRODUCED: Final = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_I64: Final = struct.Struct(">q")
_FETCHED: Final = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable_offset
_FETCH_TOP: Final = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_NO_TAGS: Final = b"\x00"
_NULL_ARRAY: Final = _I32.pack(-1)
_NULL_COMPACT: Final = b"\x00"
_NO_APPEND_TIME: Final = -1  # the records keep their create time
_NO_READ_REPLICA: Final = _I32.pack(-1)


class ProducedPartition(NamedTuple):
    """One partition's Produce answer: its first offset, or an error (base offset -1)."""

    partition: int
    error_code: int
    base_offset: int
    # The record that made the broker refuse the batch (v8+): its index and why.
    record_error: tuple[int, str | None] | None = None
    error_message: str | None = None


class FetchedPartition(NamedTuple):
    """One partition's Fetch answer: its bounds and record batches (empty bytes for none)."""

    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


class PiecesOfRecords(NamedTuple):
    """``FetchedPartition`` with its record batches unjoined (none: an empty list)."""

    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: list[bytes]


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _array_length(count: int, flexible: bool) -> bytes:
    return _uvarint(count + 1) if flexible else _I32.pack(count)


def _string(text: str, flexible: bool) -> bytes:
    data = text.encode("utf-8")
    return (_uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _nullable_string(text: str | None, flexible: bool) -> bytes:
    if text is None:
        return _NULL_COMPACT if flexible else _I16.pack(-1)
    return _string(text, flexible)


def produce_response(version: int, topics: Sequence[tuple[str, Sequence[ProducedPartition]]]) -> bytes:
    """The ProduceResponse payload (no header) of ``version`` for each topic's partitions, in order;
    throttle time 0."""
    flexible = version >= PRODUCE_FLEXIBLE
    out = [_array_length(len(topics), flexible)]
    for name, partitions in topics:
        out.append(_string(name, flexible))
        out.append(_array_length(len(partitions), flexible))
        for partition in partitions:
            out.append(
                _PRODUCED.pack(partition.partition, partition.error_code, partition.base_offset, _NO_APPEND_TIME)
            )
            if version >= 5:
                out.append(_I64.pack(-1))  # log_start_offset: not reported
            if version >= 8:
                if partition.record_error is None:
                    out.append(_array_length(0, flexible))
                else:
                    batch_index, message = partition.record_error
                    out.append(_array_length(1, flexible))
                    out.append(_I32.pack(batch_index))
                    out.append(_nullable_string(message, flexible))
                    if flexible:
                        out.append(_NO_TAGS)
                out.append(_nullable_string(partition.error_message, flexible))
            if flexible:
                out.append(_NO_TAGS)
        if flexible:
            out.append(_NO_TAGS)
    out.append(_I32.pack(0))  # throttle_time_ms
    if flexible:
        out.append(_NO_TAGS)
    return b"".join(out)


def fetch_response(version: int, topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchedPartition]]]) -> bytes:
    """The FetchResponse payload (no header) of ``version`` for each topic's partitions, in order;
    throttle time 0, no error, session id 0 (no incremental fetch session). A topic is given by
    name up to version 12 and by id from version 13 (FETCH_TOPIC_IDS), as the request named it."""
    return b"".join(fetch_response_pieces(version, topics))


def fetch_response_pieces(
    version: int, topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchedPartition | PiecesOfRecords]]]
) -> list[bytes]:
    """``fetch_response``'s payload as its pieces, unjoined: the gateway joins them once, into the
    response frame (``frame_payload``), so a megabyte of records is copied once on its way out. A
    partition's records may be given as their pieces too (its record batches)."""
    flexible = version >= FETCH_FLEXIBLE
    by_id = version >= FETCH_TOPIC_IDS
    out = [_FETCH_TOP.pack(0, 0, 0) if version >= 7 else _I32.pack(0)]
    out.append(_array_length(len(topics), flexible))
    for topic, partitions in topics:
        if isinstance(topic, uuid.UUID) != by_id:
            raise TypeError(f"Fetch v{version} names a topic by {'id' if by_id else 'name'}, not {topic!r}")
        out.append(topic.bytes if isinstance(topic, uuid.UUID) else _string(topic, flexible))
        out.append(_array_length(len(partitions), flexible))
        for partition in partitions:
            out.append(
                _FETCHED.pack(
                    partition.partition, partition.error_code, partition.high_watermark, partition.high_watermark
                )
            )
            if version >= 5:
                out.append(_I64.pack(partition.log_start_offset))
            out.append(_NULL_COMPACT if flexible else _NULL_ARRAY)  # aborted_transactions
            if version >= 11:
                out.append(_NO_READ_REPLICA)
            records = partition.records
            if isinstance(records, bytes):
                out.append(_uvarint(len(records) + 1) if flexible else _I32.pack(len(records)))
                out.append(records)
            else:
                size = sum(map(len, records))
                out.append(_uvarint(size + 1) if flexible else _I32.pack(size))
                out.extend(records)
            if flexible:
                out.append(_NO_TAGS)
        if flexible:
            out.append(_NO_TAGS)
    if flexible:
        out.append(_NO_TAGS)
    return out
