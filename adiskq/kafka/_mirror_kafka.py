"""The mirror's blocking calls to a Kafka cluster, through confluent-kafka (librdkafka).

Each function here blocks and is called in an AnyIO worker thread (``docs/MIRROR.md``, "The
client", says why this client). librdkafka does its network I/O on threads of its own; these calls
only hand it work and wait for the answers, each bounded by ``TIMEOUT``.

The position records (local → Kafka) live in a state topic, keyed ``<stream_id>/<topic>/<partition>``
with the JSON value ``{"next": N, "crc": C, "partitioning": P}``: the next local offset to ship, the
CRC-32C of the record shipped last (``_mirror_mapping.record_crc``), and how records were placed
(``preserve`` or ``rehash``: changing it midway would put one key in two Kafka partitions). A reader
takes the last committed value of
each key, so the topic is right with or without compaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from .._errors import MirrorError

__all__ = [
    "TIMEOUT",
    "TRANSACTION_TIMEOUT_MS",
    "Position",
    "create_topic",
    "ensure_state_topic",
    "partition_count",
    "read_positions",
    "state_key",
    "state_value",
    "watermarks",
]

TIMEOUT: Final = 60.0  # seconds any one call to the cluster may take before the mirror gives up
# A mirror's transactions end within this (its producers' transaction.timeout.ms): the broker aborts
# one a killed mirror left open after it, checking every 10 s (Kafka's
# transaction.abort.timed.out.transaction.cleanup.interval.ms).
TRANSACTION_TIMEOUT_MS: Final = 30_000
# How long reading the positions waits for the state topic's stable offset to pass its high
# watermark: another mirror's transaction, left open by a kill, holds it back until the broker aborts it.
POSITIONS_DEADLINE: Final = TRANSACTION_TIMEOUT_MS / 1000 + 10.0 + TIMEOUT
STATE_TOPIC_PARTITIONS: Final = 1


class Position(NamedTuple):
    """Where the mirror stands in one local partition: the next offset to ship, and the CRC-32C of
    the record before it (None when nothing was shipped from this partition)."""

    next_offset: int
    crc: int | None
    partitioning: str = "preserve"  # how the records were placed: a mirror may not change it midway


def state_key(stream_id: str, topic: str, partition: int) -> bytes:
    return f"{stream_id}/{topic}/{partition}".encode()


def state_value(position: Position) -> bytes:
    stored = {"next": position.next_offset, "crc": position.crc, "partitioning": position.partitioning}
    return json.dumps(stored, separators=(",", ":")).encode()


def _kafka_failure(what: str, error: BaseException) -> MirrorError:
    return MirrorError(f"{what}: {error}")


def admin_client(config: Mapping[str, str]) -> AdminClient:
    return AdminClient(dict(config))


def partition_count(config: Mapping[str, str], topic: str) -> int | None:
    """How many partitions ``topic`` has, None when it does not exist."""
    admin = admin_client(config)
    try:
        # Every topic, not this one: a Metadata request naming a missing topic makes a broker with
        # auto.create.topics.enable (Kafka's default) create it, with the broker's partition count.
        metadata = admin.list_topics(timeout=TIMEOUT)
    except confluent_kafka.KafkaException as error:
        raise _kafka_failure(f"cannot reach the Kafka cluster at {config.get('bootstrap.servers')}", error) from None
    found = metadata.topics.get(topic)
    if found is None:
        return None
    if found.error is not None:
        missing = (confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART, confluent_kafka.KafkaError._UNKNOWN_TOPIC)
        if found.error.code() in missing:
            return None
        raise MirrorError(f"Kafka topic {topic!r}: {found.error.str()}")
    return len(found.partitions)


def create_topic(
    config: Mapping[str, str],
    topic: str,
    partitions: int,
    replication_factor: int,
    topic_config: Mapping[str, str] | None = None,
) -> None:
    """Create ``topic``; an existing one is left as it is."""
    admin = admin_client(config)
    new = NewTopic(topic, partitions, replication_factor, config=dict(topic_config or {}))
    try:
        admin.create_topics([new], operation_timeout=TIMEOUT, request_timeout=TIMEOUT)[topic].result(TIMEOUT)
    except confluent_kafka.KafkaException as error:
        if error.args[0].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise _kafka_failure(f"cannot create Kafka topic {topic!r}", error) from None
    # Metadata reaches every broker a little after the controller answers: wait until it is seen.
    deadline = time.monotonic() + TIMEOUT
    while partition_count(config, topic) != partitions:
        if time.monotonic() > deadline:
            raise MirrorError(f"Kafka topic {topic!r} was created but its {partitions} partitions never showed")
        time.sleep(0.05)


def ensure_state_topic(config: Mapping[str, str], topic: str) -> None:
    """The state topic, created compacted where the cluster allows topic configurations (the
    gateway does not: there it is made without, and stays right, read to its end)."""
    if partition_count(config, topic) is not None:
        return
    try:
        create_topic(config, topic, STATE_TOPIC_PARTITIONS, -1, {"cleanup.policy": "compact"})
    except MirrorError:
        create_topic(config, topic, STATE_TOPIC_PARTITIONS, -1)


def watermarks(
    config: Mapping[str, str], topic: str, partitions: int, *, committed: bool = True
) -> list[tuple[int, int]]:
    """``(low, high)`` offsets of each partition of ``topic``. With ``committed``, high is the last
    stable offset (records at or past it are not delivered to read-committed readers yet: an open
    transaction's, and everything after its first); without, the high watermark (every record
    written, committed or not)."""
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": "adiskq-mirror-watermarks", "isolation.level": isolation}
    )
    try:
        return [
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=TIMEOUT, cached=False)
            for p in range(partitions)
        ]
    except confluent_kafka.KafkaException as error:
        raise _kafka_failure(f"cannot read the offsets of Kafka topic {topic!r}", error) from None
    finally:
        consumer.close()


def read_positions(config: Mapping[str, str], state_topic: str, prefix: bytes) -> dict[int, Position]:
    """The last committed position of every key of ``state_topic`` that starts with ``prefix``,
    by local partition.

    Read with ``read_committed`` up to the high watermark taken when this is called, not to the
    last stable offset: after ``init_transactions()``, every position this mirror committed is below
    that mark, while another mirror's open transaction can hold the stable offset back below one."""
    partitions = partition_count(config, state_topic)
    if partitions is None:
        return {}
    consumer = confluent_kafka.Consumer(
        {
            **config,
            "group.id": "adiskq-mirror-state",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    found: dict[int, Position] = {}
    try:
        ends: dict[int, int] = {}
        assigned = []
        for p, (low, high) in enumerate(watermarks(config, state_topic, partitions, committed=False)):
            if high > low:
                ends[p] = high
                assigned.append(confluent_kafka.TopicPartition(state_topic, p, low))
        if not assigned:
            return {}
        consumer.assign(assigned)
        deadline = time.monotonic() + POSITIONS_DEADLINE
        while ends:
            if time.monotonic() > deadline:
                raise MirrorError(
                    f"reading the mirror's positions in Kafka topic {state_topic!r} did not reach its end in "
                    f"{POSITIONS_DEADLINE:.0f} s: an open transaction of another producer of that topic holds it "
                    "back (a mirror's ends within 40 s; another producer's within its transaction.timeout.ms); "
                    "run the mirror again, or give it a state topic of its own (--state-topic)"
                )
            for message in consumer.consume(1000, 0.2):
                error = message.error()
                if error is not None:
                    raise MirrorError(f"reading Kafka topic {state_topic!r}: {error.str()}")
                key = message.key()
                if key is not None and key.startswith(prefix):
                    _take_position(found, key[len(prefix) :], message.value())
            for tp in consumer.position([confluent_kafka.TopicPartition(state_topic, p) for p in list(ends)]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
    except confluent_kafka.KafkaException as error:
        raise _kafka_failure(f"cannot read the mirror's positions in Kafka topic {state_topic!r}", error) from None
    finally:
        consumer.close()
    return found


def _take_position(found: dict[int, Position], partition_text: bytes, value: bytes | None) -> None:
    if value is None or not partition_text.isdigit():
        return  # a tombstone, or a key of another shape: not a position
    try:
        stored: Any = json.loads(value)
        position = Position(
            int(stored["next"]), None if stored["crc"] is None else int(stored["crc"]), str(stored["partitioning"])
        )
    except (ValueError, KeyError, TypeError):
        raise MirrorError(f"a position record of the mirror is damaged: {value[:80]!r}") from None
    found[int(partition_text)] = position


def committed_records(config: Mapping[str, str], topic: str, partition: int, start: int, end: int, limit: int) -> int:
    """How many committed records ``partition`` of ``topic`` holds from ``start`` to ``end``: offsets
    count transaction markers and aborted records too. Past ``limit`` records read, ``end - start``."""
    if end <= start:
        return 0
    consumer = confluent_kafka.Consumer(
        {
            **config,
            "group.id": "adiskq-mirror-status",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    counted = 0
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + TIMEOUT
        while counted < limit and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                if error is not None:
                    if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        return counted
                    raise MirrorError(f"reading Kafka topic {topic!r}: {error.str()}")
                offset = message.offset()
                if offset is not None and offset >= end:
                    return counted
                counted += 1
    finally:
        consumer.close()
    return end - start
