"""Kafka records <-> adiskq messages: what a Produce stores and what a Fetch hands back.

The mapping, exact in both directions (its rules are written, and applied, in
``adiskq/kafka/wire/mapping.py``):

- offsets are the partition's offsets; a Kafka timestamp in milliseconds is stored as
  ``ms * 1_000_000`` nanoseconds and read back as ``ns // 1_000_000`` (so a Kafka record round-trips
  exactly, and a library message's sub-millisecond part is dropped on its way to Kafka); one later
  than the year 2262, whose nanoseconds do not fit 64 bits, is refused with INVALID_TIMESTAMP;
- keys and values are bytes on both sides. Kafka also has null: a null key or value is stored as
  empty bytes plus the header ``adiskq.kafka.null`` whose value names which were null (``key``,
  ``value`` or ``key,value``), and read back to Kafka as null, without that header. A library
  consumer sees the empty bytes and the header;
- headers keep their order, exactly: a null header value and a repeated name are stored as they
  came (a ``Headers``, on a topic whose stream is in format ``adiskq/5``; a topic of an older format
  refuses such a batch with INVALID_RECORD saying to run ``adiskq upgrade``) and served back as
  they were. A Kafka header named ``adiskq.kafka.null`` (or it and ``~`` marks) is stored with one
  ``~`` more and served back as sent.

A Produce's batches are decoded straight to the bytes adiskq stores and their index entries
(``decode_produce``: one compiled call a batch, no ``KafkaRecord``, ``Record`` or bytes object a
message) and written as they are (``write_records``: ``adiskq/_async/partition_writes.py``, the
package's interface to a producer for writes to a chosen partition). A request off that path (a
record the mapping refuses, damaged bytes, a LogAppendTime batch) is decoded step by step instead,
which names the fault.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final, cast

from .._async.partition_writes import Writable as ToWrite
from .._async.partition_writes import write as write_records
from .._async.partition_writes import write_now as write_records_now
from .._sansio.entries import EncodedRun
from .._sansio.native import NATIVE
from .._sansio.run_entries import place_entries
from .._sansio.values import Message, Record
from .wire.batch import KafkaBatch, KafkaRecord, decode_batches, encode_batch_from_messages
from .wire.codec import DEFAULT_MAX_BYTES, LOG_APPEND_TIME
from .wire.codec import decode_batches as decode_batches_with
from .wire.mapping import (
    NULLS_HEADER,
    MappingRefusedError,
    TimestampRefusedError,
    record_fields,
    stored_records,
)

__all__ = [
    "NULLS_HEADER",
    "RecordRefusedError",
    "ToWrite",
    "batch_from_messages",
    "decode_produce",
    "decode_produce_reference",
    "records_from_batches",
    "write_records",
    "write_records_now",
]

_TIMESTAMP_LOG_APPEND: Final = LOG_APPEND_TIME  # batch attributes bit 3: the broker stamps the records


class RecordRefusedError(ValueError):
    """A record adiskq cannot store exactly; ``index`` is its position among the request's records,
    ``bad_timestamp`` says it is refused for its timestamp (Kafka's INVALID_TIMESTAMP)."""

    def __init__(self, message: str, index: int, *, bad_timestamp: bool = False) -> None:
        super().__init__(message)
        self.index = index
        self.bad_timestamp = bad_timestamp


class _OffThePlainPath(Exception):
    """A batch's records need the step by step decoding (which names what is wrong with them)."""


def decode_produce(data: bytes | bytearray | memoryview, *, transactional: bool = False) -> list[KafkaBatch]:
    """A Produce request's batches for one partition, as ``decode_batches`` checks them (and with
    its errors), each one's records left as ``EncodedRun`` when it took the compiled path.
    ``transactional``: the request names a transactional id, so its batches may be transactional.

    Uncompressed CreateTime batches of plain records are decoded whole by one compiled call
    (``kafka_decode_batches`` with a run of stored records a batch); anything else (a transactional
    batch too) by ``decode_produce_reference``, its reference."""
    now_ns = time.time_ns()
    if NATIVE is not None and type(data) is bytes:
        batches: list[KafkaBatch] | None = NATIVE.kafka_decode_batches(
            data, DEFAULT_MAX_BYTES, KafkaRecord, KafkaBatch, now_ns, NULLS_HEADER, EncodedRun
        )
        if batches is not None:
            return batches
    return decode_produce_reference(data, now_ns, transactional=transactional)


def decode_produce_reference(
    data: bytes | bytearray | memoryview,
    now_ns: int,
    to_stored: Callable[[bytes, int, int, int, int, int], EncodedRun | None] = stored_records,
    *,
    transactional: bool = False,
) -> list[KafkaBatch]:
    """``decode_produce`` batch by batch in Python (compressed batches decompressed here), each
    batch's records mapped by ``to_stored``; a request with a LogAppendTime batch, or records off
    the plain path, decoded step by step (``KafkaRecord`` lists, whose mapping names the fault)."""

    def stored(buf: bytes, pos: int, end: int, count: int, base_timestamp_ms: int, where: str) -> list[KafkaRecord]:
        found = to_stored(buf, pos, end, count, base_timestamp_ms, now_ns)
        if found is None:
            raise _OffThePlainPath
        return cast(list[KafkaRecord], found)  # carried in the batch's records field, read by records_from_batches

    try:
        batches = decode_batches_with(data, records_decoder=stored, transactional=transactional)
    except _OffThePlainPath:
        return decode_batches(data, transactional=transactional)
    if any(batch.attributes & _TIMESTAMP_LOG_APPEND for batch in batches):
        # the time of the write for every record: the step by step path
        return decode_batches(data, transactional=transactional)
    return batches


def records_from_batches(batches: Sequence[KafkaBatch]) -> ToWrite:
    """What to write for a Produce request's batches (one partition's), in order.

    Raises RecordRefusedError for a record the mapping refuses."""
    if len(batches) == 1:  # the usual request: no list made
        only: object = batches[0].records
        if type(only) is EncodedRun:
            return only
    found: list[object] = [batch.records for batch in batches]
    if all(isinstance(records, EncodedRun) for records in found):
        stored = cast(list[EncodedRun], found)
        if len(stored) == 1:
            return stored[0]
        return _joined(stored)
    records: list[Record] = []
    now_ns = time.time_ns()
    index = 0
    for batch in batches:
        log_append = bool(batch.attributes & _TIMESTAMP_LOG_APPEND)
        for record in batch.records:
            try:
                value, key, headers, timestamp_ns = record_fields(record, now_ns, log_append)
            except MappingRefusedError as error:
                bad_timestamp = isinstance(error, TimestampRefusedError)
                raise RecordRefusedError(str(error), index, bad_timestamp=bad_timestamp) from None
            records.append(Record(value, key, headers, timestamp_ns))
            index += 1
    return records


def _joined(runs: list[EncodedRun]) -> EncodedRun:
    """One run of several, in order (a request with more than one batch for a partition): each
    run's entries placed after the records before it."""
    index: list[bytes] = []
    timeindex: list[bytes] = []
    count = position = 0
    for run in runs:
        placed_index, placed_timeindex = place_entries(
            run.data, run.index_entries, run.time_entries, run.tag_entries, count, position
        )
        index.append(placed_index)
        timeindex.append(placed_timeindex)
        count += run.record_count
        position += run.total
    return EncodedRun(
        b"".join([run.data for run in runs]),
        b"".join(index),
        b"".join(timeindex),
        b"".join([run.key_hashes for run in runs]),
        b"",  # a Kafka record carries no tag
        max(run.largest for run in runs),
    )


def batch_from_messages(messages: Sequence[Message]) -> bytes:
    """One Kafka record batch (v2, uncompressed) holding ``messages``: consecutive offsets of one
    partition, as a reader returns them (built by the compiled core when it runs)."""
    return encode_batch_from_messages(messages, nulls_header=NULLS_HEADER)
