"""Transactions as the Java client (3.9 and 4.3) sees them, on the gateway and on Apache Kafka
(differential.py): each scenario of ``java/TransactionalScenarios.java`` prints one line per
observation — send offsets, what ``read_committed`` and ``read_uncommitted`` consumers read up to
their end offsets, ListOffsets' last stable offset and high watermark, the group's committed offsets,
the exceptions of a fenced or timed-out producer — and the lines must be the same on both sides.

The 4.x client uses Kafka 4's transaction version 2 (KIP-890) where the broker's ApiVersions lists
it (Kafka 4.4 does), the 3.x client version 1: a broker must serve both alike.
"""

from __future__ import annotations

import pathlib

import pytest
from differential import Differential, Side
from java_support import compile_client, run_client

CLIENTS = ["3.9.0", "4.3.0"]

# scenario -> the lines Kafka's run prints (what the scenario pins, beyond agreeing with the gateway)
EXPECTED = {
    "commit-abort-open": [
        "produced 0 0 a0",
        "produced 0 1 a1",
        "produced 0 3 b0",
        "produced 0 5 c0",
        "produced 0 6 c1",
        "while-open read_committed read [t/0@0=a0, t/0@1=a1] ends [5]",
        "while-open read_uncommitted read [t/0@0=a0, t/0@1=a1, t/0@3=b0, t/0@5=c0, t/0@6=c1] ends [7]",
        "after-commit read_committed read [t/0@0=a0, t/0@1=a1, t/0@5=c0, t/0@6=c1] ends [8]",
        "after-commit read_uncommitted read [t/0@0=a0, t/0@1=a1, t/0@3=b0, t/0@5=c0, t/0@6=c1] ends [8]",
    ],
    "fencing": [
        "zombie-produced 0 0 zombie",
        "fresh-produced 0 2 fresh",
        "zombie-commit ProducerFencedException caused-by ProducerFencedException",
        "after read_committed read [t/0@2=fresh] ends [4]",
        "after read_uncommitted read [t/0@0=zombie, t/0@2=fresh] ends [4]",
    ],
    "consume-transform-produce": [
        "input 0 0 a",
        "input 0 1 b",
        "input 0 2 c",
        "output 0 0 A",
        "output 0 1 B",
        "output 0 2 C",
        "round 1 read [a, b, c] committed 3",
        "input 0 3 d",
        "input 0 4 e",
        "output 0 4 D",
        "output 0 5 E",
        "round 2 read [d, e] committed 3",
        "sink read_committed read [out/0@0=A, out/0@1=B, out/0@2=C] ends [7]",
        "sink read_uncommitted read [out/0@0=A, out/0@1=B, out/0@2=C, out/0@4=D, out/0@5=E] ends [7]",
    ],
    "timeout": [
        "produced 0 0 h0",
        "produced 0 1 h1",
        "ends-while-open [0] [2]",
        "produced 0 3 after",
        "after read_committed read [t/0@3=after] ends [5]",
        "after read_uncommitted read [t/0@0=h0, t/0@1=h1, t/0@3=after] ends [5]",
    ],
    "many-partitions": [
        "all read_committed read [narrow/0@0=one-0, narrow/1@0=one-1, narrow/1@4=three, wide/0@0=one-0,"
        " wide/1@0=one-1, wide/2@0=one-2, wide/3@0=one-3, wide/4@0=one-4, wide/5@0=one-5]"
        " ends [4, 4, 4, 4, 4, 4, 4, 6]",
    ],
}


@pytest.fixture(scope="module", params=CLIENTS)
def java_client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[pathlib.Path]]:
    """(client version, class path of the compiled TransactionalScenarios) for each client version."""
    version = str(request.param)
    return version, compile_client(version, tmp_path_factory.mktemp(f"java-txn-{version}"), "TransactionalScenarios")


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_java_transactions_as_on_kafka(
    differential: Differential,
    java_client: tuple[str, list[pathlib.Path]],
    scenario: str,
) -> None:
    """The scenario's lines are the same on both sides, and Kafka's include the expected ones.
    The timed-out producer's late commit is compared without being pinned: how the client reports
    the coordinator's abort differs between its versions."""
    _, cp = java_client

    def run(side: Side) -> list[str]:
        return run_client(cp, side.bootstrap, side.prefix, scenario, program="TransactionalScenarios")

    lines = differential.compare(run)
    missing = [line for line in EXPECTED[scenario] if line not in lines]
    assert not missing, f"Kafka's run did not print {missing}; it printed {lines}"
