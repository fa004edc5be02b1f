"""Helpers of the Kafka gateway's tests: produce with confluent-kafka and wait for every ack, consume."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

Headers = list[tuple[str, bytes | None]]


def produce_all(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, Headers, int]], **config: Any
) -> list[Message]:
    """Produce (key, value, headers, timestamp_ms) records to partition 0; every delivery report."""
    reports: list[Message] = []
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
        reports.append(message)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **config})
    for key, value, headers, timestamp_ms in records:
        producer.produce(
            topic, value, key, partition=0, headers=headers or None, timestamp=timestamp_ms, on_delivery=delivered
        )
    assert producer.flush(30) == 0, "records left undelivered"
    assert not failures, failures
    return reports


def consume(bootstrap: str, topic: str, partition: int, count: int, *, start: int = 0, **config: Any) -> list[Message]:
    """``count`` messages from an offset of one partition (assign, no group), within 30 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test", "enable.auto.commit": False, **config})
    consumer.assign([TopicPartition(topic, partition, start)])
    got: list[Message] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message)
    finally:
        consumer.close()
    assert len(got) == count, f"{len(got)} of {count} messages"
    return got
