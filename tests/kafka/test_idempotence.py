"""Idempotent produce at the protocol level: retries answered with their first offset, gaps refused."""

from __future__ import annotations

import datetime as dt

from conftest import call
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName

from adiskq import stats
from adiskq.kafka._idempotence import Duplicate, Sequences
from adiskq.kafka.wire.batch import KafkaRecord, encode_batch


def _init_producer(port: int, topic: str) -> tuple[int, int]:
    """Create ``topic`` (a Metadata request naming it), then a producer id and epoch to send with."""
    call(
        port,
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
            include_topic_authorized_operations=False,
        ),
    )
    response = call(port, InitProducerIdRequest(transactional_id=None, transaction_timeout=dt.timedelta(seconds=60)))
    assert response.error_code.value == 0
    return response.producer_id, response.producer_epoch


def _produce(port: int, topic: str, producer_id: int, epoch: int, sequence: int, count: int) -> tuple[int, int]:
    """Send one batch of ``count`` records; (error code, base offset)."""
    records = [KafkaRecord(i, 1_700_000_000_000, b"k", b"%d" % (sequence + i), []) for i in range(count)]
    batch = encode_batch(
        base_offset=0,
        records=records,
        base_timestamp_ms=1_700_000_000_000,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    request = ProduceRequest(
        acks=-1,
        timeout=dt.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(name=TopicName(topic), partition_data=(PartitionProduceData(index=0, records=batch),)),
        ),
    )
    answer = call(port, request).responses[0].partition_responses[0]
    return answer.error_code.value, answer.base_offset


def test_retry_is_answered_with_its_offset_and_not_written_again(gateway, topic: str) -> None:
    """The same batch sent twice (a client's retry) is written once; the retry gets the first offset."""
    port = gateway.gateway.port
    producer_id, epoch = _init_producer(port, topic)
    assert _produce(port, topic, producer_id, epoch, 0, 3) == (0, 0)
    assert _produce(port, topic, producer_id, epoch, 3, 2) == (0, 3)
    assert _produce(port, topic, producer_id, epoch, 0, 3) == (0, 0)  # a retry of the first batch
    assert _produce(port, topic, producer_id, epoch, 3, 2) == (0, 3)
    assert stats(gateway.path(topic)).message_count == 5


def test_gap_and_old_epoch_are_refused(gateway, topic: str) -> None:
    """A sequence past the next one is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch INVALID_PRODUCER_EPOCH."""
    port = gateway.gateway.port
    producer_id, epoch = _init_producer(port, topic)
    assert _produce(port, topic, producer_id, epoch + 1, 0, 1) == (0, 0)
    assert _produce(port, topic, producer_id, epoch + 1, 5, 1)[0] == 45
    assert _produce(port, topic, producer_id, epoch, 1, 1)[0] == 47
    assert stats(gateway.path(topic)).message_count == 1


def test_a_producer_idle_for_a_day_is_forgotten() -> None:
    """A producer that wrote nothing for a day is forgotten (as Kafka's producer.id.expiration.ms
    does), so producers coming and going do not grow the table without end; one still writing is
    kept, and still has its retries recognised."""
    now = [0.0]
    sequences = Sequences(clock=lambda: now[0])
    for producer in range(100):  # short-lived producers, one batch each
        sequences.written("t", 0, producer, 0, 0, 5, base_offset=5 * producer)
    sequences.written("t", 0, 1000, 0, 0, 5, base_offset=500)
    now[0] = 23 * 3600.0
    sequences.written("t", 0, 1000, 0, 5, 5, base_offset=505)  # still writing
    assert len(sequences) == 101
    now[0] = 25 * 3600.0
    sequences.written("t", 1, 2000, 0, 0, 1, base_offset=0)  # any write sweeps, at most once an hour
    assert len(sequences) == 2
    assert sequences.check("t", 0, 1000, 0, 5, 5) == Duplicate(505)
    assert sequences.check("t", 0, 7, 0, 0, 5) is None  # forgotten: its batch is new, as after a restart
