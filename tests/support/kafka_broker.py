"""Apache Kafka itself, for the tests that compare the gateway with it: one KRaft node, or a cluster
of three, on loopback, started once per test run and shared by the run's pytest-xdist workers; and a
second single node with a SASL listener and a per-address connection limit, started only for the
tests that compare those (``shared_sasl_broker``).

Sharing: the run's main process (the only one without xdist) makes a run folder in
``pytest_configure`` and names it to its workers in ``ADISKQ_TEST_KAFKA_RUN``. The first test that
asks for a broker (or the cluster) starts it under a file lock in that folder and writes its state
(ports, process ids) to ``broker.json`` / ``cluster.json``; the other worker finds the state and uses
the same nodes. The main process stops every node in ``pytest_unconfigure``, after all workers are
done, and removes the folder. A watchdog per node kills the node's JVM if the main process dies
without stopping it (support/kafka_watchdog.py).

Each node is Kafka's own "combined" shape (``process.roles=broker,controller``) with Kafka's defaults,
except what one node needs to serve groups and transactions alone. Readiness is the node's own log
line "Kafka Server started" (woken by inotify on the log's folder, never on a timer) and, for the
cluster, a metadata request that lists every broker. A node that exits or does not start in time
fails the test with its log's path and last lines.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from asyncinotify import Inotify, Mask

from support.kafka_jars import class_path

BROKER_JARS = "broker-4.4.0"  # the set of tests/kafka/jars.txt the nodes run
RUN_VARIABLE = "ADISKQ_TEST_KAFKA_RUN"  # the run folder, named by the main process to its workers
OWNER_VARIABLE = "ADISKQ_TEST_KAFKA_OWNER"  # the main process's pid: its watchdogs' cue
STARTED = "Kafka Server started"  # the line a node logs once it serves clients
START_TIMEOUT = 180.0  # seconds: a JVM broker starts in a few on two busy cores; this is the failure bound
STOP_TIMEOUT = 30.0  # seconds a node has to shut down on SIGTERM before it is killed
HEAP = "-Xmx512m"
WATCHDOG = pathlib.Path(__file__).resolve().parent / "kafka_watchdog.py"

# Kafka's settings that differ from its defaults, for every node: the group coordinator starts a
# group at once (the 3 s default delays every test's first join), and its ids are those of the test;
# the transaction coordinator looks for transactions past their timeout every second, not every ten
# (a hung transaction is then aborted within a second of its timeout, as the gateway aborts it).
COMMON_SETTINGS = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
# One node alone: the internal topics' replication must fit one broker (else groups and
# init_transactions wait forever for replicas that do not exist).
SINGLE_NODE_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
CLUSTER_SETTINGS = {"default.replication.factor": "3", "min.insync.replicas": "2"}

# The SASL node: clients on a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with one
# user, the node's own traffic on a PLAINTEXT one. A failed login is answered after
# SASL_FAILED_DELAY_MS (Kafka's default, 100, is too short to tell from a slow machine), and
# max.connections.per.ip is PER_ADDRESS_LIMIT for every address but 127.0.0.1 (the suite's other
# clients, and the node's own connections): a test counts connections it makes from
# LIMITED_ADDRESS, another loopback address.
SASL_USER, SASL_PASSWORD = "alice", "alice-secret"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_FAILED_DELAY_MS = 600
PER_ADDRESS_LIMIT = 3
LIMITED_ADDRESS = "127.0.0.9"
SASL_SETTINGS = {
    **SINGLE_NODE_SETTINGS,
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
        f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{SASL_USER}="{SASL_PASSWORD}";'
    ),
    **{
        f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
        for mechanism in SASL_MECHANISMS[1:]
    },
    "connection.failed.authentication.delay.ms": str(SASL_FAILED_DELAY_MS),
    "max.connections.per.ip": str(PER_ADDRESS_LIMIT),
    "max.connections.per.ip.overrides": "127.0.0.1:100000",
}
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
"""


