"""The Java Kafka client (3.x and 4.x, the official jars) against the gateway on each backend.

One run of ``java/KafkaJavaClient.java`` per client version: the AdminClient creates, lists,
describes and deletes topics; a producer with the client's defaults (acks=all, idempotent) writes
keyed records with a header, compressed; a consumer group subscribes, polls and commits. The
gateway must answer every request the client sends: a request it does not serve fails the test.
"""

from __future__ import annotations

import logging
import pathlib
from collections import defaultdict

import pytest
from java_support import compile_client, run_client

COUNT = 40
# client version -> the compression its producer uses (each codec is the client's own, in Java)
CLIENTS = {"3.9.0": "lz4", "4.3.0": "zstd"}


@pytest.fixture(scope="module", params=sorted(CLIENTS))
def java_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list]:
    """(client version, class path of the compiled test program) for each Java client version."""
    version = str(request.param)
    return version, compile_client(version, tmp_path_factory.mktemp(f"java-{version}"))


def test_java_client_admin_produce_and_group_consume(
    gateway, java_client: tuple[str, list[pathlib.Path]], caplog: pytest.LogCaptureFixture
) -> None:
    """The Java client creates, lists, describes and deletes topics, produces idempotently with
    acks=all, and a group consumer reads every record and commits its offsets, with no request the
    gateway refuses."""
    version, cp = java_client
    topic = f"java-{version.replace('.', '-')}-{gateway.backend}"
    with caplog.at_level(logging.INFO, logger="adiskq.kafka"):
        lines = run_client(cp, gateway.bootstrap, topic, f"group-{topic}", CLIENTS[version], str(COUNT))
    refused = [r.getMessage() for r in caplog.records if "does not serve" in r.getMessage()]
    assert not refused, refused
    assert "listed true true" in lines
    assert "config cleanup.policy delete" in lines
    assert "partitions 2" in lines
    assert "after delete true false" in lines

    produced: dict[int, list[int]] = defaultdict(list)
    for line in lines:
        if line.startswith("produced "):
            partition, offset = map(int, line.split()[1:])
            produced[partition].append(offset)
    assert sum(map(len, produced.values())) == COUNT
    for offsets in produced.values():
        assert sorted(offsets) == list(range(len(offsets)))  # each acknowledged once, no gap

    consumed = [line.split()[1:] for line in lines if line.startswith("consumed ")]
    assert sorted((key, value, n) for _, _, key, value, n in consumed) == sorted(
        (f"key-{i}", f"value-{i}", str(i)) for i in range(COUNT)
    )
    for partition, offset, *_ in consumed:
        assert int(offset) in produced[int(partition)]
    committed = {int(p): int(o) for p, o in (line.split()[1:] for line in lines if line.startswith("committed "))}
    assert committed == {partition: len(offsets) for partition, offsets in produced.items()}
