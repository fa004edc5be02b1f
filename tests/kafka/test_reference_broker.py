"""Apache Kafka itself in the suite: the single node and the three-node cluster the differential tests
compare the gateway with start from the pinned jars, serve real clients, survive a node's SIGKILL,
are shared by a run's two workers, and leave no JVM behind when the run ends."""

from __future__ import annotations

import os
import pathlib
import select
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.kafka_broker import STARTED, KafkaBroker, KafkaCluster

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent.parent


def produce(bootstrap: str, topic: str, values: list[bytes], **settings: object) -> list[int]:
    """Produce ``values`` to partition 0 of ``topic``; the offsets the broker acknowledged."""
    offsets: list[int] = []
    errors: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            offsets.append(message.offset())  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0, **settings})
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=delivered)
    assert producer.flush(60) == 0, "messages still in flight after 60 s"
    assert not errors, errors
    return offsets


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """``count`` values from partition 0 of ``topic``, from its start."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reference-check", "log_level": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        while len(values) < count:
            message = consumer.poll(30)
            assert message is not None, f"nothing more after {len(values)} of {count} messages"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


def create_topic(bootstrap: str, topic: str, partitions: int = 1, replication: int = -1) -> None:
    """Create ``topic`` and wait for the answer (a replication of -1 takes the broker's default)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic(topic, partitions, replication)], request_timeout=60).values():
        future.result(timeout=60)


def test_the_single_node_serves_a_client_as_node_0(kafka_broker: KafkaBroker) -> None:
    """One KRaft node answers metadata as broker 0 at its bootstrap address and round-trips messages
    at offsets 0, 1, 2; its log is where the fixture says, with Kafka's start line in it."""
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 0})
    brokers = admin.list_topics(timeout=30).brokers
    assert [(b.id, f"{b.host}:{b.port}") for b in brokers.values()] == [(0, kafka_broker.bootstrap)]
    create_topic(kafka_broker.bootstrap, "reference-single")
    assert produce(kafka_broker.bootstrap, "reference-single", [b"a", b"b", b"c"]) == [0, 1, 2]
    assert consume(kafka_broker.bootstrap, "reference-single", 3) == [b"a", b"b", b"c"]
    assert STARTED in kafka_broker.log_path.read_text()


def test_a_group_and_its_committed_offset_work_on_one_node(kafka_broker: KafkaBroker) -> None:
    """The single node's settings let a group form and commit alone (offsets topic of one replica)."""
    create_topic(kafka_broker.bootstrap, "reference-group")
    produce(kafka_broker.bootstrap, "reference-group", [b"x", b"y"])
    settings = {"group.id": "reference-group", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "log_level": 0, **settings})
    consumer.subscribe(["reference-group"])
    try:
        seen = []
        while len(seen) < 2:
            message = consumer.poll(60)
            assert message is not None, "no message in 60 s"
            assert message.error() is None, message.error()
            seen.append(message.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("reference-group", 0)], timeout=30)
    finally:
        consumer.close()
    assert seen == [b"x", b"y"]
    assert committed[0].offset == 2


def test_the_cluster_keeps_acknowledged_writes_through_a_node_kill_and_restart(kafka_cluster: KafkaCluster) -> None:
    """Three nodes replicate a topic three ways; with one node SIGKILLed, acks=all writes still
    succeed (two in sync); the node restarts, metadata lists it again, and every acknowledged
    message is read back."""
    topic = "reference-cluster"
    create_topic(kafka_cluster.bootstrap, topic)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap, "log_level": 0})
    metadata = admin.list_topics(topic, timeout=30)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert sorted(metadata.topics[topic].partitions[0].replicas) == [1, 2, 3]
    before = produce(kafka_cluster.bootstrap, topic, [b"1", b"2"], acks="all")
    leader = metadata.topics[topic].partitions[0].leader
    victim = next(node for node in (1, 2, 3) if node != leader)  # a follower: the leader stays
    kafka_cluster.kill(victim)
    during = produce(kafka_cluster.bootstrap, topic, [b"3"], acks="all")
    kafka_cluster.restart(victim)
    assert sorted(admin.list_topics(timeout=30).brokers) == [1, 2, 3]
    assert before + during == [0, 1, 2]
    assert consume(kafka_cluster.bootstrap, topic, 3) == [b"1", b"2", b"3"]