@dataclasses.dataclass
class Node:
    """One KRaft combined node: its id, client and controller ports, folder and running JVM's pid."""

    node_id: int
    port: int
    controller_port: int
    folder: str
    pid: int = 0
    # A SASL node: ``port`` is its SASL_PLAINTEXT listener's, this its own PLAINTEXT one's (0: none).
    internal_port: int = 0

    @property
    def address(self) -> str:
        """``host:port`` of its client listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> pathlib.Path:
        """The node's log (the JVM's stdout and stderr, Log4j's console appender), appended per start."""
        return pathlib.Path(self.folder) / "kafka.log"

    @property
    def properties_path(self) -> pathlib.Path:
        """The node's ``server.properties``."""
        return pathlib.Path(self.folder) / "server.properties"


@dataclasses.dataclass
class KafkaBroker:
    """A running single Kafka node: ``bootstrap`` for a client, ``log_path`` for its log."""

    node: Node

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for a client: ``127.0.0.1:PORT``."""
        return self.node.address

    @property
    def log_path(self) -> pathlib.Path:
        """The broker's log."""
        return self.node.log_path

    @property
    def pid(self) -> int:
        """The broker's JVM's process id (for its CPU and memory, as benchmarks/kafka/bench_kafka.py reads)."""
        return self.node.pid


@dataclasses.dataclass
class KafkaSaslBroker:
    """The run's SASL node: ``bootstrap`` is its SASL_PLAINTEXT listener, where ``user`` logs in with
    ``password`` by any of ``mechanisms``; ``failed_delay_ms``, ``per_address_limit`` and
    ``limited_address`` as the module's constants say."""

    node: Node
    user: str = SASL_USER
    password: str = SASL_PASSWORD
    mechanisms: tuple[str, ...] = SASL_MECHANISMS
    failed_delay_ms: int = SASL_FAILED_DELAY_MS
    per_address_limit: int = PER_ADDRESS_LIMIT
    limited_address: str = LIMITED_ADDRESS

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for a SASL client: ``127.0.0.1:PORT``."""
        return self.node.address

    @property
    def port(self) -> int:
        """The SASL listener's port."""
        return self.node.port


@dataclasses.dataclass
class KafkaCluster:
    """A running three-node Kafka cluster on loopback (node ids 1, 2, 3)."""

    run_folder: pathlib.Path
    nodes: list[Node]

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for a client: every node, ``h:p,h:p,h:p``."""
        return _bootstrap(self.nodes)

    def node(self, node_id: int) -> Node:
        """The node with id ``node_id`` as the shared state has it now."""
        self.nodes = _read_state(self.run_folder, "cluster")
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise ValueError(f"the cluster has no node {node_id}: its ids are {[n.node_id for n in self.nodes]}")

    def log_path(self, node_id: int) -> pathlib.Path:
        """The log of node ``node_id``."""
        return self.node(node_id).log_path

    def kill(self, node_id: int) -> None:
        """SIGKILL node ``node_id``'s JVM and wait until it is gone."""
        with _locked(self.run_folder, "cluster"):
            node = self.node(node_id)
            _kill_and_wait(node.pid, signal.SIGKILL, STOP_TIMEOUT)

    def restart(self, node_id: int) -> None:
        """Start node ``node_id`` again (over its own log folder) and wait until it serves again and
        the cluster's metadata lists it."""
        with _locked(self.run_folder, "cluster"):
            node = self.node(node_id)
            if _alive(node.pid):
                raise AssertionError(f"node {node_id} of the Kafka cluster is still running: kill it first")
            starts = node.log_path.read_text(errors="replace").count(STARTED) if node.log_path.exists() else 0
            node.pid = _launch(node)
            _write_state(self.run_folder, "cluster", self.nodes)  # stopped at the run's end, started or not
            _wait_started(node, starts + 1)
        _wait_listed(self.bootstrap, {node.node_id for node in self.nodes})


# --- the run folder: made by the main process, shared with its workers --------------------------


def claim_run_folder() -> None:
    """In the run's main process (pytest_configure): a new run folder, named to the workers."""
    os.environ[RUN_VARIABLE] = tempfile.mkdtemp(prefix="adiskq-kafka-run-")
    os.environ[OWNER_VARIABLE] = str(os.getpid())


def release_run_folder() -> None:
    """In the run's main process (pytest_unconfigure): stop every node started, remove the folder."""
    folder = os.environ.pop(RUN_VARIABLE, None)
    os.environ.pop(OWNER_VARIABLE, None)
    if folder is None:
        return
    run = pathlib.Path(folder)
    nodes = [node for name in ("broker", "cluster", "sasl") for node in _read_state(run, name, stopping=True)]
    for node in nodes:  # all at once: a cluster's nodes shut down together, not one quorum at a time
        with contextlib.suppress(ProcessLookupError):
            os.kill(node.pid, signal.SIGTERM)
    for node in nodes:
        _kill_and_wait(node.pid, signal.SIGKILL, STOP_TIMEOUT)
    shutil.rmtree(run, ignore_errors=True)


