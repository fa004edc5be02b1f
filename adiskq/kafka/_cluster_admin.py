"""``adiskq.lag``, ``reset_offsets`` and ``delete_group`` of a ``kafka://`` URL: a Kafka consumer
group's committed offsets, through librdkafka's AdminClient (blocking, as the local ones are)."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Mapping

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions

from .._errors import GroupInUseError, InvalidArgumentError
from .._sansio.naming import validate_group_name
from ._cluster_client import new_consumer, offsets_at, target, topic_partitions
from ._mirror_kafka import TIMEOUT, admin_client

__all__ = ["delete_group", "lag", "reset_offsets"]

KafkaOption = Mapping[str, object] | str | os.PathLike[str] | None
_IN_USE = (confluent_kafka.KafkaError.NON_EMPTY_GROUP, confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID)


def _committed(config: Mapping[str, str], topic: str, group: str) -> dict[int, int]:
    admin = admin_client(config)
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        answer = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT)[group].result(TIMEOUT)
    except confluent_kafka.KafkaException as error:
        if error.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND:
            return {}
        raise OSError(f"cannot read group {group!r}'s offsets: {error}") from None
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic and tp.offset >= 0}


def lag(url: str, group: str, kafka: KafkaOption = None) -> dict[int, int]:
    """Partition -> records left for ``group`` past its committed offsets (partitions it never
    committed in are left out)."""
    validate_group_name(group)
    where = target(url, kafka)
    committed = _committed(where.config, where.topic, group)
    if not committed:
        return {}
    consumer = new_consumer(where.config, **{"group.id": f"adiskq-lag-{uuid.uuid4().hex}"})
    try:
        ends = offsets_at(consumer, where.topic, sorted(committed), "newest")
    finally:
        consumer.close()
    return {p: max(0, ends[p] - offset) for p, offset in sorted(committed.items())}


def _refuse_if_live(config: Mapping[str, str], group: str) -> None:
    """``GroupInUseError`` naming the group's members while it has any: they would commit over a reset."""
    admin = admin_client(config)
    try:
        described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    except confluent_kafka.KafkaException as error:
        if error.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND:
            return
        raise OSError(f"cannot describe group {group!r}: {error}") from None
    if described.members:
        raise GroupInUseError(group, [f"{member.client_id} on {member.host}" for member in described.members])


def reset_offsets(
    url: str, group: str, to: str | int | dt.datetime, *, partition: int | None = None, kafka: KafkaOption = None
) -> dict[int, int]:
    """Move ``group``'s committed offsets in the topic (every partition, or ``partition``) to ``to``;
    ``GroupInUseError`` while the group has members (Kafka refuses to change a live group's offsets)."""
    validate_group_name(group)
    where = target(url, kafka)
    count = topic_partitions(where.config, where.topic)
    if partition is not None and not 0 <= partition < count:
        raise InvalidArgumentError(f"partition={partition}: Kafka topic {where.topic!r} has partitions 0..{count - 1}")
    partitions = list(range(count)) if partition is None else [partition]
    consumer = new_consumer(where.config, **{"group.id": f"adiskq-reset-{uuid.uuid4().hex}"})
    try:
        offsets = offsets_at(consumer, where.topic, partitions, to)
    finally:
        consumer.close()
    _refuse_if_live(where.config, group)
    admin = admin_client(where.config)
    request = ConsumerGroupTopicPartitions(
        group, [confluent_kafka.TopicPartition(where.topic, p, o) for p, o in offsets.items()]
    )
    try:
        answer = admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT)[group].result(TIMEOUT)
        failed = [tp.error for tp in answer.topic_partitions if tp.error is not None]
        if failed:
            raise confluent_kafka.KafkaException(failed[0])
    except confluent_kafka.KafkaException as error:
        if error.args[0].code() in _IN_USE:
            raise GroupInUseError(group, []) from None
        raise OSError(f"cannot reset group {group!r}'s offsets: {error}") from None
    return offsets


def delete_group(url: str, group: str, kafka: KafkaOption = None) -> bool:
    """Delete ``group`` from the cluster (its committed offsets of every topic, as Kafka's groups
    span topics); False when it did not exist, ``GroupInUseError`` while it has members."""
    validate_group_name(group)
    where = target(url, kafka)
    _refuse_if_live(where.config, group)
    admin = admin_client(where.config)
    try:
        admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result(TIMEOUT)
    except confluent_kafka.KafkaException as error:
        code = error.args[0].code()
        if code == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND:
            return False
        if code in _IN_USE:
            raise GroupInUseError(group, []) from None
        raise OSError(f"cannot delete group {group!r}: {error}") from None
    return True
