"""Consumer groups of real clients in several processes: partitions split, a killed member taken over."""

from __future__ import annotations

import pathlib

import pytest
from confluent_kafka import Producer
from group_support import MemberProcess, bootstrap, running_gateway, wait_for

PARTITIONS = 4


def produce(servers: str, topic: str, values: list[str]) -> None:
    """Produce the values round-robin over the topic's partitions and wait for every ack."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def split(members: list[MemberProcess]) -> bool:
    """True when the members, all alive, hold every partition exactly once."""
    for member in members:
        member.check_alive()
    held = [p for m in members for p in m.assignment]
    return sorted(held) == list(range(PARTITIONS))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_members_split_partitions_and_take_over_from_killed_one(
    tmp_path: pathlib.Path, backend: str, strategy: str
) -> None:
    """Three consumer processes share four partitions; SIGKILL one and the others take its partitions
    and read everything, from the killed member's last commit on."""
    with running_gateway(str(tmp_path), backend, partitions=PARTITIONS) as gateway:
        servers = bootstrap(gateway)
        first = [f"a{i}" for i in range(40)]
        produce(servers, "orders", first)
        members = [MemberProcess(servers, "orders", "billing", strategy) for _ in range(3)]
        try:
            wait_for(
                lambda: split(members) and all(m.assignment for m in members),
                members,
                what="three members sharing the partitions",
            )
            victim = max(members, key=lambda m: len(m.assignment))
            victim.drain(0)
            victim.kill()
            survivors = [m for m in members if m is not victim]
            wait_for(lambda: split(survivors), survivors, what="the survivors taking over")
            second = [f"b{i}" for i in range(40)]
            produce(servers, "orders", second)
            everything = {v.encode() for v in first + second}
            wait_for(
                lambda: everything <= set().union(*(m.values for m in members)),
                survivors,
                what="every message read",
            )
        finally:
            for member in members:
                member.stop()
