"""Offsets committed by Kafka clients: resumed after restarts, and managed with adiskq's own tools."""

from __future__ import annotations

import json
import os
import pathlib
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from group_support import SESSION_CONFIG, ServeProcess, bootstrap, running_gateway
from support.cli import invoke

import adiskq

TOPIC = "orders"


def produce(servers: str, count: int) -> None:
    """``count`` messages v0, v1, ... to partition 0 of the topic."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, b"v%d" % i, partition=0)
    assert producer.flush(30) == 0


def consumer(servers: str, group: str = "billing") -> Consumer:
    """A group member subscribed to the topic, committing by hand."""
    member = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **SESSION_CONFIG,
        }
    )
    member.subscribe([TOPIC])
    return member


def take(member: Consumer, count: int) -> list[int]:
    """The offsets of the next ``count`` messages of partition 0 (within 30 s)."""
    offsets: list[int] = []
    deadline = time.monotonic() + 30
    while len(offsets) < count:
        assert time.monotonic() < deadline, f"only {len(offsets)} of {count} messages came"
        message = member.poll(0.1)
        if message is not None and message.error() is None and message.partition() == 0:
            offsets.append(message.offset())
    return offsets


def took_and_committed(servers: str, count: int, *, metadata: str | None = None) -> Consumer:
    """A member that took partition 0's first ``count`` messages and committed offset ``count``."""
    member = consumer(servers)
    assert take(member, count) == list(range(count))
    # confluent-kafka takes no None for metadata: a commit without any leaves the argument out.
    offset = TopicPartition(TOPIC, 0, count) if metadata is None else TopicPartition(TOPIC, 0, count, metadata=metadata)
    member.commit(offsets=[offset], asynchronous=False)
    return member


def committed(servers: str, group: str = "billing") -> TopicPartition:
    """Partition 0's committed offset and metadata, as OffsetFetch answers them."""
    member = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        (answer,) = member.committed([TopicPartition(TOPIC, 0)], timeout=30)
        return answer
    finally:
        member.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_commit_resumes_after_consumer_restart_with_metadata(tmp_path: pathlib.Path, backend: str) -> None:
    """A restarted member resumes at the committed offset; OffsetFetch returns the metadata string committed."""
    with running_gateway(str(tmp_path), backend) as gateway:
        servers = bootstrap(gateway)
        produce(servers, 20)
        member = took_and_committed(servers, 10, metadata="checkpoint 10")
        member.close()
        answer = committed(servers)
        assert (answer.offset, answer.metadata) == (10, "checkpoint 10")
        member = consumer(servers)
        assert take(member, 10) == list(range(10, 20))
        member.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_commit_resumes_after_gateway_restart(tmp_path: pathlib.Path, backend: str) -> None:
    """Committed offsets are on disk: a new gateway over the same folder hands them back."""
    with running_gateway(str(tmp_path), backend) as gateway:
        servers = bootstrap(gateway)
        produce(servers, 20)
        member = took_and_committed(servers, 7)
        member.close()
    with running_gateway(str(tmp_path), backend) as gateway:
        member = consumer(bootstrap(gateway))
        assert take(member, 13) == list(range(7, 20))
        member.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_groups_command_shows_kafka_group(tmp_path: pathlib.Path, backend: str) -> None:
    """`adiskq groups` lists a Kafka client's group: its committed offset, its lag, and that it is in use."""
    with running_gateway(str(tmp_path), backend) as gateway:
        servers = bootstrap(gateway)
        produce(servers, 12)
        member = took_and_committed(servers, 5)
        result = invoke("groups", str(tmp_path / TOPIC), "--json")
        assert result.exit_code == 0, result.output
        group = json.loads(result.output)["billing"]
        assert (group["committed"], group["lag"]["0"]) == ({"0": 5}, 7)
        table = invoke("groups", str(tmp_path / TOPIC))
        assert f"in use by Kafka consumers through the gateway at pid {os.getpid()}" in " ".join(table.output.split())
        member.close()
    assert adiskq.stats(str(tmp_path / TOPIC)).groups["billing"] == {0: 5}
    assert "in use" not in invoke("groups", str(tmp_path / TOPIC)).output


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_offsets_reset_moves_kafka_group_and_is_refused_while_it_runs(tmp_path: pathlib.Path, backend: str) -> None:
    """`adiskq offsets --reset-to` is refused while the Kafka group has members, then moves it for its next run."""
    with running_gateway(str(tmp_path), backend) as gateway:
        servers = bootstrap(gateway)
        produce(servers, 10)
        member = took_and_committed(servers, 10, metadata="done")
        refused = invoke("offsets", str(tmp_path / TOPIC), "--group", "billing", "--reset-to", "oldest")
        assert refused.exit_code != 0
        assert "in use" in refused.output
        member.close()
        moved = invoke("offsets", str(tmp_path / TOPIC), "--group", "billing", "--reset-to", "3", "-p", "0")
        assert moved.exit_code == 0, moved.output
        answer = committed(servers)
        assert answer.offset == 3
        assert not answer.metadata  # the metadata committed named another offset
        member = consumer(servers)
        assert take(member, 7) == list(range(3, 10))
        member.close()


def test_commit_answered_is_kept_when_gateway_is_killed(tmp_path: pathlib.Path) -> None:
    """An OffsetCommit that was answered survives a SIGKILL of `adiskq serve`: it is on disk first."""
    server = ServeProcess(str(tmp_path), "--group-min-session-timeout-ms", "100")
    try:
        servers = f"127.0.0.1:{server.port}"
        produce(servers, 10)
        member = took_and_committed(servers, 6, metadata="six")
        server.kill()
        member.close()
    finally:
        if server.process.poll() is None:
            server.kill()
    server = ServeProcess(str(tmp_path))
    try:
        answer = committed(f"127.0.0.1:{server.port}")
        assert (answer.offset, answer.metadata) == (6, "six")
    finally:
        assert server.stop() == 0
