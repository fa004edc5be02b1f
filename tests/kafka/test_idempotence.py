"""Idempotent produce at the protocol level: retries answered with their first offset, gaps refused."""

from __future__ import annotations

import datetime as dt

from conftest import call
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName

from adiskq import stats
from adiskq._sansio.kafka_batch import KafkaRecord, encode_batch


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
