"""confluent-kafka (librdkafka) producing to and consuming from the gateway."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from concurrent.futures import Future

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka_support import consume, produce_all

from adiskq import read, stats


def test_produce_and_consume_keys_values_headers(gateway, topic: str) -> None:
    """Records written by librdkafka come back byte for byte: keys, values, headers, timestamps."""
    records = [
        (b"k1", b"v1", [("a", b"1"), ("b", b"2")], 1_700_000_000_123),
        (None, b"no key", [], 1_700_000_000_124),
        (b"", b"empty key", [("z", b""), ("a", b"x")], 1_700_000_000_125),
        (b"k4", None, [], 1_700_000_000_126),
    ]
    produce_all(gateway.bootstrap, topic, records)
    got = consume(gateway.bootstrap, topic, 0, len(records))
    assert [(m.key(), m.value(), m.headers() or [], m.timestamp()[1]) for m in got] == records
    assert [m.offset() for m in got] == [0, 1, 2, 3]


def test_library_reads_what_kafka_wrote(gateway, topic: str) -> None:
    """A Kafka record is an adiskq message: same offset, value, key, headers, and ms as ns."""
    produce_all(gateway.bootstrap, topic, [(b"key", b"value", [("h", b"1")], 1_700_000_000_999)])
    message = read(gateway.path(topic), 0, 0)
    assert (message.key, message.value, dict(message.headers)) == (b"key", b"value", {"h": b"1"})
    assert message.timestamp_ns == 1_700_000_000_999 * 1_000_000


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(gateway, topic: str, codec: str) -> None:
    """Batches compressed with each codec librdkafka offers are stored and served uncompressed."""
    records = [(b"k%d" % i, b"value %d " % i * 20, [], 1_700_000_000_000 + i) for i in range(50)]
    produce_all(gateway.bootstrap, topic, records, **{"compression.type": codec, "linger.ms": 50})
    got = consume(gateway.bootstrap, topic, 0, len(records))
    assert [(m.key(), m.value()) for m in got] == [(k, v) for k, v, _, _ in records]
    assert stats(gateway.path(topic)).message_count == 50


def test_idempotent_producer(gateway, topic: str) -> None:
    """An idempotent librdkafka producer (InitProducerId, sequence numbers) writes each record once."""
    records = [(b"k", b"%d" % i, [], 1_700_000_000_000 + i) for i in range(200)]
    produce_all(gateway.bootstrap, topic, records, **{"enable.idempotence": True, "linger.ms": 5})
    got = consume(gateway.bootstrap, topic, 0, len(records))
    assert [m.value() for m in got] == [v for _, v, _, _ in records]
    assert stats(gateway.path(topic)).message_count == 200


def test_watermarks_and_offsets_for_times(gateway, topic: str) -> None:
    """ListOffsets: earliest, latest, and the first offset at or after a time (the time index)."""
    records = [(b"k", b"v%d" % i, [], 1_700_000_000_000 + 1000 * i) for i in range(5)]
    produce_all(gateway.bootstrap, topic, records)
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "watermarks"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 5)
        found = consumer.offsets_for_times([TopicPartition(topic, 0, 1_700_000_002_500)], timeout=10)
        assert found[0].offset == 3
        beyond = consumer.offsets_for_times([TopicPartition(topic, 0, 1_800_000_000_000)], timeout=10)
        assert beyond[0].offset == -1
    finally:
        consumer.close()


def test_admin_create_partitions_configs_delete(gateway, topic: str) -> None:
    """AdminClient: create a topic with 3 partitions, grow it to 5, describe it, delete it."""
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    again = admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic]
    assert failure_code(again) == KafkaError.TOPIC_ALREADY_EXISTS
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert len(stats(gateway.path(topic)).partitions) == 5
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    described = next(iter(configs.values())).result(10)
    assert described["cleanup.policy"].value == "delete"
    assert int(described["segment.bytes"].value) > 0
    admin.delete_topics([topic])[topic].result(10)  # answered once the stream folder is gone
    assert topic not in admin.list_topics(timeout=10).topics


def test_admin_refuses_replication_and_bad_names(gateway) -> None:
    """A replication factor above 1 and an illegal topic name are refused with Kafka's error codes."""
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    futures = admin.create_topics(
        [NewTopic("replicated", num_partitions=1, replication_factor=3), NewTopic("..", num_partitions=1)]
    )
    assert failure_code(futures["replicated"]) == KafkaError.INVALID_REPLICATION_FACTOR
    assert failure_code(futures[".."]) == KafkaError.TOPIC_EXCEPTION


