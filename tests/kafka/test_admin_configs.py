"""Topic configs through real clients' admin calls, mapped onto the stream's settings: CreateTopics
with configs and with a replica assignment naming broker 0, DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs; INVALID_CONFIG for what adiskq has no equivalent of.

Each check runs against the gateway and against Apache Kafka (``kafka_broker``) with the same
calls and assertions; where they differ (Kafka's defaults, and ``cleanup.policy=compact``, which
Kafka takes and the gateway refuses) the check says so. The gateway's runs also look at the stream."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
import warnings
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from conftest import RunningGateway
from support.kafka_broker import KafkaBroker

import adiskq
from adiskq._storage.settings import StreamSettings
from adiskq._storage.stream import StreamReader

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource as KafkaConfigResource
    from kafka.admin import KafkaAdminClient

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")

SOME = {"retention.ms": "60000", "retention.bytes": "5000000", "segment.bytes": "1048576", "max.message.bytes": "1024"}


@dataclasses.dataclass
class Server:
    """The gateway (``stream``: a topic's stream folder) or Kafka (``stream`` None)."""

    bootstrap: str
    stream: Callable[[str], str] | None = None

    def settings(self, topic: str) -> StreamSettings | None:
        """The topic's stream settings (None on Kafka)."""
        return None if self.stream is None else StreamReader.open(self.stream(topic)).settings


def _name() -> str:
    return f"configs-{uuid.uuid4().hex[:12]}"


def _described(admin: AdminClient, topic: str) -> dict[str, str]:
    """The topic's configs (on Kafka, once the broker knows of a topic just created)."""
    resource = ConfigResource("topic", topic)
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = admin.describe_configs([resource])[resource].result(30)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            continue
        return {name: entry.value for name, entry in answer.items()}


def _described_as(admin: AdminClient, topic: str, expected: dict[str, str]) -> dict[str, str]:
    """The topic's configs once they hold ``expected`` (Kafka's brokers learn of an alter from the
    controller's metadata a moment after answering it; the gateway answers with it at once)."""
    deadline = time.monotonic() + 30
    while True:
        described = _described(admin, topic)
        if all(described.get(name) == value for name, value in expected.items()) or time.monotonic() > deadline:
            return described


def _defaults(admin: AdminClient) -> dict[str, str]:
    """The configs of a topic created without any: the server's defaults."""
    topic = _name()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    return _described(admin, topic)


def _create_topics_takes_configs(server: Server) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = _name()
    admin.create_topics([NewTopic(topic, 2, 1, config=SOME)])[topic].result(30)
    described = _described(admin, topic)
    assert {name: described[name] for name in SOME} == SOME
    assert described["cleanup.policy"] == "delete"
    settings = server.settings(topic)
    if settings is not None:
        assert settings.retention.max_age == dt.timedelta(seconds=60)
        assert settings.retention.max_bytes == 5_000_000
        assert (settings.segment_size_bytes, settings.max_message_bytes) == (1_048_576, 1024)

    # max.message.bytes is kept: a larger record is refused, a smaller one stored.
    failures: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, "message.timeout.ms": 10_000})
    for value in (b"x" * 2000, b"small"):  # a batch each: max.message.bytes bounds a whole batch in Kafka
        producer.produce(topic, value, partition=0, on_delivery=lambda e, _m: failures.append(e) if e else None)
        assert producer.flush(30) == 0
    assert [error.code() for error in failures] == [KafkaError.MSG_SIZE_TOO_LARGE]
    if server.stream is not None:
        assert adiskq.stats(server.stream(topic)).partitions[0].next_offset == 1


def _refusals(server: Server) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topic = _name()
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(topic, 1, 1, config={"no.such.config": "1"})])[topic].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "no.such.config" in refused.value.args[0].str()
    assert topic not in admin.list_topics(timeout=10).topics
    for policy in ("compact", "compact,delete"):
        topic = _name()
        created = admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": policy})])[topic]
        if server.stream is None:
            created.result(30)  # Kafka keeps compacted logs; adiskq has none
            continue
        with pytest.raises(KafkaException) as refused:
            created.result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "cleanup.policy" in refused.value.args[0].str()
        assert topic not in admin.list_topics(timeout=10).topics


def _incremental_alter_configs(server: Server) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    defaults = _defaults(admin)
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
    described = _described_as(admin, topic, {"retention.ms": "3600000", "segment.bytes": defaults["segment.bytes"]})
    assert described["retention.ms"] == "3600000"
    assert described["segment.bytes"] == defaults["segment.bytes"]  # back to the server's default
    settings = server.settings(topic)
    if settings is not None:
        assert settings.retention.max_age == dt.timedelta(hours=1)
        assert settings.segment_size_bytes == StreamSettings().segment_size_bytes

    unknown = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([unknown])[unknown].result(30)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    if server.stream is not None:
        compact = ConfigResource(
            "topic",
            topic,
            incremental_configs=[ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)],
        )
        with pytest.raises(KafkaException) as refused:
            admin.incremental_alter_configs([compact])[compact].result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert _described(admin, topic)["cleanup.policy"] == "delete"

    # The topic is written as before (the gateway's producer reopened with the new settings).
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0})
    producer.produce(topic, b"after", partition=0)
    assert producer.flush(30) == 0

    python_admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)  # kafka-python's SET
    try:
        python_admin.alter_configs([KafkaConfigResource("TOPIC", topic, {"retention.ms": "1000"})], incremental=True)
    finally:
        python_admin.close()
    assert _described_as(admin, topic, {"retention.ms": "1000"})["retention.ms"] == "1000"


def _alter_configs_replaces_the_whole_set(server: Server) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    defaults = _defaults(admin)
    topic = _name()
    admin.create_topics([NewTopic(topic, 1, 1, config=SOME)])[topic].result(30)
    resource = ConfigResource("topic", topic, set_config={"retention.bytes": "123456"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # AlterConfigs is deprecated in Kafka, still served
        admin.alter_configs([resource])[resource].result(30)
    described = _described_as(admin, topic, {"retention.bytes": "123456", "retention.ms": defaults["retention.ms"]})
    assert described["retention.bytes"] == "123456"
    for name in ("retention.ms", "segment.bytes", "max.message.bytes"):  # not given: back to the defaults
        assert described[name] == defaults[name]


def _replica_assignment_naming_broker_0(server: Server) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    topic, elsewhere = _name(), _name()
    try:
        admin.create_topics({topic: {"assignments": {0: [0], 1: [0], 2: [0]}}})
        with pytest.raises(Exception, match=r"\[Error 39\]"):  # INVALID_REPLICA_ASSIGNMENT
            admin.create_topics({elsewhere: {"assignments": {0: [1]}}})
    finally:
        admin.close()
    topics = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(timeout=10).topics
    assert len(topics[topic].partitions) == 3
    assert elsewhere not in topics


CHECKS = [
    _create_topics_takes_configs,
    _refusals,
    _incremental_alter_configs,
    _alter_configs_replaces_the_whole_set,
    _replica_assignment_naming_broker_0,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__.strip("_"))
def test_on_the_gateway(gateway: RunningGateway, check: Callable[[Server], None]) -> None:
    check(Server(gateway.bootstrap, gateway.path))


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__.strip("_"))
def test_on_kafka(kafka_broker: KafkaBroker, check: Callable[[Server], None]) -> None:
    check(Server(kafka_broker.bootstrap))
