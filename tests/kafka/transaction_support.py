"""Helpers of the transactional tests with confluent-kafka (librdkafka): topics, a transactional
producer, reading a partition to its end with one isolation level, and ListOffsets' answers for both.

Reading "to the end" waits for librdkafka's partition-EOF event, never on a timer: librdkafka
raises it once its fetch position reaches the end Fetch answered for the consumer's isolation level
(the last stable offset for ``read_committed``, the high watermark for ``read_uncommitted``), so a
read that ends there has seen everything the broker would give that consumer.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from differential import Side

COMMITTED = "read_committed"
UNCOMMITTED = "read_uncommitted"
DEADLINE = 60.0  # seconds any one wait of a scenario may take before it fails

# (topic, partition, offset, key, value): what a consumer sees of one record
Seen = tuple[str, int, int, bytes | None, bytes | None]


def create(side: Side, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with ``partitions`` and wait for the answer."""
    client = AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def transactional_producer(side: Side, transactional_id: str, **config: Any) -> Producer:
    """A producer of ``transactional_id`` whose ``init_transactions`` has returned."""
    producer = Producer(
        {"bootstrap.servers": side.bootstrap, "transactional.id": transactional_id, "linger.ms": 0, **config}
    )
    producer.init_transactions(DEADLINE)
    return producer


def produce_flushed(producer: Producer, topic: str, partition: int, values: list[bytes]) -> list[int]:
    """Produce ``values`` to one partition and wait for every delivery report; their offsets."""
    offsets: list[int] = []
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            failures.append(error)
        else:
            offsets.append(message.offset())

    for value in values:
        producer.produce(topic, value, key=b"k", partition=partition, on_delivery=delivered)
    assert producer.flush(DEADLINE) == 0, "records left undelivered"
    assert not failures, failures
    return offsets


def read_to_end(side: Side, partitions: list[tuple[str, int]], isolation: str) -> list[Seen]:
    """Every record a consumer of ``isolation`` is given from offset 0 of each partition, up to the
    end Fetch answers it (partition EOF on every partition)."""
    consumer = Consumer(
        {
            "bootstrap.servers": side.bootstrap,
            "group.id": side.name("reader"),  # assign() only: the group is never joined
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0) for topic, partition in partitions])
        seen: list[Seen] = []
        waiting = set(partitions)
        deadline = time.monotonic() + DEADLINE
        while waiting:
            assert time.monotonic() < deadline, f"no end of {sorted(waiting)} within {DEADLINE} s ({isolation})"
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                waiting.discard((message.topic(), message.partition()))
                continue
            seen.append((message.topic(), message.partition(), message.offset(), message.key(), message.value()))
        return sorted(seen)
    finally:
        consumer.close()


def end_offsets(
    side: Side, partitions: list[tuple[str, int]], client: AdminClient | None = None
) -> dict[str, list[int]]:
    """ListOffsets' latest offset of each partition for each isolation level: the last stable offset
    (``read_committed``) and the high watermark (``read_uncommitted``)."""
    client = client or AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
    answers: dict[str, list[int]] = {}
    for name, level in ((COMMITTED, IsolationLevel.READ_COMMITTED), (UNCOMMITTED, IsolationLevel.READ_UNCOMMITTED)):
        asked = {TopicPartition(topic, partition): OffsetSpec.latest() for topic, partition in partitions}
        futures = client.list_offsets(asked, isolation_level=level, request_timeout=30)
        answers[name] = [futures[tp].result(30).offset for tp in asked]
    return answers


def stable_offset_reaches(side: Side, topic: str, partition: int, offset: int) -> float:
    """Ask ListOffsets (read_committed) until the partition's last stable offset is ``offset``, each
    ask after the previous answer; the seconds it took (fails after DEADLINE)."""
    client = AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})
    started = time.monotonic()
    while True:
        stable = end_offsets(side, [(topic, partition)], client)[COMMITTED][0]
        if stable == offset:
            return time.monotonic() - started
        assert time.monotonic() - started < DEADLINE, f"the last stable offset stayed {stable}, not {offset}"


def failure(call: Any) -> dict[str, Any] | None:
    """Run ``call``; None if it returned, else what its KafkaError says (name, fatal, abortable)."""
    try:
        call()
    except KafkaException as raised:
        error = raised.args[0]
        return {"error": error.name(), "fatal": error.fatal(), "abortable": error.txn_requires_abort()}
    return None