def failure_code(future: Future[object]) -> int:
    """The Kafka error code an admin call's future failed with.

    Taken with ``exception()``, not by raising it (``result()``, ``pytest.raises``): a raised
    exception's traceback holds the future that holds the exception, a reference cycle that keeps
    the AdminClient alive after the test until the cyclic GC runs, reconnecting all the while (and
    logging "Connection refused") long after its gateway stopped. AdminClient has no close(): it is
    let go of when its last reference goes, at the end of the test."""
    error = future.exception(10)
    assert isinstance(error, KafkaException), f"the call did not fail with a KafkaException: {error!r}"
    code: int = error.args[0].code()
    return code


def test_fetch_max_bytes_lets_only_the_first_batch_exceed_it(gateway, topic: str) -> None:
    """A consumer whose fetch.max.bytes holds one of its messages but not two reads them all: only the
    response's first batch may exceed the limit (KIP-74), and librdkafka drops a response larger than
    receive.message.max.bytes (fetch.max.bytes + 512)."""
    value = b"x" * (900 * 1024)
    records = [(b"k%d" % i, value, [], 1_700_000_000_000 + i) for i in range(3)]
    produce_all(gateway.bootstrap, topic, records, **{"message.max.bytes": 2_000_000})
    got = consume(
        gateway.bootstrap,
        topic,
        0,
        len(records),
        **{
            "fetch.max.bytes": 1_000_000,
            "receive.message.max.bytes": 1_000_512,
            "max.partition.fetch.bytes": 20_000_000,
        },
    )
    assert [(m.key(), len(m.value())) for m in got] == [(k, len(value)) for k, _, _, _ in records]


def test_timestamps_past_2262_are_refused_with_invalid_timestamp(gateway, topic: str) -> None:
    """Every int64 timestamp is stored or refused at once with INVALID_TIMESTAMP (not retried until
    message.timeout.ms): the latest that fits 64 bits of nanoseconds round-trips, a later one is refused."""
    latest = (2**63 - 1) // 1_000_000
    reports: dict[int, KafkaError | None] = {}
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "message.timeout.ms": 60_000})
    for timestamp in (latest, latest + 1, 2**62, 2**63 - 1):
        producer.produce(
            topic,
            b"%d" % timestamp,
            partition=0,
            timestamp=timestamp,
            on_delivery=lambda error, _message, timestamp=timestamp: reports.__setitem__(timestamp, error),
        )
        assert producer.flush(20) == 0, f"timestamp {timestamp}: no answer within 20 s (retried?)"
    assert reports[latest] is None
    for timestamp in (latest + 1, 2**62, 2**63 - 1):
        error = reports[timestamp]
        assert error is not None, timestamp
        assert error.code() == KafkaError.INVALID_TIMESTAMP, (timestamp, error)
    (stored,) = consume(gateway.bootstrap, topic, 0, 1)
    assert (stored.value(), stored.timestamp()[1]) == (b"%d" % latest, latest)


def test_error_messages_name_no_server_path(gateway, topic: str) -> None:
    """An error a client reads names the topic, never the server's folders: a folder under the root
    that is not a stream is refused by CreateTopics, CreatePartitions and DescribeConfigs by its name."""
    folder = pathlib.Path(gateway.path(topic))
    folder.mkdir()
    (folder / "notes.txt").write_text("not a stream")
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    answers = [
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic],
        admin.create_partitions([NewPartitions(topic, 3)])[topic],
        *admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values(),
    ]
    for answer in answers:
        with pytest.raises(KafkaException) as refused:
            answer.result(10)
        message = refused.value.args[0].str()
        assert topic in message, message
        assert str(gateway.root) not in message, message
        assert os.path.realpath(gateway.root) not in message, message


def test_a_kafka_commit_past_the_end_is_a_note_of_check_not_damage(gateway, topic: str) -> None:
    """A Kafka consumer may commit an offset past the partition's end (Kafka stores it): `adiskq check`
    notes it with the command that moves it, and calls the stream sound (exit status 0)."""
    produce_all(gateway.bootstrap, topic, [(b"k", b"v", [], 1_700_000_000_000 + i) for i in range(3)])
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": topic})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1000)], asynchronous=False)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 1000
    finally:
        consumer.close()
    checked = subprocess.run(
        [sys.executable, "-m", "adiskq", "check", gateway.path(topic)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"group '{topic}' committed offset 1000 of partition 0, past its end (next offset 3)" in checked.stdout
    assert "Not damage" in checked.stdout
    assert "backup" not in checked.stdout
