"""Produce (key 0): Kafka record batches (v2) appended to a topic's partition.

Each partition's batches are decoded (CRC-32C checked, decompressed), mapped to adiskq records
(``_records.py``) and written to that partition as one share, whole or not at all; the answer is
the first offset. acks=0 gets no answer; acks=1 and acks=all are answered once the write returns,
which on a ``flush="sync"`` stream is after the fsync. Batches of idempotent producers (producer id
set) pass the sequence check first (``_idempotence.py``): a retry is answered with its first
offset and not written again, a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER.

A partition is written at once, without awaiting (``produce_now``), when the topic's producer can
take its records inline: that is the common case of a ``flush="async"`` gateway. A partition that
has to wait (the producer not open yet, a stream flushed with fsync, a write in flight) and those
after it are written by the connection's task, in order; acks=all on ``flush="sync"`` is therefore
still answered after the fsync.

A request is read by one compiled call (``kafka_produce_request``: the fields used here, each
partition's record batches as bytes, no kio dataclass a topic and partition); kio reads what it
does not take (a request carrying a tagged field, or bytes it then names the fault of).
"""

from __future__ import annotations

import datetime as dt
import logging
import struct
from typing import Any, Final, NamedTuple

import anyio
from kio.schema.errors import ErrorCode

from ..._async.producer import Producer
from ..._errors import SettingsMismatchError
from ..._sansio.entries import EncodedRun
from .._idempotence import Duplicate, SequenceError
from .._records import (
    RecordRefusedError,
    ToWrite,
    decode_produce,
    records_from_batches,
    write_records,
    write_records_now,
)
from .._registry import Later, RequestContext, answers_now, register
from .._topics import check_topic_name
from .._transactions import transactions_of
from ..transaction_coordinator import INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED
from ..wire.batch import KafkaBatch, KafkaBatchError, KafkaCorruptBatchError
from ..wire.codec import TRANSACTIONAL
from ..wire.fast_responses import ProducedPartition, produce_response
from ..wire.produce_request import PRODUCE_REQUEST_VERSIONS, produce_request
from ..wire.protocol import FastReader, add_fast_reader
from ._common import error_code_for, error_message_for

__all__ = ["one_partition_response", "produce"]

logger = logging.getLogger("adiskq.kafka")
_MILLISECOND: Final = dt.timedelta(milliseconds=1)


class ProduceAsked(NamedTuple):
    """What a Produce request carries (the fields the gateway uses; ``kafka_produce_request``'s)."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    # (topic name, [(partition index, its record batches' bytes, or None for a null record set)])
    topics: list[tuple[str, list[tuple[int, bytes | None]]]]
    version: int


_new_asked = tuple.__new__


def _read(message: bytes, at: int, version: int) -> ProduceAsked | None:
    asked = produce_request(message, at, version)
    return None if asked is None else _new_asked(ProduceAsked, (*asked, version))


def _from_kio(request: Any) -> ProduceAsked:
    """A request kio read (bytes ``kafka_produce_request`` does not take, such as one with a tagged field)."""
    return ProduceAsked(
        request.transactional_id,
        request.acks,
        request.timeout // _MILLISECOND,
        [(topic.name, [(data.index, data.records) for data in topic.partition_data]) for topic in request.topic_data],
        request.__version__,
    )


add_fast_reader(0, FastReader(_read, _from_kio, PRODUCE_REQUEST_VERSIONS))


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None, record_index: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_index = record_index


@register(0, "Produce", min_version=PRODUCE_REQUEST_VERSIONS[0], max_version=PRODUCE_REQUEST_VERSIONS[-1])
async def produce(context: RequestContext, request: ProduceAsked) -> bytes | None:
    """Append each partition's batches; the first offset (or an error) per partition."""
    answer = produce_now(context, request)
    if isinstance(answer, Later):
        finished: bytes | None = await answer.finish()
        return finished
    return answer


@answers_now(0)
def produce_now(context: RequestContext, request: ProduceAsked) -> bytes | Later | None:
    """The same, without a task when every partition can be written at once (the usual case on a
    ``flush="async"`` gateway); otherwise the partitions written so far are kept and ``Later``
    finishes the rest in the connection's task."""
    job = _ProduceJob(context, request)
    if job.run_now():
        return job.response()
    return Later(job.finish)


