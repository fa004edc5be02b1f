"""The group admin APIs a one-broker Kafka serves, through real clients' admin calls: DeleteGroups
(confluent-kafka's ``delete_consumer_groups``), OffsetDelete (kafka-python's
``delete_group_offsets``), the committed leader epoch OffsetFetch returns, and an Empty consumer
group that keeps its protocol type ("consumer", not a simple group) in ListGroups and DescribeGroups."""

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


def _one_record(bootstrap: str, topic: str) -> None:
    produce_all(bootstrap, topic, [(b"k", b"v", [], 1_700_000_000_000)])


def test_the_committed_leader_epoch_comes_back(gateway: RunningGateway) -> None:
    topic = _topic(gateway.bootstrap)
    for _ in range(5):
        _one_record(gateway.bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": f"epoch-{topic}"})
    try:
        consumer.commit(offsets=[ConfluentPartition(topic, 0, 3, leader_epoch=0)], asynchronous=False)
        committed = consumer.committed([ConfluentPartition(topic, 0)], timeout=10)[0]
        assert (committed.offset, committed.leader_epoch) == (3, 0)
        consumer.commit(offsets=[ConfluentPartition(topic, 0, 4)], asynchronous=False)  # none given: none kept
        committed = consumer.committed([ConfluentPartition(topic, 0)], timeout=10)[0]
        assert (committed.offset, committed.leader_epoch) == (4, None)
    finally:
        consumer.close()


def test_an_empty_consumer_group_keeps_its_protocol_type(gateway: RunningGateway) -> None:
    topic = _topic(gateway.bootstrap)
    _one_record(gateway.bootstrap, topic)
    group = f"empty-{topic}"
    consumer = _subscribed(gateway.bootstrap, group, topic)
    consumer.commit(asynchronous=False)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    assert described.state == ConsumerGroupState.EMPTY
    assert described.is_simple_consumer_group is False
    listed = admin.list_consumer_groups(request_timeout=10).result().valid
    assert [g.is_simple_consumer_group for g in listed if g.group_id == group] == [False]
    python_admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    try:
        found = [g for g in python_admin.list_groups() if g["group_id"] == group]
        assert [(g["protocol_type"], g["group_state"]) for g in found] == [("consumer", "Empty")]
    finally:
        python_admin.close()


def test_delete_groups_deletes_an_empty_group_and_refuses_a_live_or_unknown_one(gateway: RunningGateway) -> None:
    topic = _topic(gateway.bootstrap)
    _one_record(gateway.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    live, gone = f"live-{topic}", f"gone-{topic}"
    consumer = _subscribed(gateway.bootstrap, gone, topic)
    consumer.commit(asynchronous=False)
    consumer.close()
    member = _subscribed(gateway.bootstrap, live, topic)
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


def test_offset_delete_forgets_the_partitions_no_member_subscribes_to(gateway: RunningGateway) -> None:
    topic, other = _topic(gateway.bootstrap, 2), _topic(gateway.bootstrap)
    for name in (topic, other):
        _one_record(gateway.bootstrap, name)
    group = f"offsets-{topic}"
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
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

        member = _subscribed(gateway.bootstrap, group, other)  # the group is live, reading `other`
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
