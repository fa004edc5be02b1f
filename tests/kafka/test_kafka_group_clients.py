"""Consumer groups through kcat, aiokafka and kafka-python: joining, splitting, committing, admin views."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Producer
from group_support import bootstrap, running_gateway

import adiskq
from adiskq.kafka import GroupOptions

# kafka-python's admin client reads its bundled data with importlib.resources' deprecated read_text and open_text.
pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

TOPIC = "events"
PARTITIONS = 2
SESSION = {"session.timeout.ms": 1000, "heartbeat.interval.ms": 100}


def produce(servers: str, values: list[bytes], topic: str = TOPIC) -> None:
    """Produce the values alternately to the topic's two partitions; wait for every ack."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def kafka_topic(bootstrap_servers: str, name: str) -> str:
    """A topic of PARTITIONS partitions made on Apache Kafka (whose auto-created topics have one)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replication_factor=1)])[name].result(30)
    return name


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


def kafka_python_read(member: Any, count: int) -> list[bytes]:
    """The values of the next ``count`` messages a kafka-python consumer polls (within 60 s)."""
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < count:
        assert time.monotonic() < deadline, f"only {len(seen)} of {count} messages came"
        for records in member.poll(timeout_ms=100).values():
            seen += [record.value for record in records]
    return seen


# kafka-python 3.0's leader can assign before its metadata knows the subscribed topic (it fetches it
# only after subscribing), assigning nothing; it then rejoins, and in a share of those second
# rebalances it never applies the assignment its SyncGroup brought (no "Setting newly assigned
# partitions" follows): the member holds nothing and reads nothing. Kafka's own brokers hold an empty
# group's first generation back 3 s (group.initial.rebalance.delay.ms), long enough for the metadata;
# these tests give the gateway the same setting at 0.5 s, so the first assignment is the real one.
KAFKA_PYTHON_GROUPS = GroupOptions(min_session_timeout_ms=100, initial_rebalance_delay_ms=500)


# kafka-python speaks the versions of the broker release it is told it talks to: each release's
# group protocol versions (JoinGroup v2/v3/v6, SyncGroup v1/v2/v4, OffsetCommit v3/v4/v8, OffsetFetch
# v3/v4/v6, LeaveGroup v1/v2/v4), and without one, what ApiVersions offers (JoinGroup v7, v8 commits).
@pytest.mark.parametrize("api_version", [None, (0, 11), (2, 0), (2, 4)], ids=["negotiated", "0.11", "2.0", "2.4"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_kafka_python_group_commit_and_resume(
    tmp_path: pathlib.Path, backend: str, api_version: tuple[int, int] | None
) -> None:
    """kafka-python: a member reads, commits with metadata, and a new member resumes from the commit."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS, groups=KAFKA_PYTHON_GROUPS) as gateway:
        servers = bootstrap(gateway)
        produce(servers, [b"y%d" % i for i in range(10)])
        settings = {
            "bootstrap_servers": servers,
            "group_id": "audit",
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "session_timeout_ms": 1000,
            "heartbeat_interval_ms": 100,
            # A leader that assigned before its metadata knew the topic (a race inside kafka-python) sees
            # the partitions at the next refresh and rejoins: make that refresh come soon.
            "metadata_max_age_ms": 500,
            "api_version": api_version,
        }
        member = KafkaConsumer(TOPIC, **settings)
        try:
            assert sorted(kafka_python_read(member, 10)) == sorted(b"y%d" % i for i in range(10))
            member.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(4, "four", -1)})
            assert member.committed(TopicPartition(TOPIC, 0), metadata=True) == OffsetAndMetadata(4, "four", -1)
        finally:
            member.close()
        member = KafkaConsumer(TOPIC, **settings)
        try:
            again = kafka_python_read(member, 6)
        finally:
            member.close()
        # Partition 0 resumes at its commit (offset 4: y8); partition 1, never committed, from the start.
        assert sorted(again) == [b"y1", b"y3", b"y5", b"y7", b"y8", b"y9"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_kafka_python_admin_sees_group(tmp_path: pathlib.Path, backend: str) -> None:
    """kafka-python's admin client lists the group, describes it Empty, and reads its offsets and metadata."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS, groups=KAFKA_PYTHON_GROUPS) as gateway:
        servers = bootstrap(gateway)
        produce(servers, [b"z%d" % i for i in range(4)])
        member = KafkaConsumer(
            TOPIC,
            bootstrap_servers=servers,
            group_id="audit",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            metadata_max_age_ms=500,
        )
        try:
            kafka_python_read(member, 4)
            member.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(1, "one", -1)})
        finally:
            member.close()
        admin = KafkaAdminClient(bootstrap_servers=servers)
        try:
            offsets = admin.list_group_offsets({"audit": None})["audit"]
            assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {0: (1, "one")}
            assert "audit" in [group["group_id"] for group in admin.list_groups()]
            assert admin.describe_groups(["audit"])["audit"]["group_state"] == "Empty"
        finally:
            admin.close()


def static_members(servers: str, group: str) -> list[tuple[str, str | None]]:
    """(member id, group.instance.id) of the group's members, as DescribeGroups answers them."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})
    description = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return [(member.member_id, member.group_instance_id) for member in description.members]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_static_member_restart_takes_its_place(tmp_path: pathlib.Path, backend: str) -> None:
    """A librdkafka member with group.instance.id that restarts replaces itself at once, without waiting
    out its (long) session: one member stays, under a new member id, and reads on."""
    from confluent_kafka import Consumer

    config = {
        "group.id": "static",
        "group.instance.id": "worker-1",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 30_000,  # far longer than the test may take
        "heartbeat.interval.ms": 100,
    }
    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS) as gateway:
        servers = bootstrap(gateway)
        produce(servers, [b"s%d" % i for i in range(6)])

        def read(count: int) -> None:
            member = Consumer({"bootstrap.servers": servers, **config})
            member.subscribe([TOPIC])
            got = 0
            deadline = time.monotonic() + 20
            while got < count:
                assert time.monotonic() < deadline, f"only {got} of {count} messages came"
                message = member.poll(0.1)
                got += message is not None and message.error() is None
            member.close()  # a static member does not leave: its place waits for it

        read(6)
        ((first_id, instance),) = static_members(servers, "static")
        assert instance == "worker-1"
        produce(servers, [b"t%d" % i for i in range(2)])
        read(2)
        ((second_id, instance),) = static_members(servers, "static")
        assert instance == "worker-1"
        assert second_id != first_id


