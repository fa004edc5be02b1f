"""The Kafka backend's client configuration and its blocking questions to the cluster about a topic.

``kafka=`` takes librdkafka's settings as a mapping, or the path of a properties file (the one
``adiskq mirror --kafka-config`` reads: librdkafka's or the Java client's keys, secrets included);
the URL names only brokers and topic (``_mirror_config`` refuses credentials there). Each function
here blocks and is called in an AnyIO worker thread, bounded by the mirror's ``TIMEOUT``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any

import confluent_kafka
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.cimpl import NewPartitions

from .._errors import InvalidArgumentError, OffsetOutOfRangeError, UnsupportedFeatureError
from .._sansio.capabilities import refuse
from .._sansio.values import Retention
from ._mirror_config import KafkaEnd, parse_kafka_url, read_client_config
from ._mirror_kafka import TIMEOUT, admin_client, create_topic, partition_count

__all__ = [
    "KafkaTarget",
    "check_sync_flush",
    "configured",
    "ensure_topic",
    "new_consumer",
    "offsets_at",
    "target",
    "topic_partitions",
]

KafkaConfig = dict[str, str]


class KafkaTarget:
    """A ``kafka://`` URL and the client configuration it is reached with."""

    def __init__(self, end: KafkaEnd, config: KafkaConfig) -> None:
        self.end = end
        self.topic = end.topic
        self.config = config

    @property
    def url(self) -> str:
        return self.end.url


def target(url: str, kafka: Mapping[str, object] | str | os.PathLike[str] | None) -> KafkaTarget:
    """The topic ``url`` names and the client configuration ``kafka=`` gives (see the module's docstring)."""
    end = parse_kafka_url(url)
    if kafka is None:
        given: dict[str, str] = {}
    elif isinstance(kafka, str | os.PathLike):
        given = read_client_config(kafka)
    elif isinstance(kafka, Mapping):
        given = {}
        for key, value in kafka.items():
            if not isinstance(key, str):
                raise InvalidArgumentError(f"kafka= takes librdkafka's setting names (str), not {key!r}")
            given[key] = (
                value if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
            )
    else:
        raise InvalidArgumentError(
            "kafka= takes librdkafka's settings as a dict, or the path of a properties file, "
            f"not {type(kafka).__name__}"
        )
    if "bootstrap.servers" in given:
        raise InvalidArgumentError(
            "kafka= holds bootstrap.servers, which the URL gives: write the brokers in kafka://HOST:PORT,.../TOPIC"
        )
    return KafkaTarget(end, {**given, "bootstrap.servers": end.bootstrap})


@contextlib.contextmanager
def configured(where: KafkaTarget) -> Iterator[None]:
    """librdkafka's refusal of a setting (an unknown name, a bad value) as ``InvalidArgumentError``."""
    try:
        yield
    except confluent_kafka.KafkaException as error:
        if error.args and getattr(error.args[0], "code", lambda: None)() == confluent_kafka.KafkaError._INVALID_ARG:
            raise InvalidArgumentError(
                f"the Kafka client refused its configuration for {where.url}: {error.args[0].str()}; "
                "kafka= takes librdkafka's setting names (its CONFIGURATION.md)"
            ) from None
        raise


def topic_partitions(config: Mapping[str, str], topic: str) -> int:
    """How many partitions ``topic`` has; ``InvalidArgumentError`` naming the fix when it does not exist."""
    count = partition_count(config, topic)
    if count is None:
        raise InvalidArgumentError(
            f"Kafka topic {topic!r} does not exist at {config['bootstrap.servers']}: create it "
            "(a Producer of its URL does, kafka-topics.sh --create, or adiskq mirror --create-topic)"
        )
    return count


def _retention_configs(retention: Retention | None) -> dict[str, str]:
    if retention is None:
        return {}
    if retention.max_disk_usage is not None:
        raise refuse("retention", asked="Retention(max_disk_usage=...)")
    configs: dict[str, str] = {}
    if retention.max_bytes is not None:
        configs["retention.bytes"] = str(retention.max_bytes)
    if retention.max_age is not None:
        configs["retention.ms"] = str(int(retention.max_age.total_seconds() * 1000))
    return configs


