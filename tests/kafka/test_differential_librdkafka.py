"""librdkafka (confluent-kafka and kcat) sees the gateway as it sees Apache Kafka: the same scenario
runs against both (differential.py) and what the client observed must be equal — offsets,
timestamps, keys, nulls, headers, metadata, ListOffsets answers, admin answers and error codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from differential import Differential, Side
from kafka_support import consume, produce_all

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]

RECORDS: list[Record] = [
    (b"k1", b"v1", [("a", b"1"), ("b", b"2")], 1_700_000_000_123),
    (None, b"no key", [], 1_700_000_000_124),
    (b"", b"empty key", [("z", b""), ("a", b"x")], 1_700_000_000_125),
    (b"k4", None, [], 1_700_000_000_126),
    (b"k5", b"", [], 1_700_000_000_127),
    (None, None, [], 1_600_000_000_000),  # older than the one before: Kafka keeps what it is given
]


def admin(side: Side) -> AdminClient:
    """An AdminClient of ``side``."""
    return AdminClient({"bootstrap.servers": side.bootstrap, "log_level": 0})


def create(side: Side, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` with ``partitions`` and wait for the answer."""
    client = admin(side)  # kept while the answer is awaited: a client let go of cancels its requests
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def failure_code(future: Future[Any]) -> int | None:
    """The Kafka error code an admin call's future failed with, or None if it succeeded (read with
    ``exception()``: a raised one would keep the AdminClient alive through its traceback)."""
    error = future.exception(30)
    if error is None:
        return None
    assert isinstance(error, KafkaException), f"not a KafkaException: {error!r}"
    code: int = error.args[0].code()
    return code


def settled_partitions(client: AdminClient, topic: str, expected: int) -> int:
    """The partitions metadata lists for ``topic``, once it lists ``expected`` or after 30 s: Kafka's
    brokers learn of new partitions shortly after CreatePartitions is answered. Each try is a
    metadata request, answered before the next is sent."""
    deadline = time.monotonic() + 30
    while True:
        count = len(client.list_topics(topic, timeout=30).topics[topic].partitions)
        if count == expected or time.monotonic() > deadline:
            return count


def seen(messages: list[Any]) -> list[tuple[Any, ...]]:
    """What a consumer sees of each message: offset, key, value, headers, timestamp type and value."""
    return [(m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()) for m in messages]


def test_records_come_back_as_written(differential: Differential) -> None:
    """Keys, values, null and empty keys and values, headers in order and producer timestamps (one
    older than the record before it) come back alike, at offsets 0..5, with CreateTime."""

    def scenario(side: Side) -> list[tuple[Any, ...]]:
        topic = side.name()
        create(side, topic)
        reports = produce_all(side.bootstrap, topic, RECORDS)
        return [(r.offset(), r.timestamp()) for r in reports] + seen(consume(side.bootstrap, topic, 0, len(RECORDS)))

    differential.compare(scenario)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_read_back_alike(differential: Differential, codec: str) -> None:
    """A batch compressed with each codec is read back with the same offsets, keys and values."""

    def scenario(side: Side) -> list[tuple[Any, ...]]:
        topic = side.name()
        create(side, topic)
        records: list[Record] = [(b"k%d" % i, b"value %d " % i * 20, [], 1_700_000_000_000 + i) for i in range(40)]
        produce_all(side.bootstrap, topic, records, **{"compression.type": codec, "linger.ms": 50})
        return seen(consume(side.bootstrap, topic, 0, len(records)))

    differential.compare(scenario)


def test_null_header_values_and_repeated_names(differential: Differential) -> None:
    """A header with a null value, and a header name given twice, are kept in order as Kafka keeps them."""

    def scenario(side: Side) -> list[tuple[Any, ...]]:
        topic = side.name()
        create(side, topic)
        records: list[Record] = [(b"k", b"v", [("a", None), ("a", b"1"), ("b", b"2"), ("a", b"3")], 1_700_000_000_000)]
        produce_all(side.bootstrap, topic, records, retries=0)
        return seen(consume(side.bootstrap, topic, 0, 1))

    differential.compare(scenario)