GROUP_IDS_OF_EVERY_SHAPE = ["app:billing", "team/svc", "roundrobin,range", "../escape", "naïve ✓", "%41", "-x"]


def every_group_id_reads_commits_and_resumes(
    servers: str, topic: str, prefix: str = "", session: dict[str, int] = SESSION
) -> None:
    """Each of GROUP_IDS_OF_EVERY_SHAPE (after ``prefix``) reads the topic's 4 messages and commits,
    then, after 2 more, reads only those: it resumed where it committed."""
    from confluent_kafka import Consumer

    produce(servers, [b"m%d" % i for i in range(4)], topic)

    def read_and_commit(group: str, count: int) -> list[bytes]:
        member = Consumer({"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "earliest", **session})
        member.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        try:
            while len(got) < count:
                assert time.monotonic() < deadline, f"{group!r}: only {got} came"
                message = member.poll(0.1)
                if message is not None:
                    assert message.error() is None, (group, message.error())
                    got.append(message.value())
            member.commit(asynchronous=False)
        finally:
            member.close()
        return got

    for group in GROUP_IDS_OF_EVERY_SHAPE:
        assert len(read_and_commit(prefix + group, 4)) == 4
    produce(servers, [b"n%d" % i for i in range(2)], topic)
    for group in GROUP_IDS_OF_EVERY_SHAPE:
        assert sorted(read_and_commit(prefix + group, 2)) == [b"n0", b"n1"], group


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_any_group_id_kafka_accepts_joins_commits_and_resumes(tmp_path: pathlib.Path, backend: str) -> None:
    """Group ids that are no plain folder name (``app:billing``, ``team/svc``, ``../escape``) join,
    commit and resume like any other: stored under an encoded folder inside ``groups/``, listed by
    their own names, and nothing written outside the stream."""
    with running_gateway(str(tmp_path / "root"), backend, partitions=PARTITIONS) as gateway:
        every_group_id_reads_commits_and_resumes(bootstrap(gateway), TOPIC)
    stream = tmp_path / "root" / TOPIC
    committed = adiskq.stats(str(stream)).groups
    for group in GROUP_IDS_OF_EVERY_SHAPE:
        assert sum(committed[group].values()) == 6, (group, committed)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["root"]
    assert sorted(path.name for path in (tmp_path / "root").iterdir()) == [TOPIC]
    folders = sorted(path.name for path in (stream / "groups").iterdir())
    assert "%app%3Abilling" in folders, folders
    assert "%team%2Fsvc" in folders, folders


def test_kafka_takes_the_same_group_ids(kafka_broker) -> None:
    """Apache Kafka serves the same group ids the same way: read, commit, resume."""
    topic = kafka_topic(kafka_broker.bootstrap, "group-ids-of-every-shape")
    kafka_session = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 100}  # Kafka's shortest session
    every_group_id_reads_commits_and_resumes(kafka_broker.bootstrap, topic, prefix="shapes-", session=kafka_session)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_default_initial_rebalance_delay_gathers_consumers_started_together(
    tmp_path: pathlib.Path, backend: str
) -> None:
    """By default an empty group waits 3 s (Kafka's group.initial.rebalance.delay.ms) before its first
    generation: a consumer that subscribes a second after another shares that generation, so the first
    is never handed both partitions and then made to give one back."""
    from confluent_kafka import Consumer

    assert GroupOptions().initial_rebalance_delay_ms == 3000
    with running_gateway(
        str(tmp_path), backend, partitions=PARTITIONS, groups=GroupOptions(min_session_timeout_ms=100)
    ) as gateway:
        servers = bootstrap(gateway)
        produce(servers, [b"p%d" % i for i in range(4)])
        assigned: dict[str, list[list[int]]] = {"first": [], "second": []}
        revoked: list[str] = []

        def member(name: str) -> Consumer:
            consumer = Consumer({"bootstrap.servers": servers, "group.id": "together", **SESSION})
            consumer.subscribe(
                [TOPIC],
                on_assign=lambda _c, parts: assigned[name].append(sorted(p.partition for p in parts)),
                on_revoke=lambda _c, parts: revoked.append(name) if parts else None,
            )
            return consumer

        first = member("first")
        second = None
        started = time.monotonic()
        try:
            while not (assigned["first"] and assigned["second"]):
                assert time.monotonic() - started < 30, f"assignments so far: {assigned}"
                first.poll(0.1)
                if second is None and time.monotonic() - started >= 1.0:
                    second = member("second")  # a second after the first, within its delay
                if second is not None:
                    second.poll(0.1)
            revoked_while_running = list(revoked)  # (closing revokes too)
        finally:
            first.close()
            if second is not None:
                second.close()
        assert assigned["first"][0] in ([0], [1]), assigned
        assert sorted(assigned["first"][0] + assigned["second"][0]) == [0, 1], assigned
        assert time.monotonic() - started >= 3.0  # not before the delay ran out
        assert revoked_while_running == [], revoked_while_running


def static_leader_restarts_without_a_rebalance(servers: str, topic: str, group: str) -> None:
    """Two static librdkafka members of ``group`` share the topic's two partitions; the leader (the
    first) restarts: it has its partition back, and the other member sees no revocation or assignment."""
    from confluent_kafka import Consumer

    events: list[tuple[str, str, list[int]]] = []

    def member(name: str, instance: str) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": 30_000,  # far longer than the test: only a rebalance could move partitions
                "heartbeat.interval.ms": 100,
            }
        )
        consumer.subscribe(
            [topic],
            on_assign=lambda _c, parts: events.append((name, "assign", sorted(p.partition for p in parts))),
            on_revoke=lambda _c, parts: events.append((name, "revoke", sorted(p.partition for p in parts))),
        )
        return consumer

    def poll_until(members: list[Consumer], done: Any, what: str) -> None:
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, f"{what}; events: {events}"
            for consumer in members:
                consumer.poll(0.05)

    def holds(name: str) -> list[int]:
        held: list[int] = []
        for who, kind, parts in events:
            if who == name:
                held = parts if kind == "assign" else [p for p in held if p not in parts]
        return held

    produce(servers, [b"x"], topic)
    leader = member("leader", "inst-leader")
    poll_until([leader], lambda: holds("leader") == [0, 1], "the leader never had both partitions")
    follower = member("follower", "inst-follower")
    poll_until(
        [leader, follower],
        lambda: len(holds("leader")) == 1 and len(holds("follower")) == 1,
        "the two never shared the partitions",
    )
    leader_part = holds("leader")
    follower_events = [e for e in events if e[0] == "follower"]
    leader.close()  # a static member does not leave the group
    restarted = member("restarted", "inst-leader")
    poll_until([restarted, follower], lambda: holds("restarted") == leader_part, "the restart got nothing")
    watch_until = time.monotonic() + 2  # heartbeats every 100 ms would have met a rebalance by now
    poll_until([restarted, follower], lambda: time.monotonic() > watch_until, "")
    try:
        assert [e for e in events if e[0] == "follower"] == follower_events, events
        assert [e for e in events if e[0] == "restarted"] == [("restarted", "assign", leader_part)], events
    finally:
        restarted.close()
        follower.close()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_static_leader_restart_rebalances_no_one(tmp_path: pathlib.Path, backend: str) -> None:
    """Two static librdkafka members: the leader restarts (closes without leaving, a new consumer with
    its group.instance.id) and has its partition back, while the other member keeps its own with no
    revocation or new assignment (KIP-345), as a follower's restart already did."""
    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS) as gateway:
        static_leader_restarts_without_a_rebalance(bootstrap(gateway), TOPIC, "static-leader")


def test_kafka_static_leader_restart_rebalances_no_one(kafka_broker) -> None:
    """Apache Kafka: the same static leader's restart, the same observation."""
    topic = kafka_topic(kafka_broker.bootstrap, "static-leader-restart")
    static_leader_restarts_without_a_rebalance(kafka_broker.bootstrap, topic, "static-leader-restart")
