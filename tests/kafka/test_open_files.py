"""The gateway within its open-files limit: the soft limit raised to the hard one at start, a topic
too large for the limit refused whole with Kafka's POLICY_VIOLATION, and thousands of partitions
written and read at a low ``ulimit -n`` (the gateway a subprocess with its own limit), its idle
topics' and partitions' files closed to make room."""

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

from adiskq.kafka._open_files import FileBudget, topic_files

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


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_topic_larger_than_the_limit_allows_is_refused_whole(tmp_path: pathlib.Path, backend: str) -> None:
    """300 partitions at `ulimit -n` 1024: refused with POLICY_VIOLATION before anything is made,
    so no half-made topic is left for Metadata to serve; a topic that fits is created and grows
    only as far as the limit allows."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend, nofile=LOW_LIMIT) as gateway:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("huge", 300, 1)])["huge"].result(30)
        error = refused.value.args[0]
        assert error.code() == KafkaError.POLICY_VIOLATION
        assert "300 partitions" in error.str()
        assert "ulimit" in error.str()
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


def test_the_budget_closes_idle_producers_first_and_never_a_busy_one() -> None:
    budget = FileBudget(soft_limit=1024)
    assert budget.writer_files == 144  # a quarter of 1024, less 64 kept aside, three quarters of that
    assert topic_files(8) == 46
    budget.check_partitions("a", 27)
    with pytest.raises(ValueError, match="ulimit"):
        budget.check_partitions("a", 28)
    for name in "abc":
        budget.writer_opened(name, 8)
    budget.writer_used("a")  # b is now the idle longest, then c, then a
    assert budget.writers_to_close("d", 8, busy=lambda name: False) == ["b"]
    assert budget.writers_to_close("d", 8, busy=lambda name: name == "b") == ["c"]
    assert budget.writers_to_close("d", 27, busy=lambda name: False) == ["b", "c", "a"]


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