def ensure_topic(config: Mapping[str, str], topic: str, partitions: int | None, retention: Retention | None) -> int:
    """A producer's topic as it asks: created when missing (``partitions``, 1 by default, as a new
    stream's; the brokers' replication factor), grown to ``partitions``, with ``retention`` as its
    retention.bytes and retention.ms. Returns its partition count."""
    topic_configs = _retention_configs(retention)
    count = partition_count(config, topic)
    if count is None:
        create_topic(config, topic, partitions or 1, -1, topic_configs)
        return partitions or 1
    admin = admin_client(config)
    try:
        if partitions is not None and partitions > count:
            admin.create_partitions([NewPartitions(topic, partitions)], request_timeout=TIMEOUT)[topic].result(TIMEOUT)
            count = partitions
        if topic_configs:
            entries = [
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                for name, value in topic_configs.items()
            ]
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
            for future in admin.incremental_alter_configs([resource], request_timeout=TIMEOUT).values():
                future.result(TIMEOUT)
    except confluent_kafka.KafkaException as error:
        raise InvalidArgumentError(f"Kafka topic {topic!r} cannot take the settings asked: {error}") from None
    return count


def check_sync_flush(config: Mapping[str, str], topic: str) -> None:
    """``flush="sync"`` promises a push survives the loss of a machine: on Kafka that holds only
    when a write needs two replicas (``acks=all`` with ``min.insync.replicas >= 2``)."""
    admin = admin_client(config)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            answer = admin.describe_configs([resource], request_timeout=TIMEOUT)
            described: Any = next(iter(answer.values())).result(TIMEOUT)
            break
        except confluent_kafka.KafkaException as error:
            # A topic just made reaches every broker's metadata a little after the controller answers.
            unknown = error.args[0].code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART
            if not unknown or time.monotonic() > deadline:
                raise InvalidArgumentError(f"cannot read the settings of Kafka topic {topic!r}: {error}") from None
            time.sleep(0.1)
    entry = described.get("min.insync.replicas")
    replicas = int(entry.value) if entry is not None and entry.value is not None else 1
    if replicas < 2:
        raise UnsupportedFeatureError(
            'flush="sync"',
            "kafka",
            f"topic {topic!r} has min.insync.replicas={replicas}, so an acknowledged write may live on one "
            "machine only. Set it to 2 or more (kafka-configs.sh --alter --entity-type topics --entity-name "
            f'{topic} --add-config min.insync.replicas=2, with a replication factor of 3), or use flush="async"',
        )


def new_consumer(config: Mapping[str, str], **settings: str | bool | int) -> confluent_kafka.Consumer:
    """A librdkafka consumer reading committed records only, as the mirror's readers do."""
    return confluent_kafka.Consumer(
        {
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            **config,
            **settings,
        }
    )


def offsets_at(
    consumer: confluent_kafka.Consumer,
    topic: str,
    partitions: list[int],
    at: str | int | dt.datetime,
    *,
    deleted_ok: bool = False,
) -> dict[int, int]:
    """Each partition's offset for a position: ``"oldest"``, ``"newest"``, an offset (checked against
    what the partition holds) or a ``datetime`` (the first record at or after it; the end when none is).
    ``deleted_ok``: an offset retention deleted is given as it is (a reader's ``on_data_loss`` says
    what its first read does there), where it is refused otherwise."""
    bounds = {
        p: consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=TIMEOUT, cached=False)
        for p in partitions
    }
    if at == "oldest":
        return {p: low for p, (low, _) in bounds.items()}
    if at == "newest":
        return {p: high for p, (_, high) in bounds.items()}
    if isinstance(at, dt.datetime):
        if at.tzinfo is None:
            raise InvalidArgumentError(f"{at!r} has no time zone: give an aware datetime (e.g. tzinfo=datetime.UTC)")
        ms = int(at.timestamp() * 1000)
        found = consumer.offsets_for_times([confluent_kafka.TopicPartition(topic, p, ms) for p in partitions], TIMEOUT)
        return {tp.partition: bounds[tp.partition][1] if tp.offset < 0 else tp.offset for tp in found}
    assert isinstance(at, int)
    for p, (low, high) in bounds.items():
        if not (0 if deleted_ok else low) <= at <= high:
            raise OffsetOutOfRangeError(
                f"partition {p} of Kafka topic {topic!r} holds offsets {low}..{high - 1} (the next offset is "
                f"{high}), so it cannot start at {at}: give an offset in {low}..{high}",
                partition=p,
                offset=at,
                oldest_offset=low,
                next_offset=high,
            )
    return dict.fromkeys(partitions, at)
