"""A whole Fetch response frame in one call: the answer of the Kafka gateway's Fetch.

``fetch_answer(correlation_id, version, topics)`` writes the frame (the i32 size first) of a
FetchResponse of ``version`` (4..16): the response header, throttle time 0, no error, session id 0
(no incremental fetch session), then each topic's partitions with their record batches, copied once,
into the frame. The compiled core's ``kafka_fetch_answer`` (``adiskq/_csrc/kafka/fetch_answer.c``)
writes the same bytes; this is its reference (``fetch_answer_reference``), and the two are held
equal by the tests, bad arguments included (the same exception class for each).

``topics`` is a list (or tuple) of ``(topic, partitions)``: ``topic`` is the name (a str) up to
version 12, and the topic id's 16 bytes from version 13 on, as the request named it; each partition
is a tuple ``(partition, error_code, high_watermark, log_start_offset, batches)``, ``batches`` a
list of bytes (the record batches; empty for none). The frame, from Kafka's ``FetchResponse.json``
(``[X]``: an array of X; big-endian integers)::

    i32  size                 bytes after this field
    i32  correlation_id
   [u8   0]                   v12+: the header's tagged fields, none
    i32  throttle_time_ms     0
   [i16  error_code, i32 session_id]      v7+: 0, 0
    [topic]                   name: string (v4..v11), compact string (v12) | topic id: 16 bytes (v13+)
      [partition]             partition_index: i32, error_code: i16, high_watermark: i64,
                              last_stable_offset: i64 (= high_watermark), log_start_offset: i64 (v5+),
                              aborted_transactions: null array, preferred_read_replica: i32 -1 (v11+),
                              (``fetch_answer_with_transactions``: the partition's last stable offset,
                              and for read_committed [producer_id: i64, first_offset: i64; tags v12+])
                              records: bytes (the batches, joined), [u8 0: tagged fields, v12+]
      [u8 0]                  v12+: the topic's tagged fields
   [u8   0]                   v12+: the response's tagged fields

Versions 12 and up (flexible) write array and bytes lengths as an unsigned varint of length + 1;
older ones an i32 (arrays, records) or i16 (strings). The tagged fields those versions define tell a
client where a partition's leader moved: this single broker leads every partition, so they are
left out at their defaults, as ``wire/fast_responses.py`` explains.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final

from ..._sansio.native import NATIVE

__all__ = ["FETCH_ANSWER_VERSIONS", "fetch_answer", "fetch_answer_reference", "fetch_answer_with_transactions"]

FETCH_ANSWER_VERSIONS: Final = range(4, 17)
_FLEXIBLE: Final = 12
_TOPIC_IDS: Final = 13
_MAX_NAME_BYTES: Final = 32767  # Kafka's strings: an i16 length
_MAX_FRAME_BYTES: Final = 2**31 - 1  # the frame's i32 size
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_PARTITION: Final = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable_offset

Partition = tuple[int, int, int, int, list[bytes]]


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int(value: object, what: str, low: int, high: int) -> int:
    if not isinstance(value, int):
        raise TypeError(f"fetch_answer: {what} is an int")
    if not low <= value <= high:
        raise ValueError(f"fetch_answer: {what} must be within [{low}, {high}]")
    return value


def _length(count: int, flexible: bool) -> bytes:
    return _uvarint(count + 1) if flexible else _I32.pack(count)


def fetch_answer_reference(correlation_id: int, version: int, topics: Sequence[tuple[object, object]]) -> bytes:
    """The Fetch response frame (see the module's docstring); TypeError or ValueError for arguments
    that do not fit it."""
    return _answer(correlation_id, version, topics, transactions=False)


def fetch_answer_with_transactions(correlation_id: int, version: int, topics: Sequence[tuple[object, object]]) -> bytes:
    """``fetch_answer_reference`` for partitions that hold Kafka transactions: each partition may
    also be a 7-tuple ``(partition, error_code, high_watermark, log_start_offset, batches,
    last_stable_offset, aborted_transactions)``, ``aborted_transactions`` None (a read_uncommitted
    answer: null) or a list of ``(producer_id, first_offset)`` (a read_committed answer). Written
    in Python only: a partition with transactions goes this way, every other through the compiled
    ``fetch_answer``."""
    return _answer(correlation_id, version, topics, transactions=True)


def _aborted(aborted: object, flexible: bool) -> bytes:
    if aborted is None:
        return b"\0" if flexible else _I32.pack(-1)  # null
    if not isinstance(aborted, list):
        raise TypeError("fetch_answer: aborted transactions are None or a list of (producer_id, first_offset)")
    out = [_length(len(aborted), flexible)]
    for entry in aborted:
        if not isinstance(entry, tuple) or len(entry) != 2:
            raise TypeError("fetch_answer: an aborted transaction is a (producer_id, first_offset) tuple")
        producer_id, first_offset = entry
        _int(producer_id, "a producer id", -(2**63), 2**63 - 1)
        _int(first_offset, "a first offset", -(2**63), 2**63 - 1)
        out.append(_I64.pack(producer_id) + _I64.pack(first_offset) + (b"\0" if flexible else b""))
    return b"".join(out)


def _answer(correlation_id: int, version: int, topics: Sequence[tuple[object, object]], *, transactions: bool) -> bytes:
    _int(correlation_id, "correlation_id", -(2**31), 2**31 - 1)
    _int(version, "version", FETCH_ANSWER_VERSIONS.start, FETCH_ANSWER_VERSIONS.stop - 1)
    if not isinstance(topics, list | tuple):
        raise TypeError("fetch_answer: topics is a list of (topic, partitions)")
    flexible = version >= _FLEXIBLE
    out = [_I32.pack(correlation_id)]
    if flexible:
        out.append(b"\0")
    out.append(_I32.pack(0) + (_I16.pack(0) + _I32.pack(0) if version >= 7 else b""))
    out.append(_length(len(topics), flexible))
    for item in topics:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError("fetch_answer: a topic is a (topic, partitions) tuple")
        topic, partitions = item
        if version >= _TOPIC_IDS:
            if not isinstance(topic, bytes):
                raise TypeError("fetch_answer: from version 13 a topic is its id's 16 bytes")
            if len(topic) != 16:
                raise ValueError("fetch_answer: a topic id is 16 bytes")
            out.append(topic)
        else:
            if not isinstance(topic, str):
                raise TypeError("fetch_answer: up to version 12 a topic is its name, a str")
            name = topic.encode("utf-8")
            if len(name) > _MAX_NAME_BYTES:
                raise ValueError("fetch_answer: a topic name is at most 32767 bytes")
            out.append((_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))) + name)
        if not isinstance(partitions, list | tuple):
            raise TypeError("fetch_answer: a topic's partitions are a list")
        out.append(_length(len(partitions), flexible))
        for partition in partitions:
            if not isinstance(partition, tuple) or not (len(partition) == 5 or (transactions and len(partition) == 7)):
                raise TypeError(
                    "fetch_answer: a partition is a (partition, error_code, high_watermark, log_start_offset, "
                    "batches) tuple"
                )
            if len(partition) == 7:
                index, error_code, high_watermark, log_start, batches, last_stable, aborted = partition
                _int(last_stable, "a last stable offset", -(2**63), 2**63 - 1)
            else:
                index, error_code, high_watermark, log_start, batches = partition
                last_stable, aborted = high_watermark, None
            _int(index, "a partition index", -(2**31), 2**31 - 1)
            _int(error_code, "an error code", -(2**15), 2**15 - 1)
            _int(high_watermark, "a high watermark", -(2**63), 2**63 - 1)
            _int(log_start, "a log start offset", -(2**63), 2**63 - 1)
            if not isinstance(batches, list) or not all(isinstance(batch, bytes) for batch in batches):
                raise TypeError("fetch_answer: a partition's batches are a list of bytes")
            out.append(_PARTITION.pack(index, error_code, high_watermark, last_stable))
            if version >= 5:
                out.append(_I64.pack(log_start))
            out.append(_aborted(aborted, flexible))
            if version >= 11:
                out.append(_I32.pack(-1))  # preferred_read_replica: none
            size = sum(map(len, batches))
            if size > _MAX_FRAME_BYTES:
                raise ValueError("fetch_answer: the response is over 2 GiB")
            out.append(_uvarint(size + 1) if flexible else _I32.pack(size))
            out.extend(batches)
            if flexible:
                out.append(b"\0")
        if flexible:
            out.append(b"\0")
    if flexible:
        out.append(b"\0")
    size = sum(map(len, out))
    if size > _MAX_FRAME_BYTES:
        raise ValueError("fetch_answer: the response is over 2 GiB")
    return b"".join([_I32.pack(size), *out])


def fetch_answer(correlation_id: int, version: int, topics: Sequence[tuple[object, object]]) -> bytes:
    """``fetch_answer_reference``, by the compiled core when it is built."""
    if NATIVE is None:
        return fetch_answer_reference(correlation_id, version, topics)
    frame: bytes = NATIVE.kafka_fetch_answer(correlation_id, version, topics)
    return frame