def test_metadata_of_a_topic(differential: Differential) -> None:
    """Metadata: one broker (id 0), the topic's partitions, each led by broker 0 with replicas and
    in-sync replicas [0]; a topic that does not exist is absent after a request that does not create it."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic, partitions=3)
        metadata = admin(side).list_topics(topic, timeout=30)
        described = metadata.topics[topic]
        missing = admin(side).list_topics(timeout=30).topics.get(side.name("never-made"))
        return {
            "brokers": sorted(metadata.brokers),
            "error": described.error,
            "partitions": {
                p.id: (p.leader, list(p.replicas), list(p.isrs), p.error) for p in described.partitions.values()
            },
            "missing": missing,
        }

    differential.compare(scenario)


def test_list_offsets_answers(differential: Differential) -> None:
    """ListOffsets: the watermarks of an empty and a written partition, the first offset at or after
    a time (before the first record, between two, exactly at one, after the last), and the largest."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic, partitions=2)
        records: list[Record] = [(b"k", b"v%d" % i, [], 1_700_000_000_000 + 1000 * i) for i in range(5)]
        produce_all(side.bootstrap, topic, records)
        consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": side.name("g"), "log_level": 0})
        try:
            times = [1_600_000_000_000, 1_700_000_002_500, 1_700_000_003_000, 1_800_000_000_000]
            # one request each: a request names each partition once
            answers = [consumer.offsets_for_times([TopicPartition(topic, 0, t)], timeout=30)[0].offset for t in times]
            return {
                "written": consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30),
                "empty": consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=30),
                "for_times": answers,
                "empty_for_time": consumer.offsets_for_times([TopicPartition(topic, 1, 0)], timeout=30)[0].offset,
            }
        finally:
            consumer.close()

    differential.compare(scenario)


def test_admin_answers_and_error_codes(differential: Differential) -> None:
    """CreateTopics, CreatePartitions and DeleteTopics answer alike, errors included: a topic that
    exists, a replication factor above the brokers, an illegal name, zero partitions, shrinking,
    deleting a topic that does not exist."""

    def scenario(side: Side) -> dict[str, Any]:
        client = admin(side)
        topic = side.name()
        created = client.create_topics(
            [
                NewTopic(topic, 2, 1),
                NewTopic(side.name("replicated"), 1, 3),
                NewTopic("..", 1, 1),
                NewTopic(side.name("none"), 0, 1),
            ]
        )
        answers = {name.replace(side.prefix, ""): failure_code(future) for name, future in created.items()}
        answers["again"] = failure_code(client.create_topics([NewTopic(topic, 2, 1)])[topic])
        answers["grow"] = failure_code(client.create_partitions([NewPartitions(topic, 4)])[topic])
        answers["shrink"] = failure_code(client.create_partitions([NewPartitions(topic, 1)])[topic])
        answers["partitions"] = settled_partitions(client, topic, 4)
        missing = side.name("missing")
        answers["delete missing"] = failure_code(client.delete_topics([missing])[missing])
        answers["delete"] = failure_code(client.delete_topics([topic])[topic])
        return answers

    differential.compare(scenario)


def test_describe_configs_of_a_topic(differential: Differential) -> None:
    """DescribeConfigs of a topic answers the settings both have with Kafka's defaults."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        client = admin(side)
        described = next(iter(client.describe_configs([resource]).values())).result(30)
        return {name: described[name].value for name in ("cleanup.policy",) if name in described}

    differential.compare(scenario)


def test_create_topic_with_configs(differential: Differential) -> None:
    """A topic created with retention.ms and max.message.bytes describes them back."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        config = {"retention.ms": "3600000", "max.message.bytes": "65536"}
        client = admin(side)
        client.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        described = next(iter(client.describe_configs([resource]).values())).result(30)
        return {name: described[name].value for name in config}

    differential.compare(scenario)