class _ProduceJob:
    """One Produce request's partitions, answered in order: as many at once as can be, the rest awaited."""

    __slots__ = ("_context", "_parts", "_request", "_results", "_waiting")

    def __init__(self, context: RequestContext, request: ProduceAsked) -> None:
        self._context = context
        self._request = request
        self._parts = [(name, index, records) for name, partitions in request.topics for index, records in partitions]
        self._results: list[ProducedPartition] = []
        self._waiting: _Waiting | None = None  # what the first partition not answered has decoded

    def run_now(self) -> bool:
        """Answer partitions until one has to wait; True when all are answered."""
        parts, results = self._parts, self._results
        while len(results) < len(parts):
            topic, partition, data = parts[len(results)]
            result = _produce_partition_now(self._context, self._request, topic, partition, data)
            if isinstance(result, _Waiting):
                self._waiting = result
                return False
            results.append(result)
        return True

    async def finish(self) -> bytes | None:
        """Answer the partitions left (the first of them has to wait), then the response."""
        parts, results = self._parts, self._results
        while len(results) < len(parts):
            topic, partition, data = parts[len(results)]
            waiting, self._waiting = self._waiting, None
            results.append(await _produce_partition(self._context, self._request, topic, partition, data, waiting))
            self.run_now()
        return self.response()

    def response(self) -> bytes | None:
        """The answer: one entry per topic entry of the request, in its order (a topic named twice
        is answered twice), each with its partitions' results."""
        request = self._request
        if request.acks == 0:
            return None
        results = self._results
        topics = request.topics
        if len(results) == 1 and results[0].error_code == _NO_ERROR and len(topics) == 1:
            # A client's usual request, written into its answer's template
            produced = results[0]
            return one_partition_response(request.version, topics[0][0], produced.partition, produced.base_offset)
        answers = []
        at = 0
        for name, partitions in topics:
            count = len(partitions)
            answers.append((name, results[at : at + count]))
            at += count
        return produce_response(request.version, answers)


# The answer's bytes around the partition's entry of a one-partition answer, by version and topic
# name: a client produces to few topics, so the answers of a gateway's life take few templates.
_TEMPLATES: dict[tuple[int, str], tuple[bytes, bytes]] = {}
_TEMPLATES_KEPT: Final = 1024  # past this many (versions times topics), a template is made for each answer
_PARTITION_ENTRY: Final = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_NO_APPEND_TIME: Final = -1
_NO_ERROR: Final = int(ErrorCode.none)  # an int: the enum's attribute lookup costs more than the rest


def one_partition_response(version: int, topic: str, partition: int, base_offset: int) -> bytes:
    """``produce_response`` of one topic's one partition written at ``base_offset`` without error:
    its template's bytes around the partition's entry, the entry packed in between."""
    template = _TEMPLATES.get((version, topic))
    if template is None:
        # The entry is where the answers for base offsets 0 and 1 first differ: the last byte of
        # the base offset, 13 bytes into the 28 of the entry.
        zero = produce_response(version, [(topic, [ProducedPartition(0, ErrorCode.none, 0)])])
        one = produce_response(version, [(topic, [ProducedPartition(0, ErrorCode.none, 1)])])
        at = next(i for i in range(len(zero)) if zero[i] != one[i]) - 13
        template = (zero[:at], zero[at + _PARTITION_ENTRY.size :])
        if len(_TEMPLATES) < _TEMPLATES_KEPT:
            _TEMPLATES[version, topic] = template
    before, after = template
    return before + _PARTITION_ENTRY.pack(partition, _NO_ERROR, base_offset, _NO_APPEND_TIME) + after


def _produce_partition_now(
    context: RequestContext, request: ProduceAsked, topic: str, partition: int, data: bytes | None
) -> ProducedPartition | _Waiting:
    """One partition's answer if it can be given at once; what it has decoded, to go on in the
    connection's task, if it has to wait (nothing was written then)."""
    try:
        if request.transactional_id is not None:  # checked against its transaction in the connection's task
            return _Waiting(_checked_batches(context, topic, partition, data, transactional=True), None)
        base_offset = _append_now(context, topic, partition, data)
    except _Refused as refused:
        return _refusal(partition, refused)
    if isinstance(base_offset, _Waiting):
        return base_offset
    return ProducedPartition(partition, ErrorCode.none, base_offset)


async def _produce_partition(
    context: RequestContext,
    request: ProduceAsked,
    topic: str,
    partition: int,
    data: bytes | None,
    waiting: _Waiting | None,
) -> ProducedPartition:
    transactional_id = request.transactional_id
    try:
        if waiting is None:
            batches = _checked_batches(context, topic, partition, data, transactional=transactional_id is not None)
        else:
            batches = waiting.batches
        if transactional_id is not None:
            base_offset = await _append_transactional(
                context, transactional_id, topic, partition, batches, request.version
            )
        else:
            base_offset = await _append(
                context, topic, partition, batches, None if waiting is None else waiting.records
            )
    except _Refused as refused:
        return _refusal(partition, refused)
    return ProducedPartition(partition, ErrorCode.none, base_offset)


def _refusal(partition: int, refused: _Refused) -> ProducedPartition:
    record_error = None
    if refused.record_index is not None:
        record_error = (refused.record_index, refused.message)
    return ProducedPartition(partition, refused.code, -1, record_error, refused.message)


