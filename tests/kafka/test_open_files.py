"""The gateway within its open-files limit: the soft limit raised to the hard one at start, one topic
of more partitions than the limit holds created, written and read (its idle partitions' files
closed to make room), a shared topic too large for the limit refused whole with Kafka's
POLICY_VIOLATION, and thousands of partitions of many topics written and read at a low
``ulimit -n`` (the gateway a subprocess with its own limit), idle topics' and partitions' files
closed to make room."""

from __future__ import annotations

import os
import pathlib
import resource
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from gateway_process import GatewayProcess
from support.kafka_broker import KafkaBroker

from adiskq.kafka._open_files import STREAM_FILES, WRITE_FILES_PER_PARTITION, FileBudget, topic_files

LOW_LIMIT = 1024  # the default soft `ulimit -n` of most systems, here the hard limit too
TOPICS = 100
PARTITIONS_EACH = 25  # 2,500 partitions: about 12,500 files if all were open at once


def _hard_limit_at_least(files: int) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < files:
        pytest.fail(f"the hard open-files limit is {hard}; this test needs {files}: raise it (ulimit -Hn)")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_soft_limit_is_raised_to_the_hard_one(tmp_path: pathlib.Path, backend: str) -> None:
    _hard_limit_at_least(2048)
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend, nofile=(256, 2048)) as gateway:
        assert gateway.open_files_limits() == (2048, 2048)


def _produce_each(bootstrap: str, topic: str, partitions: list[int], label: str) -> None:
    """One message a partition, in the order given, each ``topic/partition/label``; all acknowledged."""
    failures: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "message.timeout.ms": 120_000})
    for partition in partitions:
        producer.produce(
            topic,
            f"{topic}/{partition}/{label}".encode(),
            partition=partition,
            on_delivery=lambda error, _message: failures.append(error) if error else None,
        )
    assert producer.flush(180) == 0
    assert not failures, failures[:3]


def _fetch_all(
    gateway: GatewayProcess, topic: str, partitions: int, expected: int
) -> tuple[dict[int, list[bytes]], int]:
    """Every message of the topic's partitions, by partition in offset order, and the gateway's
    peak of open descriptors while it served them."""
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(partitions)])
    seen: dict[int, list[bytes]] = {}
    count, peak = 0, gateway.open_descriptors()
    deadline = time.monotonic() + 180
    try:
        while count < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            partition, value = message.partition(), message.value()
            assert partition is not None
            assert value is not None
            seen.setdefault(partition, []).append(value)
            assert message.offset() == len(seen[partition]) - 1
            count += 1
            peak = max(peak, gateway.open_descriptors())
    finally:
        consumer.close()
    return seen, peak


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_one_topic_of_more_partitions_than_the_limit_holds_is_created_written_and_fetched(
    tmp_path: pathlib.Path, backend: str
) -> None:
    """1,200 partitions of one topic at `ulimit -n` 1024 (about 6,000 files if all were open): the
    topic is created whole, every partition written (each written partition's files closed later
    for the next), every tenth written again in the reverse order (parked ones reopened), every
    message fetched, the topic grown to 1,300, and after a clean stop the gateway serves them all
    again from its files."""
    root = tmp_path / "root"
    root.mkdir()
    topic, partitions = "wide", 1_200
    order = list(range(partitions))
    with GatewayProcess(root, backend, nofile=LOW_LIMIT) as gateway:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(180)
        assert len(admin.list_topics(timeout=10).topics[topic].partitions) == partitions
        _produce_each(gateway.bootstrap, topic, order, "first")
        peak = gateway.open_descriptors()
        again = order[::-10]  # every tenth, the partitions parked longest ago first
        _produce_each(gateway.bootstrap, topic, again, "second")
        peak = max(peak, gateway.open_descriptors())
        seen, fetch_peak = _fetch_all(gateway, topic, partitions, partitions + len(again))
        assert seen == {
            p: [f"{topic}/{p}/first".encode(), *([f"{topic}/{p}/second".encode()] if p in again else [])] for p in order
        }
        admin.create_partitions([NewPartitions(topic, partitions + 100)])[topic].result(180)
        _produce_each(gateway.bootstrap, topic, list(range(partitions, partitions + 100)), "grown")
        gateway.check_alive()
        log = gateway.log()
        assert "Too many open files" not in log
        assert max(peak, fetch_peak) < LOW_LIMIT
    with GatewayProcess(root, backend, nofile=LOW_LIMIT) as gateway:
        seen, _peak = _fetch_all(gateway, topic, partitions + 100, partitions + len(again) + 100)
        assert [len(seen.get(p, [])) for p in order] == [2 if p in again else 1 for p in order]
        assert seen[partitions + 99] == [f"{topic}/{partitions + 99}/grown".encode()]
        assert "Too many open files" not in gateway.log()


