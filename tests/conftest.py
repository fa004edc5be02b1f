"""Shared fixtures: every async test runs on asyncio and on Trio (anyio's pytest plugin)."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

# scripts/sanitize runs the property tests under AddressSanitizer, several times slower than a plain
# run: there a case's time says nothing about the code, so no deadline (on a busy machine the 200 ms
# default failed cases that passed alone), and a third of the examples (the plain run tries 100).
settings.register_profile("sanitize", deadline=None, max_examples=30)
# Everywhere else no deadline either: the suite judges behaviour, never time (benchmarks do), and
# on two cores shared with the suite's other worker a case that takes 200 ms says nothing either.
# (`--hypothesis-profile=sanitize` on the command line still takes its place.)
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# pytest-xdist's workers (scripts/test runs the suite on two) are given COLUMNS=80 and LINES=24 for
# their own output. The command line's tables, written to a pipe or file, keep their natural width
# unless COLUMNS says otherwise: the tests judge them as a user's pipe gets them, on one worker or many.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

# The folders whose files take longest (processes killed and restarted, a JVM, real clients) run first:
# scripts/test hands whole files to two workers in the order collected, and a long file taken last
# leaves one worker running alone at the end.
_LONG_FIRST = ("torture", "spark", "kafka", "examples", "benchmarks", "fuzz")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Collected tests, the long-running folders' first, each file's in its own order."""

    def rank(item: pytest.Item) -> int:
        parts = pathlib.Path(str(item.path)).parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts[:-1] else ""
        return _LONG_FIRST.index(folder) if folder in _LONG_FIRST else len(_LONG_FIRST)

    items.sort(key=rank)


if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from support.backends import Where
    from support.faults import DiskFaults
    from support.kafka_broker import KafkaBroker, KafkaCluster, KafkaSaslBroker


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Both backends, for every test marked ``anyio``."""
    return str(request.param)


@pytest.fixture
def stream_path(tmp_path: pathlib.Path) -> str:
    """A path where no stream exists yet."""
    return os.fspath(tmp_path / "stream")


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> DiskFaults:
    """Write-fault injection (writes or fdatasync to chosen files fail) for the duration of one test."""
    from support.faults import DiskFaults

    return DiskFaults(monkeypatch)


@pytest.fixture
def shared_dir() -> Iterator[str]:
    """A folder every user can traverse (pytest's own tmp folders are private to their owner)."""
    path = tempfile.mkdtemp(prefix="adiskq-perm-")
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    """One local Spark session (``local[2]``) shared by every Spark test, with ``adiskq`` registered
    and Spark's own Kafka connector on its class path (``format("kafka")``).

    Starting Spark and its Python workers takes seconds, so the whole suite shares one session; jars
    are given to a session only when it starts, so the connector's are given to this one. Missing
    Java, pyspark or the connector's jars makes these tests fail, never skip: CI must run them.
    """
    import sys

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import pyspark
    from pyspark.sql import SparkSession
    from support.kafka_jars import class_path, pinned_sets

    import adiskq.spark

    # The connector works only at exactly the PySpark version it was built with.
    connector = f"spark-kafka-{pyspark.__version__}"
    if connector not in pinned_sets():
        pytest.fail(
            f"no Kafka connector pinned for PySpark {pyspark.__version__}: pin "
            f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__} in tests/kafka/jars.txt "
            "(scripts/fetch_kafka_jars.py --pin), or install the PySpark version pyproject.toml names"
        )
    session = (
        SparkSession.builder.master("local[2]")
        .appName("adiskq-tests")
        .config("spark.jars", ",".join(str(jar) for jar in class_path(connector)))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    adiskq.spark.register(session)
    return session


# --- Apache Kafka itself: the reference the gateway's differential tests compare with -------------
# One node (and, for the tests that need replication, a three-node cluster) per test run, shared by
# pytest-xdist's workers through a run folder that the main process makes here and cleans up after
# every worker is done (tests/support/kafka_broker.py).


def pytest_configure(config: pytest.Config) -> None:
    """The main process (not an xdist worker) names a run folder for the run's Kafka nodes."""
    if not hasattr(config, "workerinput"):
        from support import kafka_broker as kafka_broker_support

        kafka_broker_support.claim_run_folder()


def pytest_unconfigure(config: pytest.Config) -> None:
    """The main process stops the run's Kafka nodes, once every worker has finished."""
    if not hasattr(config, "workerinput"):
        from support import kafka_broker as kafka_broker_support

        kafka_broker_support.release_run_folder()


@pytest.fixture(scope="session")
def kafka_broker() -> KafkaBroker:
    """Apache Kafka, one KRaft node (id 0) on loopback: ``.bootstrap``, ``.log_path``. Started by the
    first test of the run that asks, shared by every worker, stopped when the run ends."""
    from support import kafka_broker as kafka_broker_support

    return kafka_broker_support.shared_broker()


@pytest.fixture(scope="session")
def kafka_sasl_broker() -> KafkaSaslBroker:
    """A second Apache Kafka node, only for the tests that compare SASL and the per-address
    connection limit: a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, one user), a
    failed login answered after ``.failed_delay_ms``, and ``max.connections.per.ip`` of
    ``.per_address_limit`` for connections from ``.limited_address``. Started by the first test of
    the run that asks, shared by every worker, stopped when the run ends."""
    from support import kafka_broker as kafka_broker_support

    return kafka_broker_support.shared_sasl_broker()


@pytest.fixture(scope="session")
def kafka_cluster() -> KafkaCluster:
    """Apache Kafka, three KRaft nodes (ids 1, 2, 3) on loopback, replication factor 3 and
    min.insync.replicas 2: ``.bootstrap``, ``.kill(node_id)``, ``.restart(node_id)``. Started only when
    a test asks for it."""
    from support import kafka_broker as kafka_broker_support

    return kafka_broker_support.shared_cluster()


# --- one test, two backends: a local stream and a topic of the suite's Apache Kafka ---------------
# (tests/support/backends.py; README's "Moving to a cluster" has the capability table saying what maps)


@pytest.fixture(params=["local", "kafka"])
def where(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Where:
    """Each test that takes it runs once on a local stream and once on Kafka (``kafka_broker``):
    ``where.new()`` is a fresh stream path or ``kafka://`` topic URL."""
    from support.backends import Where

    bootstrap = request.getfixturevalue("kafka_broker").bootstrap if request.param == "kafka" else None
    return Where(request.param, tmp_path, bootstrap)
