"""What the mirror's tests share: fresh topic names, and a topic read as its read-committed readers see it."""

from __future__ import annotations

import time
import uuid
from typing import NamedTuple

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

READ_DEADLINE = 120.0  # seconds a test waits for a topic's records before it fails


class KafkaRecord(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int


def new_topic_name(prefix: str = "mirror") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(60)
    deadline = time.monotonic() + 60
    while True:
        found = admin.list_topics(timeout=30).topics.get(topic)
        if found is not None and len(found.partitions) == partitions:
            return
        assert time.monotonic() < deadline, f"topic {topic} never showed"
        time.sleep(0.05)


def read_topic(bootstrap: str, topic: str, *, read_committed: bool = True) -> list[KafkaRecord]:
    """Every record of ``topic`` a reader with ``isolation.level=read_committed`` gets, by partition
    and offset: read up to the high watermark (a committed transaction's markers may reach the
    partitions a moment after its commit returns, and a read-committed reader's end waits for them)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(timeout=30).topics[topic].partitions)
    config = {"bootstrap.servers": bootstrap, "enable.auto.commit": False}
    probe = confluent_kafka.Consumer({**config, "group.id": "probe", "isolation.level": "read_uncommitted"})
    try:
        ends = {
            p: probe.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        probe.close()
    consumer = confluent_kafka.Consumer(
        {
            **config,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
    )
    records: list[KafkaRecord] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + READ_DEADLINE
        while ends:
            assert time.monotonic() < deadline, f"reading {topic}: partitions {sorted(ends)} did not reach their end"
            for message in consumer.consume(10_000, 0.5):
                assert message.error() is None, message.error()
                records.append(
                    KafkaRecord(
                        message.partition(),  # type: ignore[arg-type]
                        message.offset(),  # type: ignore[arg-type]
                        message.key(),
                        message.value(),
                        list(message.headers() or ()),  # type: ignore[arg-type]
                        message.timestamp()[1],
                    )
                )
            for tp in consumer.position([confluent_kafka.TopicPartition(topic, p) for p in list(ends)]):
                if tp.offset >= ends[tp.partition] or ends[tp.partition] == 0:
                    del ends[tp.partition]
    finally:
        consumer.close()
    return sorted(records, key=lambda record: (record.partition, record.offset))


def wait_for_records(bootstrap: str, topic: str, count: int) -> list[KafkaRecord]:
    """The first ``count`` records of ``topic`` (one partition) for a read-committed reader, waiting
    for them (librdkafka's long poll) at most ``READ_DEADLINE`` seconds."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"waiter-{uuid.uuid4().hex}", "isolation.level": "read_committed"}
    )
    records: list[KafkaRecord] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.monotonic() + READ_DEADLINE
        while len(records) < count:
            assert time.monotonic() < deadline, f"{topic}: {len(records)} of {count} records came"
            for message in consumer.consume(count - len(records), 1.0):
                assert message.error() is None, message.error()
                records.append(KafkaRecord(0, message.offset(), message.key(), message.value(), [], 0))  # type: ignore[arg-type]
    finally:
        consumer.close()
    return records


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    *,
    transactional: bool = False,
) -> None:
    """(partition, key, value, headers, timestamp ms) records, produced by librdkafka (one transaction when asked)."""
    config: dict[str, object] = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    if transactional:
        config["transactional.id"] = f"test-{uuid.uuid4().hex}"
    producer = confluent_kafka.Producer(config)
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
    for partition, key, value, headers, timestamp_ms in records:
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=headers, timestamp=timestamp_ms)
                break
            except BufferError:
                producer.poll(0.05)
    if transactional:
        producer.commit_transaction(60)
    assert producer.flush(60) == 0