def test_a_shared_topic_larger_than_the_limit_allows_is_refused_whole(tmp_path: pathlib.Path) -> None:
    """A gateway that writes as a shared producer (``--shared``) keeps every partition of a topic
    open while it writes it: 300 partitions at `ulimit -n` 1024 are refused with POLICY_VIOLATION
    before anything is made, so no half-made topic is left for Metadata to serve; a topic that fits
    is created and grows only as far as the limit allows."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, "asyncio", nofile=LOW_LIMIT, shared=True) as gateway:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("huge", 300, 1)])["huge"].result(30)
        error = refused.value.args[0]
        assert error.code() == KafkaError.POLICY_VIOLATION
        assert "300 partitions" in error.str()
        assert "ulimit" in error.str()
        assert "--shared" in error.str()
        assert os.listdir(root) == []
        assert "huge" not in admin.list_topics(timeout=10).topics

        admin.create_topics([NewTopic("fits", 20, 1)])["fits"].result(30)
        with pytest.raises(KafkaException) as refused:
            admin.create_partitions([NewPartitions("fits", 300)])["fits"].result(30)
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
        assert len(admin.list_topics(timeout=10).topics["fits"].partitions) == 20
        gateway.check_alive()
        assert "Too many open files" not in gateway.log()


def test_kafka_answers_policy_violation_for_more_partitions_than_it_creates(kafka_broker: KafkaBroker) -> None:
    """The gateway's answer is Kafka's own for a creation past what it takes at once (a KRaft
    controller creates at most 10,000 partitions a request): not retriable, refused whole."""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("too-many-partitions", 10_001, 1)])["too-many-partitions"].result(60)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    assert "too-many-partitions" not in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("clients", [1, pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_thousands_of_partitions_are_written_and_read_at_a_low_open_files_limit(
    tmp_path: pathlib.Path, backend: str, clients: int
) -> None:
    """2,500 partitions (100 topics of 25) at `ulimit -n` 1024: each gets a message and every
    message is fetched, the gateway closing idle topics' and partitions' files as it goes and never
    running out of descriptors."""
    root = tmp_path / "root"
    root.mkdir()
    names = [f"many-{i:03d}" for i in range(TOPICS)]
    with GatewayProcess(root, backend, nofile=LOW_LIMIT) as gateway:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        for name, future in admin.create_topics([NewTopic(name, PARTITIONS_EACH, 1) for name in names]).items():
            future.result(120)
            assert name in names

        # With two clients at once, each over the topics in its own order, the producers of topics
        # one client writes are closed for room while the other's writes wait to reopen them (slow:
        # at this limit one topic's producer is open at a time, so nearly every write reopens one).
        failures: list[KafkaError] = []
        settings = {"bootstrap.servers": gateway.bootstrap, "linger.ms": 50, "message.timeout.ms": 120_000}
        producers = [Producer(settings) for _ in range(clients)]
        for i, name in enumerate(names):
            for partition in range(PARTITIONS_EACH):
                producer = producers[partition % clients]
                topic = name if partition % 2 or clients == 1 else names[-1 - i]
                producer.produce(
                    topic,
                    f"{topic}/{partition}".encode(),
                    partition=partition,
                    on_delivery=lambda error, _message: failures.append(error) if error else None,
                )
        for producer in producers:
            assert producer.flush(180) == 0, f"undelivered records:\n{gateway.log()[-3000:]}"
        assert not failures, failures[:3]
        peak = gateway.open_descriptors()

        consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "reader", "enable.auto.commit": False})
        consumer.assign([TopicPartition(name, partition, 0) for name in names for partition in range(PARTITIONS_EACH)])
        seen: set[bytes] = set()
        deadline = time.monotonic() + 180
        try:
            while len(seen) < TOPICS * PARTITIONS_EACH and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                assert message.error() is None, message.error()
                assert message.value() == f"{message.topic()}/{message.partition()}".encode()
                seen.add(message.value())
                peak = max(peak, gateway.open_descriptors())
        finally:
            consumer.close()
        assert len(seen) == TOPICS * PARTITIONS_EACH, f"{len(seen)} messages fetched:\n{gateway.log()[-3000:]}"
        gateway.check_alive()
        assert "Too many open files" not in gateway.log()
        assert peak < LOW_LIMIT


def test_the_budget_parks_the_partitions_written_longest_ago_first_and_never_a_busy_one() -> None:
    budget = FileBudget(soft_limit=1024)
    assert budget.writer_files == 144  # a quarter of 1024, less 64 kept aside, three quarters of that
    assert topic_files(8) == 46
    budget.check_partitions("a", 10_000, shared=False)  # an exclusive topic parks its idle partitions
    budget.check_partitions("a", 27, shared=True)
    with pytest.raises(ValueError, match="ulimit"):
        budget.check_partitions("a", 28, shared=True)
    for name in "abc":
        budget.writer_opened(name)
    for name in "ab":
        for partition in range(8):
            budget.partition_opened(name, partition)
    budget.partition_used("a", 0)  # ("a", 0) is now the partition written last
    assert budget.writer_files_used == 3 * STREAM_FILES + 16 * WRITE_FILES_PER_PARTITION  # 98: 46 free
    assert budget.room_for(46, busy_partition=lambda key: False, busy_topic=lambda name: False) == ([], [])
    assert budget.room_for(50, busy_partition=lambda key: False, busy_topic=lambda name: False) == ([("a", 1)], [])
    assert budget.room_for(50, busy_partition=lambda key: key == ("a", 1), busy_topic=lambda name: False) == (
        [("a", 2)],
        [],
    )
    # Every partition parked is not enough for 150 files: then the producers idle longest close.
    to_park, to_close = budget.room_for(140, busy_partition=lambda key: key == ("b", 7), busy_topic=lambda n: False)
    assert ("b", 7) not in to_park
    assert len(to_park) == 15
    assert to_close == ["a", "c"]  # b has a partition being written: never closed
    budget.writer_closed("a")
    assert budget.partitions_open == 8
    assert not budget.partition_open("a", 0)


def test_the_readers_used_longest_ago_release_their_files() -> None:
    budget = FileBudget(soft_limit=1024)
    assert budget.reader_files is not None
    most = budget.reader_files // 2
    released: list[int] = []
    for reader in range(most + 3):
        budget.reader_used(reader, lambda reader=reader: released.append(reader))  # type: ignore[misc]
        if reader == 1:
            budget.reader_used(0, lambda: released.append(0))  # 0 read again: 1 is now the oldest
    assert released == [1, 0, 2]
    assert budget.readers_open == most