def _run_folder() -> pathlib.Path:
    folder = os.environ.get(RUN_VARIABLE)
    if folder is None:  # imported outside a pytest run that went through tests/conftest.py
        raise RuntimeError(f"{RUN_VARIABLE} is not set: tests/conftest.py's pytest_configure sets it")
    return pathlib.Path(folder)


@contextlib.contextmanager
def _locked(run: pathlib.Path, name: str) -> Iterator[None]:
    """Hold the run's lock for ``name`` (one worker at a time starts, kills or restarts its nodes)."""
    with open(run / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _state_path(run: pathlib.Path, name: str) -> pathlib.Path:
    return run / f"{name}.json"


def _read_state(run: pathlib.Path, name: str, *, stopping: bool = False) -> list[Node]:
    """The nodes of ``name``; a start that failed fails the caller, except when the run is stopping."""
    path = _state_path(run, name)
    if stopping and not path.exists():
        return []
    state = json.loads(path.read_text())
    if state.get("error") and not stopping:
        pytest.fail(state["error"])
    return [Node(**node) for node in state["nodes"]]


def _write_state(run: pathlib.Path, name: str, nodes: list[Node], error: str = "") -> None:
    partial = _state_path(run, name).with_suffix(".partial")
    partial.write_text(json.dumps({"nodes": [dataclasses.asdict(node) for node in nodes], "error": error}))
    os.replace(partial, _state_path(run, name))


# --- the fixtures' bodies ----------------------------------------------------------------------------


def shared_broker() -> KafkaBroker:
    """The run's single Kafka node (node id 0, as the gateway's own broker), started by the first caller."""

    def start(run: pathlib.Path) -> list[Node]:
        return _start([_new_node(run / "broker", 0)], SINGLE_NODE_SETTINGS, then=_wait_group_coordinator)

    return KafkaBroker(_shared("broker", start)[0])


def shared_sasl_broker() -> KafkaSaslBroker:
    """The run's SASL node (id 0, a cluster of its own), started by the first caller: its user's
    SCRAM credentials are written when its log folder is formatted, as Kafka's KRaft mode has them."""

    def start(run: pathlib.Path) -> list[Node]:
        node = _new_node(run / "sasl", 0)
        node.internal_port = _free_port()
        scram = [
            argument
            for mechanism in SASL_MECHANISMS[1:]
            for argument in ("--add-scram", f"{mechanism}=[name={SASL_USER},password={SASL_PASSWORD}]")
        ]
        return _start([node], SASL_SETTINGS, then=lambda _: None, format_arguments=scram)

    return KafkaSaslBroker(_shared("sasl", start)[0])


def shared_cluster() -> KafkaCluster:
    """The run's three-node Kafka cluster (ids 1, 2, 3), started by the first caller."""
    run = _run_folder()

    def start(run: pathlib.Path) -> list[Node]:
        nodes = [_new_node(run / "cluster" / f"node-{node_id}", node_id) for node_id in (1, 2, 3)]
        return _start(nodes, CLUSTER_SETTINGS, then=lambda _: _wait_listed(_bootstrap(nodes), {1, 2, 3}))

    return KafkaCluster(run, _shared("cluster", start))


def _shared(name: str, start: Callable[[pathlib.Path], list[Node]]) -> list[Node]:
    """The nodes of ``name`` from the run's state; started (by ``start(run_folder)``) if none are yet.
    A start that failed is remembered: every later caller fails with the same message at once."""
    run = _run_folder()
    with _locked(run, name):
        if _state_path(run, name).exists():
            return _read_state(run, name)
        try:
            nodes = start(run)
        except BaseException as error:
            _write_state(run, name, [], error=f"Apache Kafka ({name}) did not start: {error}")
            raise
        _write_state(run, name, nodes)
        return nodes


# --- starting and stopping nodes ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _new_node(folder: pathlib.Path, node_id: int) -> Node:
    folder.mkdir(parents=True)
    return Node(node_id, _free_port(), _free_port(), str(folder))


def _cluster_id() -> str:
    """A new cluster id as Kafka writes them: 16 random bytes in URL-safe base64, unpadded (Kafka
    refuses ids that begin with '-', which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        pytest.fail("no java for Apache Kafka: apt-get install openjdk-17-jdk-headless (scripts/test does)")
    return java


def _class_path() -> str:
    return ":".join(map(str, class_path(BROKER_JARS)))


def _write_properties(nodes: list[Node], extra: dict[str, str]) -> None:
    voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}" for node in nodes)
    for node in nodes:
        settings = {
            **COMMON_SETTINGS,
            **extra,
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{node.address},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{node.address}",
            "log.dirs": str(pathlib.Path(node.folder) / "data"),
        }
        if node.internal_port:  # a SASL node: clients on SASL_PLAINTEXT, its own traffic on PLAINTEXT
            internal = f"PLAINTEXT://127.0.0.1:{node.internal_port}"
            settings["listeners"] = (
                f"{internal},SASL_PLAINTEXT://{node.address},CONTROLLER://127.0.0.1:{node.controller_port}"
            )
            settings["advertised.listeners"] = f"{internal},SASL_PLAINTEXT://{node.address}"
        node.properties_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        (pathlib.Path(node.folder) / "log4j2.properties").write_text(LOG4J2)


def _jvm(node: Node) -> list[str]:
    log4j = pathlib.Path(node.folder) / "log4j2.properties"
    return [_java(), HEAP, f"-Dlog4j2.configurationFile={log4j}", "-Djava.awt.headless=true", "-cp", _class_path()]


def _format(nodes: list[Node], arguments: list[str]) -> None:
    """Format every node's log folder with one new cluster id (Kafka's StorageTool, in parallel),
    with these further ``arguments`` (``--add-scram``)."""
    cluster_id = _cluster_id()
    formats = [
        subprocess.Popen(
            [
                *_jvm(node),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(node.properties_path),
                *arguments,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for node in nodes
    ]
    for node, process in zip(nodes, formats, strict=True):
        output, _ = process.communicate(timeout=START_TIMEOUT)
        if process.returncode != 0:
            raise AssertionError(
                f"formatting node {node.node_id}'s log folder failed ({process.returncode}):\n{output.decode()}"
            )


def _launch(node: Node) -> int:
    """Start the node's JVM, detached (the run's main process stops it, not the worker that started
    it), with its watchdog; its pid."""
    command = [*_jvm(node), "kafka.Kafka", str(node.properties_path)]
    with node.log_path.open("ab") as log:
        jvm = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    # Not waited for here: the process outlives this worker. Popen would warn when collected while
    # the JVM runs, so its bookkeeping is dropped; the pid is what the run's state keeps.
    jvm.returncode = 0
    owner = os.environ.get(OWNER_VARIABLE, str(os.getpid()))
    run_folder = os.environ.get(RUN_VARIABLE, node.folder)
    watchdog = subprocess.Popen(
        [sys.executable, str(WATCHDOG), owner, str(jvm.pid), run_folder],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    watchdog.returncode = 0
    return jvm.pid


def _bootstrap(nodes: list[Node]) -> str:
    return ",".join(node.address for node in nodes)


def _start(
    nodes: list[Node], extra: dict[str, str], then: Callable[[Node], None], format_arguments: list[str] | None = None
) -> list[Node]:
    """Format (with ``format_arguments``) and start ``nodes`` as one cluster, wait until each logs
    that it serves, then for ``then(first node)``; nodes that do not get so far are killed."""
    _write_properties(nodes, extra)
    _format(nodes, format_arguments or [])
    for node in nodes:
        node.pid = _launch(node)
    try:
        for node in nodes:
            _wait_started(node, 1)
        then(nodes[0])
    except BaseException:
        for node in nodes:
            _kill_and_wait(node.pid, signal.SIGKILL, STOP_TIMEOUT)
        raise
    return nodes


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _process_state(pid) != "Z"


def _process_state(pid: int) -> str:
    """The process's state letter from /proc (``Z`` for a zombie), or ``""`` if it is gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def _log_tail(node: Node, lines: int = 30) -> str:
    try:
        text = node.log_path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _wait_started(node: Node, starts: int) -> None:
    """Until the node's log has said ``STARTED`` ``starts`` times."""

    def started() -> bool:
        return node.log_path.exists() and node.log_path.read_text(errors="replace").count(STARTED) >= starts

    _wait_logged(node, started, repr(STARTED))


