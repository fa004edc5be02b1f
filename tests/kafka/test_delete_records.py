"""DeleteRecords through real clients (confluent-kafka's and kafka-python's ``delete_records``): the
partition's log start offset rises, durably, and everything honours it: ListOffsets' earliest, a
Kafka consumer reset to the earliest, the library's readers, ``adiskq stats`` and vacuum. What a
client sees is checked against Apache Kafka (``kafka_broker``) too."""

from __future__ import annotations

import os
import uuid
import warnings

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from conftest import RunningGateway
from support.kafka_broker import KafkaBroker

import adiskq
from adiskq._errors import OffsetOutOfRangeError
from adiskq._storage.log_start import LOG_START_FILE
from adiskq._storage.stream import StreamReader

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")


def _topic_of(bootstrap: str, count: int, **config: str) -> tuple[AdminClient, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"records-{uuid.uuid4().hex[:12]}"
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, b"%03d" % i + b"." * 200, partition=0)
        assert producer.flush(30) == 0
    return admin, topic


def _earliest(admin: AdminClient, topic: str) -> int:
    partition = ConfluentPartition(topic, 0)
    return int(admin.list_offsets({partition: OffsetSpec.earliest()})[partition].result(30).offset)


def _as_a_client_sees_it(bootstrap: str) -> tuple[str, AdminClient]:
    """DeleteRecords up to 4 of 10 records, as a Kafka client sees it; the topic and admin client."""
    admin, topic = _topic_of(bootstrap, 10)
    deleted = admin.delete_records([ConfluentPartition(topic, 0, 4)])[ConfluentPartition(topic, 0)].result(30)
    assert deleted.low_watermark == 4
    assert _earliest(admin, topic) == 4

    # A Kafka consumer at offset 0 is out of range and resets to the earliest: 4.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.assign([ConfluentPartition(topic, 0, 0)])
    try:
        first = None
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                first = message
                break
        assert first is not None
        assert (first.offset(), first.value()[:3]) == (4, b"004")
    finally:
        consumer.close()

    # Lower than the log start: nothing changes; past the end: OFFSET_OUT_OF_RANGE.
    again = admin.delete_records([ConfluentPartition(topic, 0, 2)])[ConfluentPartition(topic, 0)].result(30)
    assert again.low_watermark == 4
    with pytest.raises(KafkaException) as past:
        admin.delete_records([ConfluentPartition(topic, 0, 11)])[ConfluentPartition(topic, 0)].result(30)
    assert past.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    return topic, admin


def test_delete_records_as_kafka_clients_see_it_on_kafka(kafka_broker: KafkaBroker) -> None:
    topic, admin = _as_a_client_sees_it(kafka_broker.bootstrap)
    every = admin.delete_records([ConfluentPartition(topic, 0, OFFSET_END)])[ConfluentPartition(topic, 0)].result(30)
    assert every.low_watermark == 10


def test_delete_records_raises_the_log_start_everything_honours(gateway: RunningGateway) -> None:
    topic, admin = _as_a_client_sees_it(gateway.bootstrap)

    # The library's readers and stats, from the file alone (a reader opened afresh).
    path = gateway.path(topic)
    partition = StreamReader.open(path).partition(0)
    assert partition.bounds() == (4, 10)
    with pytest.raises(OffsetOutOfRangeError) as below:
        partition.cursor(0).read()
    assert below.value.oldest_offset == 4
    assert [m.offset for m in partition.cursor(4).read()] == list(range(4, 10))
    assert adiskq.stats(path).partitions[0].oldest_offset == 4
    assert os.path.exists(os.path.join(path, "parts", "000000", LOG_START_FILE))

    every = admin.delete_records([ConfluentPartition(topic, 0, OFFSET_END)])[ConfluentPartition(topic, 0)].result(30)
    assert every.low_watermark == 10
    assert StreamReader.open(path).partition(0).bounds() == (10, 10)


def test_the_segments_below_the_log_start_are_vacuumed(gateway: RunningGateway) -> None:
    _admin, topic = _topic_of(gateway.bootstrap, 40, **{"segment.bytes": "1024"})
    path = os.path.join(gateway.path(topic), "parts", "000000")
    before = sorted(name for name in os.listdir(path) if name.endswith(".index"))
    assert len(before) > 4
    python_admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        answer = python_admin.delete_records({TopicPartition(topic, 0): 30})
    finally:
        python_admin.close()
    assert answer[TopicPartition(topic, 0)]["low_watermark"] == 30
    after = sorted(name for name in os.listdir(path) if name.endswith(".index"))
    assert len(after) < len(before)
    assert int(after[0].split(".")[0]) <= 30  # the segment holding offset 30 is kept
    assert int(after[0].split(".")[0]) > 0
    assert StreamReader.open(gateway.path(topic)).partition(0).bounds() == (30, 40)