class _Waiting:
    """A partition that has to wait for its write: its batches, and their records once mapped."""

    __slots__ = ("batches", "records")

    def __init__(self, batches: list[KafkaBatch], records: ToWrite | None) -> None:
        self.batches = batches
        self.records = records


def _checked_batches(
    context: RequestContext, topic: str, partition: int, data: bytes | None, *, transactional: bool = False
) -> list[KafkaBatch]:
    """The partition's record batches, decoded (transactional ones too if ``transactional``);
    _Refused with Kafka's error code for a topic or partition that is not there, or batches that do
    not decode."""
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
        raise _Refused(error_code_for(error), error_message_for(context.gateway, error)) from None
    if not data:
        raise _Refused(ErrorCode.invalid_record, "the request holds no record batch for this partition")
    try:
        batches = decode_produce(data, transactional=transactional)
    except KafkaCorruptBatchError as error:
        raise _Refused(ErrorCode.corrupt_message, str(error)) from None
    except KafkaBatchError as error:
        raise _Refused(ErrorCode.invalid_record, str(error)) from None
    if not batches:
        raise _Refused(ErrorCode.invalid_record, "the request holds no record batch for this partition")
    return batches


def _append_now(context: RequestContext, topic: str, partition: int, data: bytes | None) -> int | _Waiting:
    """Write the batches now if the topic's producer can take them at once; their first offset.
    ``_Waiting`` (nothing written) otherwise: the topic's producer is not open yet, the stream
    flushes with fsync, a write is in flight, another request holds the partition's sequence lock."""
    batches = _checked_batches(context, topic, partition, data)
    producer = context.gateway.topics.open_writer(topic)
    if batches[0].producer_id < 0:
        records = _records(batches)
        if producer is None:
            return _Waiting(batches, records)
        first = _push_now(context, producer, topic, partition, records)
        return _Waiting(batches, records) if first is None else first
    # Idempotent: the sequence check, the write and its record happen in this one step, so no
    # other request can come between them; a request of several batches goes the awaited way.
    if producer is None or len(batches) != 1 or _sequence_lock(context, topic, partition).locked():
        return _Waiting(batches, None)
    batch = batches[0]
    verdict = _check_sequence(context, topic, partition, batch)
    if isinstance(verdict, Duplicate):
        return verdict.base_offset
    first = _push_now(context, producer, topic, partition, _records([batch]))
    if first is None:
        return _Waiting(batches, None)  # checked again under the lock, once it can be written
    _sequence_written(context, topic, partition, batch, first)
    return first


async def _append(
    context: RequestContext, topic: str, partition: int, batches: list[KafkaBatch], records: ToWrite | None
) -> int:
    """Write the batches; their first offset. _Refused with Kafka's error code otherwise."""
    if batches[0].producer_id < 0:
        return await _write(context, topic, partition, batches, records)
    # Idempotent: check, write and remember under one lock per partition, batch by batch.
    lock = _sequence_lock(context, topic, partition)
    async with lock:
        first_offset: int | None = None
        for batch in batches:
            offset = await _write_idempotent(context, topic, partition, batch)
            first_offset = offset if first_offset is None else first_offset
        assert first_offset is not None
        return first_offset


async def _append_transactional(
    context: RequestContext,
    transactional_id: str,
    topic: str,
    partition: int,
    batches: list[KafkaBatch],
    version: int,
) -> int:
    """Write a transactional producer's batches as records of its open transaction: each batch
    checked against the transaction coordinator (the producer current, the partition added to its
    transaction) and its sequence, then written, under the partition's lock (a marker ending the
    transaction waits for it, so it never comes between the check and the batch)."""
    transactions = transactions_of(context.gateway)
    first_offset: int | None = None
    async with _sequence_lock(context, topic, partition):
        for batch in batches:
            if batch.producer_id < 0 or not batch.attributes & TRANSACTIONAL:
                raise _Refused(
                    ErrorCode.invalid_record,
                    f"a Produce naming transactional id {transactional_id!r} holds a batch that is not "
                    "transactional: a transactional producer sends every batch in its transaction",
                )
            if version >= _TRANSACTION_VERSION_2_FROM:  # the partition joins the transaction here
                error = await transactions.add_implicitly(
                    transactional_id, batch.producer_id, batch.producer_epoch, topic, partition
                )
                if error:
                    raise _Refused(
                        ErrorCode(_PRODUCE_ERROR.get(error, error)), _transaction_refusal(error, topic, partition)
                    )
            error = transactions.check_produce(
                transactional_id, batch.producer_id, batch.producer_epoch, topic, partition
            )
            if error:
                raise _Refused(
                    ErrorCode(_PRODUCE_ERROR.get(error, error)), _transaction_refusal(error, topic, partition)
                )
            verdict = _check_sequence(context, topic, partition, batch)
            if isinstance(verdict, Duplicate):
                offset = verdict.base_offset
            else:
                # Open before the write: the write wakes parked read_committed Fetches, which must
                # find the transaction open then, or they would serve its records past the LSO.
                end = context.gateway.topics.reader(topic).partition(partition).bounds()[1]
                starts = transactions.open.starting(topic, partition, batch.producer_id, end)
                try:
                    offset = await _write(
                        context, topic, partition, [batch], None, transaction=(batch.producer_id, batch.producer_epoch)
                    )
                except BaseException:
                    if starts:
                        transactions.open.ended(topic, partition, batch.producer_id)
                    raise
                _sequence_written(context, topic, partition, batch, offset)
                if starts:
                    transactions.open.settle(topic, partition, batch.producer_id, offset)
            first_offset = offset if first_offset is None else first_offset
    assert first_offset is not None
    return first_offset


