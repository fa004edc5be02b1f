"""Consumer groups through kcat, aiokafka and kafka-python: joining, splitting, committing, admin views."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import time

import pytest
from confluent_kafka import Producer
from group_support import bootstrap, running_gateway

import adiskq

# kafka-python's admin client reads its bundled data with importlib.resources' deprecated read_text and open_text.
pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

TOPIC = "events"
PARTITIONS = 2


def produce(servers: str, values: list[bytes]) -> None:
    """Produce the values alternately to the topic's two partitions; wait for every ack."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def kcat_group(servers: str, group: str, count: int) -> list[bytes]:
    """Run ``kcat -G`` until it read ``count`` messages; the values it printed."""
    result = subprocess.run(
        [
            "kcat", "-b", servers, "-G", group, TOPIC, "-c", str(count), "-f", "%s\\n", "-q",
            "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=1000", "-X", "heartbeat.interval.ms=100",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )  # fmt: skip
    return result.stdout.splitlines()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_kcat_balanced_consumer_commits_and_resumes(tmp_path: pathlib.Path, backend: str) -> None:
    """kcat -G reads a topic as a group member and commits; a second run reads only what came after."""
    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS) as gateway:
        servers = bootstrap(gateway)
        first = [b"a%d" % i for i in range(10)]
        produce(servers, first)
        assert sorted(kcat_group(servers, "ops", 10)) == sorted(first)
        assert sum(adiskq.stats(str(tmp_path / TOPIC)).groups["ops"].values()) == 10
        second = [b"b%d" % i for i in range(4)]
        produce(servers, second)
        assert sorted(kcat_group(servers, "ops", 4)) == sorted(second)


async def aiokafka_group(servers: str) -> None:
    """Two aiokafka members split the partitions, commit with metadata; the admin client sees the group."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.structs import OffsetAndMetadata

    settings = {
        "bootstrap_servers": servers,
        "group_id": "reports",
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": 1000,
        "heartbeat_interval_ms": 100,
    }
    members = [AIOKafkaConsumer(TOPIC, **settings) for _ in range(2)]
    for member in members:
        await member.start()
    try:
        deadline = time.monotonic() + 60
        while sorted(p.partition for m in members for p in m.assignment()) != [0, 1] or not all(
            m.assignment() for m in members
        ):
            assert time.monotonic() < deadline, "the members never split the partitions"
            await asyncio.gather(*(m.getmany(timeout_ms=50) for m in members))
        for member in members:
            (partition,) = member.assignment()
            await member.commit({partition: OffsetAndMetadata(3, f"seen by {partition.partition}")})
        admin = AIOKafkaAdminClient(bootstrap_servers=servers)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets("reports")
            assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {
                0: (3, "seen by 0"),
                1: (3, "seen by 1"),
            }
            (description,) = await admin.describe_consumer_groups(["reports"])
            assert "Stable" in str(description)
            listed = await admin.list_consumer_groups()
            assert ("reports", "consumer") in listed
        finally:
            await admin.close()
        (first,) = members[0].assignment()
        assert await members[0].committed(TopicPartition(TOPIC, first.partition)) == 3
    finally:
        for member in members:
            await member.stop()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_aiokafka_group_and_admin(tmp_path: pathlib.Path, backend: str) -> None:
    """aiokafka: two members split two partitions, commit with metadata; offsets, description, listing read back."""
    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS) as gateway:
        servers = bootstrap(gateway)
        produce(servers, [b"x%d" % i for i in range(8)])
        asyncio.run(aiokafka_group(servers))
    assert adiskq.stats(str(tmp_path / TOPIC)).groups["reports"] == {0: 3, 1: 3}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_kafka_python_group_commit_and_admin(tmp_path: pathlib.Path, backend: str) -> None:
    """kafka-python: a member reads, commits with metadata and resumes; its admin client sees the group."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS) as gateway:
        servers = bootstrap(gateway)
        produce(servers, [b"y%d" % i for i in range(10)])
        settings = {
            "bootstrap_servers": servers,
            "group_id": "audit",
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "session_timeout_ms": 1000,
            "heartbeat_interval_ms": 100,
        }
        member = KafkaConsumer(TOPIC, **settings)
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(seen) < 10:
            assert time.monotonic() < deadline, f"only {len(seen)} of 10 messages came"
            for records in member.poll(timeout_ms=100).values():
                seen += [record.value for record in records]
        member.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(4, "four", -1)})
        member.close()
        admin = KafkaAdminClient(bootstrap_servers=servers)
        try:
            offsets = admin.list_group_offsets({"audit": None})["audit"]
            assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {0: (4, "four")}
            assert "audit" in [group["group_id"] for group in admin.list_groups()]
            assert admin.describe_groups(["audit"])["audit"]["group_state"] == "Empty"
        finally:
            admin.close()
        member = KafkaConsumer(TOPIC, **settings)
        again: list[bytes] = []
        while len(again) < 6:
            assert time.monotonic() < deadline, f"only {len(again)} of 6 messages came again"
            for records in member.poll(timeout_ms=100).values():
                again += [record.value for record in records]
        member.close()
        # Partition 0 resumes at its commit (offset 4: y8); partition 1, never committed, from the start.
        assert sorted(again) == [b"y1", b"y3", b"y5", b"y7", b"y8", b"y9"]
