"""The Java Kafka client (3.x and 4.x, the official jars) against the gateway on each backend.

One run of ``java/KafkaJavaClient.java`` per client version: the AdminClient creates, lists,
describes and deletes topics; a producer with the client's defaults (acks=all, idempotent) writes
keyed records with a header, compressed; the AdminClient lists offsets; a consumer group
subscribes, polls and commits; the AdminClient describes the group and its offsets. The
gateway must answer every request the client sends: a request it does not serve fails the test.
"""

from __future__ import annotations

import logging
import pathlib
from collections import defaultdict
from typing import Any

import pytest
from differential import Differential, Side
from java_support import compile_client, run_client

from adiskq.kafka._registry import API_TABLE

COUNT = 40
FIRST_TIMESTAMP = 1_700_000_000_000  # record i is stamped FIRST_TIMESTAMP + (i * 7919) % COUNT
# client version -> the compression its producer uses (each codec is the client's own, in Java)
CLIENTS = {"3.9.0": "lz4", "4.3.0": "zstd"}
# client version -> {API key: the version it sends}: the newest both it and the gateway speak
VERSIONS = {
    "3.9.0": {0: 11, 1: 16, 2: 9, 3: 12},  # Produce, Fetch (topic ids), ListOffsets, Metadata
    "4.3.0": {0: 12, 1: 16, 2: 10, 3: 13},
}


@pytest.fixture
def versions_sent(monkeypatch: pytest.MonkeyPatch) -> dict[int, set[int]]:
    """API key -> the versions clients sent it in, recorded by the gateway's handlers for the test."""
    sent: dict[int, set[int]] = defaultdict(set)
    for key, api in list(API_TABLE.items()):

        async def recording(context: Any, request: Any, handler: Any = api.handler) -> Any:
            sent[context.header.api_key].add(context.header.api_version)
            return await handler(context, request)

        def recording_now(context: Any, request: Any, now: Any = api.now) -> Any:
            sent[context.header.api_key].add(context.header.api_version)
            return now(context, request)

        monkeypatch.setitem(
            API_TABLE, key, api._replace(handler=recording, now=None if api.now is None else recording_now)
        )
    return sent


@pytest.fixture(scope="module", params=sorted(CLIENTS))
def java_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list]:
    """(client version, class path of the compiled test program) for each Java client version."""
    version = str(request.param)
    return version, compile_client(version, tmp_path_factory.mktemp(f"java-{version}"))


def test_java_client_admin_produce_and_group_consume(
    gateway,
    java_client: tuple[str, list[pathlib.Path]],
    caplog: pytest.LogCaptureFixture,
    versions_sent: dict[int, set[int]],
) -> None:
    """The Java client creates, lists, describes and deletes topics, produces idempotently with
    acks=all, lists offsets by every spec (the largest timestamp among them), a group consumer reads
    every record and commits its offsets, and the AdminClient lists, describes the group and its
    offsets: in the newest versions, none refused."""
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

    for key, expected in VERSIONS[version].items():
        assert versions_sent[key] == {expected}, (key, versions_sent[key])

    produced: dict[int, list[int]] = defaultdict(list)
    stamps: dict[int, dict[int, int]] = defaultdict(dict)  # partition -> offset -> timestamp
    for i, line in enumerate(line for line in lines if line.startswith("produced ")):
        partition, offset, timestamp = map(int, line.split()[1:])
        assert timestamp == FIRST_TIMESTAMP + (i * 7919) % COUNT
        produced[partition].append(offset)
        stamps[partition][offset] = timestamp
    assert sum(map(len, produced.values())) == COUNT
    for offsets in produced.values():
        assert sorted(offsets) == list(range(len(offsets)))  # each acknowledged once, no gap

    listed = {
        (int(partition), spec): (int(offset), int(timestamp))
        for partition, spec, offset, timestamp in (line.split()[1:] for line in lines if line.startswith("offsets "))
    }
    for partition, by_offset in stamps.items():
        newest = max(by_offset.values())
        after = [offset for offset in sorted(by_offset) if by_offset[offset] >= FIRST_TIMESTAMP + 10]
        assert listed[partition, "earliest"][0] == 0
        assert listed[partition, "latest"][0] == len(by_offset)
        assert listed[partition, "max-timestamp"] == (min(o for o, t in by_offset.items() if t == newest), newest)
        assert listed[partition, "earliest-local"][0] == 0
        assert listed[partition, "latest-tiered"] == (-1, -1)  # no tiered storage
        assert listed[partition, "for-timestamp"] == (after[0], by_offset[after[0]])

    consumed = [line.split()[1:] for line in lines if line.startswith("consumed ")]
    assert sorted((key, value, n) for _, _, key, value, n in consumed) == sorted(
        (f"key-{i}", f"value-{i}", str(i)) for i in range(COUNT)
    )
    for partition, offset, *_ in consumed:
        assert int(offset) in produced[int(partition)]
    committed = {int(p): int(o) for p, o in (line.split()[1:] for line in lines if line.startswith("committed "))}
    assert committed == {partition: len(offsets) for partition, offsets in produced.items()}
    assert "group true 0" in lines  # listed, and no member left once the consumer closed
    group_offsets = {
        int(p): int(o) for p, o in (line.split()[1:] for line in lines if line.startswith("group-offset "))
    }
    assert group_offsets == committed


def test_java_client_sees_the_gateway_as_kafka(
    differential: Differential, java_client: tuple[str, list[pathlib.Path]]
) -> None:
    """The same program against Apache Kafka: every line it prints — admin answers, each record's
    partition, offset and timestamp, every ListOffsets answer, what the group consumed and committed,
    the group's description and offsets — is the same as against the gateway (the acknowledgements
    in order; the rest as a set: two partitions' records interleave as their fetches return, and
    the program prints its maps of partitions in an order that depends on the topic's name)."""
    version, cp = java_client

    def scenario(side: Side) -> dict[str, list[str]]:
        lines = run_client(cp, side.bootstrap, side.name(), side.name("g"), CLIENTS[version], str(COUNT))
        produced = [line for line in lines if line.startswith("produced ")]
        return {"produced, in order": produced, "the rest": sorted(set(lines) - set(produced))}

    differential.compare(scenario)
