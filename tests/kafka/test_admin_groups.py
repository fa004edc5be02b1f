"""The group admin APIs a one-broker Kafka serves, through real clients' admin calls: DeleteGroups
(confluent-kafka's ``delete_consumer_groups``), OffsetDelete (kafka-python's
``delete_group_offsets``), the committed leader epoch OffsetFetch returns, and an Empty consumer
group that keeps its protocol type ("consumer", not a simple group) in ListGroups and DescribeGroups.

Each check runs against the gateway and against Apache Kafka (``kafka_broker``), asserting the same
answers."""

from __future__ import annotations

import time
import uuid
import warnings

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RunningGateway
from kafka_support import produce_all
from support.kafka_broker import KafkaBroker

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"admin-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer: it ends with the handle
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _subscribed(bootstrap: str, group: str, topic: str) -> Consumer:
    """A consumer of ``group`` subscribed to ``topic`` that has read its first message."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            return consumer
    consumer.close()
    raise AssertionError(f"the consumer of {group} read nothing of {topic} in 60 s")


def _names(answer: dict[TopicPartition, type]) -> dict[TopicPartition, str]:
    """kafka-python's answer per partition (an error class, NoError for none) by class name."""
    return {partition: error.__name__ for partition, error in answer.items()}


_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)


def _commit(consumer: Consumer, offsets: list[ConfluentPartition] | None = None) -> None:
    """A synchronous commit, tried again while the answer is retriable (a Kafka broker answers
    NOT_COORDINATOR while it creates its offsets topic on a group's first commit)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if offsets is None:
                consumer.commit(asynchronous=False)
            else:
                consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as error:
            if error.args[0].code() not in _COORDINATOR_MOVING or time.monotonic() > deadline:
                raise


def _one_record(bootstrap: str, topic: str) -> None:
    produce_all(bootstrap, topic, [(b"k", b"v", [], 1_700_000_000_000)])


def _the_committed_leader_epoch_comes_back(bootstrap: str) -> None:
    topic = _topic(bootstrap)
    for _ in range(5):
        _one_record(bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"epoch-{topic}"})
    try:
        _commit(consumer, [ConfluentPartition(topic, 0, 3, leader_epoch=0)])
        committed = consumer.committed([ConfluentPartition(topic, 0)], timeout=10)[0]
        assert (committed.offset, committed.leader_epoch) == (3, 0)
        _commit(consumer, [ConfluentPartition(topic, 0, 4)])  # none given: none kept
        committed = consumer.committed([ConfluentPartition(topic, 0)], timeout=10)[0]
        assert (committed.offset, committed.leader_epoch) == (4, None)
    finally:
        consumer.close()


def _an_empty_consumer_group_keeps_its_protocol_type(bootstrap: str) -> None:
    topic = _topic(bootstrap)
    _one_record(bootstrap, topic)
    group = f"empty-{topic}"
    consumer = _subscribed(bootstrap, group, topic)
    _commit(consumer)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    assert described.state == ConsumerGroupState.EMPTY
    assert described.is_simple_consumer_group is False
    listed = admin.list_consumer_groups(request_timeout=10).result().valid
    assert [g.is_simple_consumer_group for g in listed if g.group_id == group] == [False]
    python_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = [g for g in python_admin.list_groups() if g["group_id"] == group]
        assert [(g["protocol_type"], g["group_state"]) for g in found] == [("consumer", "Empty")]
    finally:
        python_admin.close()


def _delete_groups_deletes_an_empty_group_and_refuses_a_live_or_unknown_one(bootstrap: str) -> None:
    topic = _topic(bootstrap)
    _one_record(bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    live, gone = f"live-{topic}", f"gone-{topic}"
    consumer = _subscribed(bootstrap, gone, topic)
    _commit(consumer)
    consumer.close()
    member = _subscribed(bootstrap, live, topic)
    try:
        with pytest.raises(KafkaException) as refused:
            admin.delete_consumer_groups([live], request_timeout=10)[live].result()
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

        admin.delete_consumer_groups([gone], request_timeout=10)[gone].result()
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gone)])[gone].result()
        assert offsets.topic_partitions == []
        described = admin.describe_consumer_groups([gone], request_timeout=10)[gone].result()
        assert described.state == ConsumerGroupState.DEAD
        assert gone not in [g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid]

        with pytest.raises(KafkaException) as unknown:
            admin.delete_consumer_groups([gone], request_timeout=10)[gone].result()
        assert unknown.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
    finally:
        member.close()


def _offset_delete_forgets_the_partitions_no_member_subscribes_to(bootstrap: str) -> None:
    topic, other = _topic(bootstrap, 2), _topic(bootstrap)
    for name in (topic, other):
        _one_record(bootstrap, name)
    group = f"offsets-{topic}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_group_offsets(
            group,
            {
                TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1),
                TopicPartition(topic, 1): OffsetAndMetadata(0, "", -1),
            },
        )
        answer = admin.delete_group_offsets(group, [TopicPartition(topic, 0)])
        assert _names(answer) == {TopicPartition(topic, 0): "NoError"}
        assert admin.list_group_offsets(group) == {group: {TopicPartition(topic, 1): OffsetAndMetadata(0, "", -1)}}

        with pytest.raises(Exception, match="GroupIdNotFound"):
            admin.delete_group_offsets(f"nobody-{topic}", [TopicPartition(topic, 0)])

        member = _subscribed(bootstrap, group, other)  # the group is live, reading `other`
        try:
            answer = admin.delete_group_offsets(group, [TopicPartition(other, 0), TopicPartition(topic, 1)])
            assert _names(answer) == {
                TopicPartition(other, 0): "GroupSubscribedToTopicError",
                TopicPartition(topic, 1): "NoError",
            }
            assert admin.list_group_offsets(group) == {group: {}}
        finally:
            member.close()
    finally:
        admin.close()


def test_the_committed_leader_epoch_comes_back(gateway: RunningGateway) -> None:
    _the_committed_leader_epoch_comes_back(gateway.bootstrap)


def test_the_committed_leader_epoch_comes_back_on_kafka(kafka_broker: KafkaBroker) -> None:
    _the_committed_leader_epoch_comes_back(kafka_broker.bootstrap)


def test_an_empty_consumer_group_keeps_its_protocol_type(gateway: RunningGateway) -> None:
    _an_empty_consumer_group_keeps_its_protocol_type(gateway.bootstrap)


def test_an_empty_consumer_group_keeps_its_protocol_type_on_kafka(kafka_broker: KafkaBroker) -> None:
    _an_empty_consumer_group_keeps_its_protocol_type(kafka_broker.bootstrap)


def test_delete_groups_deletes_an_empty_group_and_refuses_a_live_or_unknown_one(gateway: RunningGateway) -> None:
    _delete_groups_deletes_an_empty_group_and_refuses_a_live_or_unknown_one(gateway.bootstrap)


def test_delete_groups_deletes_an_empty_group_and_refuses_a_live_or_unknown_one_on_kafka(
    kafka_broker: KafkaBroker,
) -> None:
    _delete_groups_deletes_an_empty_group_and_refuses_a_live_or_unknown_one(kafka_broker.bootstrap)


def test_offset_delete_forgets_the_partitions_no_member_subscribes_to(gateway: RunningGateway) -> None:
    _offset_delete_forgets_the_partitions_no_member_subscribes_to(gateway.bootstrap)


def test_offset_delete_forgets_the_partitions_no_member_subscribes_to_on_kafka(kafka_broker: KafkaBroker) -> None:
    _offset_delete_forgets_the_partitions_no_member_subscribes_to(kafka_broker.bootstrap)