def _wait_logged(node: Node, condition: Callable[[], bool], what: str) -> None:
    """Until ``condition()`` holds, looked at again whenever the node writes its log (inotify) and
    woken by the JVM's exit: an exit or the timeout fails with the log's path and tail."""
    deadline = time.monotonic() + START_TIMEOUT
    with contextlib.ExitStack() as stack:
        inotify = stack.enter_context(Inotify())
        inotify.add_watch(node.folder, Mask.MODIFY | Mask.CREATE)
        pidfd = os.pidfd_open(node.pid)
        stack.callback(os.close, pidfd)
        while not condition():
            if not _alive(node.pid):
                raise AssertionError(
                    f"Apache Kafka node {node.node_id} exited while starting; its log, {node.log_path}, ends:\n"
                    + _log_tail(node)
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"Apache Kafka node {node.node_id} did not show {what} within {START_TIMEOUT:.0f} s; "
                    f"its log, {node.log_path}, ends:\n" + _log_tail(node)
                )
            ready, _, _ = select.select([inotify.fd, pidfd], [], [], remaining)
            if inotify.fd in ready:
                os.read(inotify.fd, 65536)  # which write does not matter: the condition decides


def _wait_listed(bootstrap: str, node_ids: set[int]) -> None:
    """Until a metadata request answers with every broker of ``node_ids``; each try is a request
    that waits for its answer (no sleeping between them)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + START_TIMEOUT
    listed: set[int] = set()
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # KafkaException while a node is not yet reachable
            listed = set(admin.list_topics(timeout=5).brokers)
            if node_ids <= listed:
                return
    raise AssertionError(f"Kafka's metadata listed brokers {sorted(listed)}, not all of {sorted(node_ids)}")


def _wait_group_coordinator(node: Node) -> None:
    """Until the node coordinates groups. Its first group request creates the offsets topic (50
    partitions), and until they are loaded a commit fails with NOT_COORDINATOR, which librdkafka
    does not retry. Each try is a committed() request, made again whenever the node writes its log
    (as it does while it creates and loads the partitions)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    group = {"bootstrap.servers": node.address, "group.id": "adiskq-tests-warm-up", "log_level": 0}
    consumer = Consumer(group)
    failures: list[str] = []

    def coordinated() -> bool:
        try:
            consumer.committed([TopicPartition("adiskq-tests-warm-up", 0)], timeout=30)
        except KafkaException as error:
            failures[:] = [str(error)]
            return False
        return True

    try:
        _wait_logged(node, coordinated, f"a group coordinator (last answer: {failures})")
    finally:
        consumer.close()
    _wait_producer_ids(node)