def test_idempotent_producer_offsets(differential: Differential) -> None:
    """An idempotent producer's 300 records, in batches of several, are acknowledged at offsets
    0..299 and read back once each, in order."""

    def scenario(side: Side) -> tuple[list[int], list[bytes]]:
        topic = side.name()
        create(side, topic)
        records: list[Record] = [(b"k", b"%d" % i, [], 1_700_000_000_000 + i) for i in range(300)]
        reports = produce_all(side.bootstrap, topic, records, **{"enable.idempotence": True, "linger.ms": 5})
        return [r.offset() for r in reports], [m.value() for m in consume(side.bootstrap, topic, 0, 300)]

    differential.compare(scenario)


def test_committed_offsets_with_metadata(differential: Differential) -> None:
    """A consumer commits offsets with metadata on two partitions; committed() returns the offsets
    and metadata; a partition never committed answers -1001 (no offset)."""

    def scenario(side: Side) -> list[tuple[Any, ...]]:
        topic = side.name()
        create(side, topic, partitions=3)
        settings = {"bootstrap.servers": side.bootstrap, "group.id": side.name("g"), "log_level": 0}
        consumer = Consumer({**settings, "enable.auto.commit": False})
        try:
            offsets = [TopicPartition(topic, 0, 5, metadata="first"), TopicPartition(topic, 1, 0, metadata="")]
            consumer.commit(offsets=offsets, asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
            return [(c.partition, c.offset, c.metadata, c.error) for c in committed]
        finally:
            consumer.close()

    differential.compare(scenario)


def test_committed_leader_epoch(differential: Differential) -> None:
    """A commit's leader epoch is kept: committed() returns the epoch the consumer committed with
    (a consumer commits the epoch of the record it read)."""

    def scenario(side: Side) -> tuple[int, int | None]:
        topic = side.name()
        create(side, topic)
        produce_all(side.bootstrap, topic, [(b"k", b"v", [], 1_700_000_000_000)])
        settings = {"bootstrap.servers": side.bootstrap, "group.id": side.name("g"), "log_level": 0}
        consumer = Consumer({**settings, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            message = None
            while message is None:
                message = consumer.poll(30)
            assert message.error() is None, message.error()
            consumer.commit(message=message, asynchronous=False)
            (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
            return committed.offset, committed.leader_epoch
        finally:
            consumer.close()

    differential.compare(scenario)


KCAT = shutil.which("kcat")


def kcat(side: Side, *args: str, stdin: bytes = b"") -> bytes:
    """Run kcat against ``side``; its stdout."""
    assert KCAT is not None, "kcat is not installed: apt-get install kcat (scripts/test does it)"
    done = subprocess.run([KCAT, "-b", side.bootstrap, *args], input=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def test_kcat_produce_and_consume(differential: Differential) -> None:
    """kcat writes keyed lines with a header and reads them back with offsets, keys, values,
    headers and the key and value lengths (-1 for null)."""

    def scenario(side: Side) -> list[str]:
        topic = side.name()
        create(side, topic)
        kcat(side, "-P", "-t", topic, "-K", ":", "-H", "h=1", stdin=b"a:1\nb:2\n:3\nc:\n")
        form = "%o|%k|%s|%h|%K|%S\\n"
        return kcat(side, "-C", "-t", topic, "-e", "-o", "beginning", "-f", form).decode().splitlines()

    differential.compare(scenario)


def test_kcat_metadata(differential: Differential) -> None:
    """``kcat -L -J`` for a topic of two partitions: the same topics, partitions, leaders, replicas
    and in-sync replicas (the broker's address aside)."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic, partitions=2)
        metadata = json.loads(kcat(side, "-L", "-J", "-t", topic))
        (described,) = metadata["topics"]
        return {
            "brokers": [broker["id"] for broker in metadata["brokers"]],
            "topic": described["topic"] == topic,
            "partitions": described["partitions"],
        }

    differential.compare(scenario)


def test_fetch_max_bytes(differential: Differential) -> None:
    """A consumer whose fetch.max.bytes (1 MB) is below two records (900 KiB each) and whose
    receive.message.max.bytes is fetch.max.bytes + 512 (librdkafka's rule) reads them one by one:
    only a response's first batch may exceed max_bytes (KIP-74)."""

    def scenario(side: Side) -> list[int]:
        topic = side.name()
        create(side, topic)
        records: list[Record] = [(b"k", b"x" * 900 * 1024, [], 1_700_000_000_000 + i) for i in range(3)]
        produce_all(side.bootstrap, topic, records, **{"message.max.bytes": 2_000_000})
        settings = {
            "fetch.max.bytes": 1_000_000,
            "receive.message.max.bytes": 1_000_512,
            "max.partition.fetch.bytes": 20_000_000,
        }
        group = {"bootstrap.servers": side.bootstrap, "group.id": side.name("g"), "log_level": 0}
        consumer = Consumer({**group, **settings})
        consumer.assign([TopicPartition(topic, 0, 0)])
        offsets: list[int] = []
        deadline = time.monotonic() + 15  # Kafka's answer takes well under a second
        try:
            while len(offsets) < 3 and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                # Error events are librdkafka's reports of what it retries (a response too large
                # for receive.message.max.bytes among them): what counts is what it delivers.
                if message is not None and message.error() is None:
                    offsets.append(message.offset())
        finally:
            consumer.close()
        return offsets

    differential.compare(scenario)


def test_a_topic_made_again_keeps_its_id_on_the_gateway_only(differential: Differential) -> None:
    """A difference on purpose (README, "Differences from a Kafka cluster"): the gateway derives a
    topic's id from its name, so a topic deleted and created again has the id it had; Kafka gives
    it a new one. Everything else about the topic is the same on both."""

    def scenario(side: Side) -> dict[str, Any]:
        from confluent_kafka import TopicCollection

        client = admin(side)
        topic = side.name()

        def described() -> Any:
            """The topic's description, once the broker knows it (Kafka's brokers learn of a new
            topic a moment after CreateTopics is answered); each try is a request."""
            deadline = time.monotonic() + 30
            while True:
                future = client.describe_topics(TopicCollection([topic]))[topic]
                if (error := failure_code(future)) is None:
                    return future.result()
                assert time.monotonic() < deadline, f"{topic} not described within 30 s: error {error}"

        create(side, topic)
        first = described()
        client.delete_topics([topic])[topic].result(30)
        deadline = time.monotonic() + 30  # Kafka forgets a deleted topic a moment after answering
        while failure_code(client.create_topics([NewTopic(topic, 1, 1)])[topic]) is not None:
            assert time.monotonic() < deadline, f"{topic} could not be made again within 30 s"
        second = described()
        return {"same id": str(first.topic_id) == str(second.topic_id), "partitions": len(second.partitions)}

    seen_in_gateway, seen_in_kafka = differential.run(scenario)
    assert seen_in_gateway == {"same id": True, "partitions": 1}
    assert seen_in_kafka == {"same id": False, "partitions": 1}


def test_delete_records_and_groups(differential: Differential) -> None:
    """DeleteRecords moves a partition's start (the low watermark) and DeleteGroups removes a group
    that only has committed offsets."""

    def scenario(side: Side) -> dict[str, Any]:
        topic, group = side.name(), side.name("g")
        create(side, topic)
        produce_all(side.bootstrap, topic, [(b"k", b"%d" % i, [], 1_700_000_000_000 + i) for i in range(5)])
        client = admin(side)
        deleted = client.delete_records([TopicPartition(topic, 0, 2)])
        consumer = Consumer({"bootstrap.servers": side.bootstrap, "group.id": group, "log_level": 0})
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
            watermarks = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        finally:
            consumer.close()
        groups = client.delete_consumer_groups([group])
        return {
            "delete records": failure_code(next(iter(deleted.values()))),
            "watermarks": watermarks,
            "delete group": failure_code(groups[group]),
        }

    differential.compare(scenario)
