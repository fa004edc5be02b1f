"""Topic configs through real clients' admin calls, mapped onto the stream's settings: CreateTopics
with configs and with a replica assignment naming broker 0, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs; INVALID_CONFIG for what adiskq has no equivalent of (cleanup.policy=compact)."""

from __future__ import annotations

import datetime as dt
import uuid
import warnings

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from conftest import RunningGateway

import adiskq
from adiskq._storage.stream import StreamReader

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource as KafkaConfigResource
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")

SOME = {"retention.ms": "60000", "retention.bytes": "5000000", "segment.bytes": "1048576", "max.message.bytes": "1024"}


def _name() -> str:
    return f"configs-{uuid.uuid4().hex[:12]}"


def _described(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource("topic", topic)
    return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(30).items()}


def test_create_topics_takes_configs_as_the_stream_s_settings(gateway: RunningGateway) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = _name()
    admin.create_topics([NewTopic(topic, 2, 1, config=SOME)])[topic].result(30)
    settings = StreamReader.open(gateway.path(topic)).settings
    assert settings.retention.max_age == dt.timedelta(seconds=60)
    assert settings.retention.max_bytes == 5_000_000
    assert (settings.segment_size_bytes, settings.max_message_bytes) == (1_048_576, 1024)
    described = _described(admin, topic)
    assert {name: described[name] for name in SOME} == SOME
    assert described["cleanup.policy"] == "delete"

    # max.message.bytes is kept: a larger record is refused, a smaller one stored.
    failures: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "message.timeout.ms": 10_000})
    for value in (b"x" * 2000, b"small"):  # a batch each: max.message.bytes bounds a whole batch in Kafka
        producer.produce(topic, value, partition=0, on_delivery=lambda e, _m: failures.append(e) if e else None)
        assert producer.flush(30) == 0
    assert [error.code() for error in failures] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert adiskq.stats(gateway.path(topic)).partitions[0].next_offset == 1


def test_a_config_adiskq_lacks_is_refused_with_invalid_config(gateway: RunningGateway) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    for config in ({"cleanup.policy": "compact"}, {"cleanup.policy": "compact,delete"}, {"no.such.config": "1"}):
        topic = _name()
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert next(iter(config)) in refused.value.args[0].str()
        assert topic not in admin.list_topics(timeout=10).topics


def test_incremental_alter_configs_sets_and_deletes_one_config_at_a_time(gateway: RunningGateway) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = _name()
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1048576"})])[topic].result(30)
    changes = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([changes])[changes].result(30)
    described = _described(admin, topic)
    assert described["retention.ms"] == "3600000"
    assert described["segment.bytes"] == str(32 * 1024 * 1024)  # back to adiskq's default
    settings = StreamReader.open(gateway.path(topic)).settings
    assert settings.retention.max_age == dt.timedelta(hours=1)

    compact = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([compact])[compact].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert _described(admin, topic)["cleanup.policy"] == "delete"

    # The topic's producer reopened with the new settings: it is written as before.
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0})
    producer.produce(topic, b"after", partition=0)
    assert producer.flush(30) == 0
    assert adiskq.stats(gateway.path(topic)).partitions[0].next_offset == 1

    python_admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)  # kafka-python's SET
    try:
        python_admin.alter_configs([KafkaConfigResource("TOPIC", topic, {"retention.ms": "1000"})], incremental=True)
    finally:
        python_admin.close()
    assert _described(admin, topic)["retention.ms"] == "1000"


def test_alter_configs_replaces_the_whole_set(gateway: RunningGateway) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = _name()
    admin.create_topics([NewTopic(topic, 1, 1, config=SOME)])[topic].result(30)
    resource = ConfigResource("topic", topic, set_config={"retention.bytes": "123456"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # AlterConfigs is deprecated in Kafka, still served
        admin.alter_configs([resource])[resource].result(30)
    described = _described(admin, topic)
    assert described["retention.bytes"] == "123456"
    assert described["retention.ms"] == "-1"  # not given: back to the default
    assert described["max.message.bytes"] == str(StreamReader.open(gateway.path(topic)).settings.max_message_bytes)


def test_create_topics_with_a_replica_assignment_naming_broker_0(gateway: RunningGateway) -> None:
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap)
    topic, elsewhere = _name(), _name()
    try:
        admin.create_topics({topic: {"assignments": {0: [0], 1: [0], 2: [0]}}})
        assert StreamReader.open(gateway.path(topic)).partition_count == 3
        with pytest.raises(Exception, match=r"\[Error 39\]"):
            admin.create_topics({elsewhere: {"assignments": {0: [1]}}})
    finally:
        admin.close()
    assert elsewhere not in AdminClient({"bootstrap.servers": gateway.bootstrap}).list_topics(timeout=10).topics