def _wait_producer_ids(node: Node) -> None:
    """Until the node hands out producer ids: InitProducerId, even without a transactional id, goes
    through the transaction coordinator, which answers COORDINATOR_LOAD_IN_PROGRESS until its state
    topic is made and loaded. An idempotent librdkafka producer retries it until it has an id."""
    from confluent_kafka import Producer

    failures: list[str] = []
    producer = Producer({"bootstrap.servers": node.address, "enable.idempotence": True, "log_level": 0})
    producer.produce("adiskq-tests-warm-up", b"", on_delivery=lambda error, _: failures.append(str(error or "")))
    left = producer.flush(START_TIMEOUT)
    if left or any(failures):
        raise AssertionError(f"Apache Kafka at {node.address} did not take an idempotent write: {failures or left}")


def _kill_and_wait(pid: int, how: signal.Signals, timeout: float) -> None:
    """Send ``how`` to ``pid`` (if still there) and wait for it to end; SIGKILL once ``timeout`` is up."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, how)
        if not _ended(pid, pidfd, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _ended(pid, pidfd, timeout)
    finally:
        os.close(pidfd)
    with contextlib.suppress(ChildProcessError):  # reap it where this process is its parent
        os.waitpid(pid, os.WNOHANG)


def _ended(pid: int, pidfd: int, timeout: float) -> bool:
    ready, _, _ = select.select([pidfd], [], [], timeout)
    return bool(ready) or not _alive(pid)