_TRANSACTION_VERSION_2_FROM: Final = 12
# Produce answers a fenced producer INVALID_PRODUCER_EPOCH in every version, as Kafka does.
_PRODUCE_ERROR: Final = {PRODUCER_FENCED: INVALID_PRODUCER_EPOCH}


def _transaction_refusal(error: int, topic: str, partition: int) -> str:
    if error == INVALID_TXN_STATE:
        return f"{topic}-{partition} is not in the producer's open transaction: add it (AddPartitionsToTxn) first"
    if error in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH):
        return "the producer was fenced: a newer instance of its transactional id, or a timeout, ended its epoch"
    return "the producer id is not the transactional id's"


def _sequence_lock(context: RequestContext, topic: str, partition: int) -> anyio.Lock:
    return context.gateway.partition_lock(topic, partition)


def _check_sequence(context: RequestContext, topic: str, partition: int, batch: KafkaBatch) -> Duplicate | None:
    count = batch.last_offset_delta + 1
    try:
        return context.gateway.sequences.check(
            topic, partition, batch.producer_id, batch.producer_epoch, batch.base_sequence, count
        )
    except SequenceError as error:
        raise _Refused(ErrorCode(error.code), str(error)) from None


def _sequence_written(context: RequestContext, topic: str, partition: int, batch: KafkaBatch, base_offset: int) -> None:
    count = batch.last_offset_delta + 1
    context.gateway.sequences.written(
        topic, partition, batch.producer_id, batch.producer_epoch, batch.base_sequence, count, base_offset
    )


async def _write_idempotent(context: RequestContext, topic: str, partition: int, batch: KafkaBatch) -> int:
    verdict = _check_sequence(context, topic, partition, batch)
    if isinstance(verdict, Duplicate):
        return verdict.base_offset
    base_offset = await _write(context, topic, partition, [batch], None)
    _sequence_written(context, topic, partition, batch, base_offset)
    return base_offset


def _records(batches: list[KafkaBatch]) -> ToWrite:
    try:
        records = records_from_batches(batches)
    except RecordRefusedError as error:
        code = ErrorCode.invalid_timestamp if error.bad_timestamp else ErrorCode.invalid_record
        raise _Refused(code, str(error), error.index) from None
    if not (records.index_entries if isinstance(records, EncodedRun) else records):
        raise _Refused(ErrorCode.invalid_record, "the record batch holds no records")
    return records


def _write_error_code(error: BaseException) -> ErrorCode:
    """Kafka's code for a failed write: INVALID_RECORD (not retried) for a record the topic's stream
    cannot hold in its format (a null header value or a repeated name before adiskq/5), whose
    message says to run `adiskq upgrade`."""
    if isinstance(error, SettingsMismatchError):
        return ErrorCode.invalid_record
    return error_code_for(error)


def _push_now(context: RequestContext, producer: Producer, topic: str, partition: int, records: ToWrite) -> int | None:
    try:
        first = write_records_now(producer, partition, records)
    except Exception as error:
        logger.warning("adiskq: produce to %s-%d failed: %s", topic, partition, error)
        raise _Refused(_write_error_code(error), error_message_for(context.gateway, error)) from None
    if first is not None:
        context.gateway.topics.partition_written(topic, partition)  # the last to be parked for room
    return first


async def _write(
    context: RequestContext,
    topic: str,
    partition: int,
    batches: list[KafkaBatch],
    records: ToWrite | None,
    *,
    transaction: tuple[int, int] | None = None,
) -> int:
    if records is None:
        records = _records(batches)
    try:
        async with context.gateway.topics.writing(topic, partition) as producer:
            if transaction is not None:
                return await write_records(producer, partition, records, transaction=transaction)
            return await write_records(producer, partition, records)
    except Exception as error:
        logger.warning("adiskq: produce to %s-%d failed: %s", topic, partition, error)
        raise _Refused(_write_error_code(error), error_message_for(context.gateway, error)) from None