# A test file of the inner run: it writes down the bootstrap its worker was given.
INNER_TEST = """
import os

def test_{name}(kafka_broker):
    with open(os.path.join(os.environ["REPORT"], "{name}"), "w") as report:
        report.write(kafka_broker.bootstrap + " " + os.environ["PYTEST_XDIST_WORKER"])
"""


def java_processes_under(folder: str) -> list[str]:
    """Command lines of running JVMs that name ``folder`` (the run's Kafka nodes do)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if "java" in command and folder in command and state != "Z":
                found.append(command)
    return found


@pytest.mark.timeout(600)
def test_two_workers_share_one_node_and_the_run_leaves_no_jvm(tmp_path: pathlib.Path) -> None:
    """A run of two xdist workers, each with its own test file using ``kafka_broker``, gets one
    node (the same bootstrap in both) and, once pytest exits, no Kafka JVM of that run is left."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("first", "second"):
        (tests / f"test_{name}.py").write_text(INNER_TEST.format(name=name))
    report = tmp_path / "report"
    report.mkdir()
    temporary = tmp_path / "tmp"  # the inner run makes its run folder here, and its JVMs name it
    temporary.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADISKQ_TEST_KAFKA_")}
    env.update(REPORT=str(report), TMPDIR=str(temporary), PYTHONPATH=str(CHECKOUT / "tests"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest"]
    command += ["-c", str(CHECKOUT / "pyproject.toml"), "--rootdir", str(tests), "-n", "2", "--dist", "loadfile"]
    done = subprocess.run([*command, str(tests)], capture_output=True, text=True, timeout=540, env=env, cwd=tests)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = {path.name: path.read_text().split() for path in report.iterdir()}
    assert sorted(seen) == ["first", "second"], seen
    assert seen["first"][1] != seen["second"][1], f"both files ran on one worker: {seen}"
    assert seen["first"][0] == seen["second"][0], f"the workers were given two brokers: {seen}"
    assert java_processes_under(str(temporary)) == []


# A run that dies without stopping its node: it starts one, says where, and waits to be killed.
DYING_RUN = """
import sys, time
sys.path.insert(0, sys.argv[1])
from support import kafka_broker as kafka_broker_support
kafka_broker_support.claim_run_folder()
broker = kafka_broker_support.shared_broker()
print(broker.pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(400)
def test_a_run_killed_outright_leaves_no_jvm_and_no_folder(tmp_path: pathlib.Path) -> None:
    """A test run SIGKILLed while its node runs (no pytest_unconfigure): the node's watchdog kills
    the JVM and removes the run's folder."""
    from support.waiting import wait_for

    env = {k: v for k, v in os.environ.items() if not k.startswith("ADISKQ_TEST_KAFKA_")}
    env["TMPDIR"] = str(tmp_path)
    run = subprocess.Popen(
        [sys.executable, "-c", DYING_RUN, str(CHECKOUT / "tests")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert run.stdout is not None
    jvm = int(run.stdout.readline())
    (folder,) = tmp_path.glob("adiskq-kafka-run-*")
    pidfd = os.pidfd_open(jvm)
    try:
        run.kill()
        run.wait(30)
        ready, _, _ = select.select([pidfd], [], [], 60)
        assert ready, "the node's JVM outlived its run by 60 s"
    finally:
        os.close(pidfd)
        assert run.stdin is not None
        run.stdin.close()
        run.stdout.close()
    wait_for(lambda: not folder.exists(), "the run's folder to be removed", [str(tmp_path)], timeout=60)
