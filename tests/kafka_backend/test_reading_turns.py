"""A Kafka reader's partitions take turns among the records it has fetched: librdkafka queues a
fetch's records partition after partition, and a batch is one partition's run, the next batch the
next partition's. (When a partition's records arrive is up to the brokers' fetches, so the reads
here hand the reader what a fetch brought, without a broker.)"""

from __future__ import annotations

import pytest

from adiskq._errors import DeserializationError
from adiskq._sansio.values import Message
from adiskq.kafka._cluster_reader import KafkaReading


def fetched(partition: int, count: int) -> list[Message[bytes, bytes]]:
    return [Message(partition, offset, 0, b"", b"%d-%d" % (partition, offset), {}) for offset in range(count)]


def test_a_busy_partition_fetched_first_does_not_hold_back_the_next() -> None:
    """2,000 records of partition 0 queued before partition 2's 10 and partition 1's 5: the
    batches go 0, 1, 2, then back to 0, each partition's in offset order."""
    reading = KafkaReading("kafka://127.0.0.1:9/orders", None, None, None)
    first = reading.deliver(fetched(0, 2000) + fetched(2, 10) + fetched(1, 5), 100)
    batches = [first] + [reading.deliver([], 100) for _ in range(3)]
    assert [(b[0].partition, len(b)) for b in batches] == [(0, 100), (1, 5), (2, 10), (0, 100)]
    assert [m.offset for m in batches[3]] == list(range(100, 200))
    assert reading.next_offsets(0) == {0: 200, 1: 5, 2: 10}


def test_a_message_a_deserializer_fails_on_stays_next_whatever_the_turn() -> None:
    """The failed message is the next one handed out, not the next partition's run."""

    def decode(value: bytes) -> str:
        if value == b"0-3":
            raise ValueError("bad")
        return value.decode()

    reading = KafkaReading("kafka://127.0.0.1:9/orders", None, None, decode)
    assert [m.value for m in reading.deliver(fetched(0, 5) + fetched(1, 2), 100)] == ["0-0", "0-1", "0-2"]
    with pytest.raises(DeserializationError) as failed:
        reading.deliver([], 100)
    assert (failed.value.partition, failed.value.offset) == (0, 3)
    with pytest.raises(DeserializationError):
        reading.deliver([], 100)
