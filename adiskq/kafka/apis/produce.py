"""Produce (key 0): Kafka record batches (v2) appended to a topic's partition.

Each partition's batches are decoded (CRC-32C checked, decompressed), mapped to adiskq records
(``_records.py``) and written to that partition as one share, whole or not at all; the answer is
the first offset. acks=0 gets no answer; acks=1 and acks=all are answered once the write returns,
which on a ``flush="sync"`` stream is after the fsync. Batches of idempotent producers (producer id
set) pass the sequence check first (``_idempotence.py``): a retry is answered with its first
offset and not written again, a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from kio.schema.errors import ErrorCode

from ..._sansio.kafka_batch import KafkaBatch, KafkaBatchError, KafkaCorruptBatchError
from .._fast_responses import ProducedPartition, produce_response
from .._idempotence import Duplicate, SequenceError
from .._records import RecordRefusedError, decode_produce, records_from_batches, write_records
from .._registry import RequestContext, register
from .._topics import check_topic_name
from ._common import error_code_for

__all__ = ["produce"]

logger = logging.getLogger("adiskq.kafka")


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None, record_index: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_index = record_index


@register(0, "Produce", min_version=3, max_version=11)
async def produce(context: RequestContext, request: Any) -> bytes | None:
    """Append each partition's batches; the first offset (or an error) per partition."""
    answers = []
    for topic in request.topic_data:
        partitions = [
            await _produce_partition(context, request, topic.name, data.index, data.records)
            for data in topic.partition_data
        ]
        answers.append((topic.name, partitions))
    if request.acks == 0:
        return None
    return produce_response(request.__version__, answers)


async def _produce_partition(
    context: RequestContext, request: Any, topic: str, partition: int, data: bytes | None
) -> ProducedPartition:
    try:
        if request.transactional_id is not None:
            raise _Refused(ErrorCode.transactional_id_not_found, "this broker has no transactions")
        base_offset = await _append(context, topic, partition, data)
    except _Refused as refused:
        record_error = None
        if refused.record_index is not None:
            record_error = (refused.record_index, refused.message)
        return ProducedPartition(partition, refused.code, -1, record_error, refused.message)
    return ProducedPartition(partition, ErrorCode.none, base_offset)


async def _append(context: RequestContext, topic: str, partition: int, data: bytes | None) -> int:
    """Write the batches; their first offset. _Refused with Kafka's error code otherwise."""
    topics = context.gateway.topics
    try:
        check_topic_name(topic)
        if not topics.exists(topic):
            raise _Refused(ErrorCode.unknown_topic_or_partition, f"topic {topic!r} does not exist")
        if not 0 <= partition < topics.partition_count(topic):
            raise _Refused(ErrorCode.unknown_topic_or_partition, f"topic {topic!r} has no partition {partition}")
    except _Refused:
        raise
    except Exception as error:
        raise _Refused(error_code_for(error), str(error)) from None
    if not data:
        raise _Refused(ErrorCode.invalid_record, "the request holds no record batch for this partition")
    try:
        batches = decode_produce(data)
    except KafkaCorruptBatchError as error:
        raise _Refused(ErrorCode.corrupt_message, str(error)) from None
    except KafkaBatchError as error:
        raise _Refused(ErrorCode.invalid_record, str(error)) from None
    if not batches:
        raise _Refused(ErrorCode.invalid_record, "the request holds no record batch for this partition")
    if batches[0].producer_id < 0:
        return await _write(context, topic, partition, batches)
    # Idempotent: check, write and remember under one lock per partition, batch by batch.
    lock = _sequence_lock(context, topic, partition)
    async with lock:
        first_offset: int | None = None
        for batch in batches:
            offset = await _write_idempotent(context, topic, partition, batch)
            first_offset = offset if first_offset is None else first_offset
        assert first_offset is not None
        return first_offset


def _sequence_lock(context: RequestContext, topic: str, partition: int) -> anyio.Lock:
    locks = context.gateway.extensions.setdefault("produce.sequence_locks", {})
    assert isinstance(locks, dict)
    lock = locks.get((topic, partition))
    if lock is None:
        lock = locks[topic, partition] = anyio.Lock()
    assert isinstance(lock, anyio.Lock)
    return lock


async def _write_idempotent(context: RequestContext, topic: str, partition: int, batch: KafkaBatch) -> int:
    sequences = context.gateway.sequences
    count = batch.last_offset_delta + 1
    try:
        verdict = sequences.check(topic, partition, batch.producer_id, batch.producer_epoch, batch.base_sequence, count)
    except SequenceError as error:
        raise _Refused(ErrorCode(error.code), str(error)) from None
    if isinstance(verdict, Duplicate):
        return verdict.base_offset
    base_offset = await _write(context, topic, partition, [batch])
    sequences.written(
        topic, partition, batch.producer_id, batch.producer_epoch, batch.base_sequence, count, base_offset
    )
    return base_offset


async def _write(context: RequestContext, topic: str, partition: int, batches: list[KafkaBatch]) -> int:
    try:
        records = records_from_batches(batches)
    except RecordRefusedError as error:
        raise _Refused(ErrorCode.invalid_record, str(error), error.index) from None
    if not records:
        raise _Refused(ErrorCode.invalid_record, "the record batch holds no records")
    try:
        producer = await context.gateway.topics.writer(topic)
        receipts = await write_records(producer, partition, records)
    except Exception as error:
        logger.warning("adiskq: produce to %s-%d failed: %s", topic, partition, error)
        raise _Refused(error_code_for(error), str(error)) from None
    return receipts[0].offset
