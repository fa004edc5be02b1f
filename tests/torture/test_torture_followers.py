"""A producer killed again and again while consumers and a named group follow it in other processes:
nothing acknowledged is lost, nothing is duplicated, no gap, committed offsets stay valid."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import anyio
import pytest
from test_producer_crash import ROOT, run_and_kill

import adiskq
from adiskq._sansio.naming import partition_for_key
from adiskq._storage.offsets import load_offsets

PARTITIONS = 3  # as tests.support.crash_producer makes the stream
ROUNDS = 5


def start_follower(path: str, backend: str, output: str, *args: str) -> subprocess.Popen[str]:
    """A follower process noting what it reads in `output`, once it says it is reading."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.follower", path, backend, output, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def finish(process: subprocess.Popen[str], timeout: float) -> None:
    """Wait for a follower to end (it stops by itself after the STOP messages)."""
    process.wait(timeout=timeout)
    assert process.stdout is not None
    process.stdout.close()


def lines_of(path: str) -> list[tuple[str, ...]]:
    """The complete lines a follower noted (a killed one may have torn its last), split in fields."""
    with open(path) as file:
        text = file.read()
    return [tuple(line.split(" ", 2)) for line in text[: text.rfind("\n") + 1].splitlines()]


def stop_key(partition: int) -> bytes:
    """A key that lands on `partition`."""
    return next(b"stop-%d" % i for i in range(10_000) if partition_for_key(b"stop-%d" % i, PARTITIONS) == partition)


async def push_stops(path: str) -> None:
    async with adiskq.Producer(path) as producer:
        for partition in range(PARTITIONS):
            await producer.push(b"STOP-%d" % partition, key=stop_key(partition))


async def create(path: str) -> None:
    async with adiskq.Producer(path, partitions=PARTITIONS, segment_size_bytes=8192):
        pass


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_followers_in_other_processes_survive_producer_kills(tmp_path: object, backend: str) -> None:
    """Consumers see every message once, in order, across many producer kills; a named group killed
    midway resumes from its commits and sees every message at least once."""
    stream_path = os.path.join(str(tmp_path), "stream")
    outputs = [os.path.join(str(tmp_path), f"follower-{i}.txt") for i in range(PARTITIONS + 1)]
    anyio.run(create, stream_path)
    followers = [start_follower(stream_path, backend, outputs[p], "consumer", str(p)) for p in range(PARTITIONS)]
    group = ("group", "billing", str(PARTITIONS))
    followers.append(start_follower(stream_path, backend, outputs[-1], *group))
    rng = random.Random(backend)
    acknowledged: dict[tuple[int, int], str] = {}
    try:
        for round_ in range(ROUNDS):
            for line in run_and_kill(stream_path, "async", backend, round_, rng.randint(50, 400)):
                partition, offset, value = line.split()
                acknowledged[(int(partition), int(offset))] = value
            if round_ == ROUNDS // 2:  # the group's process dies too, and a new member takes over
                followers[-1].kill()
                finish(followers[-1], 30)
                followers[-1] = start_follower(stream_path, backend, outputs[-1], *group)
        anyio.run(push_stops, stream_path)
        for follower in followers:
            finish(follower, 120)
    finally:
        for follower in followers:
            follower.kill()
            follower.wait()
    stored = {
        (str(p.partition), str(offset)): adiskq.read(stream_path, p.partition, offset).value.decode()
        for p in adiskq.stats(stream_path).partitions
        for offset in range(p.next_offset)
    }
    assert all(stored.get((str(p), str(o))) == value for (p, o), value in acknowledged.items()), "a push was lost"
    everything = sorted((p, o, v) for (p, o), v in stored.items())
    for partition in range(PARTITIONS):
        expected = sorted((e for e in everything if e[0] == str(partition)), key=lambda e: int(e[1]))
        assert lines_of(outputs[partition]) == expected, (
            f"the consumer of {partition} saw a gap, a duplicate or wrong bytes"
        )
    group_seen = lines_of(outputs[-1])
    assert set(group_seen) == set(everything)
    assert max(group_seen.count(entry) for entry in set(group_seen)) <= 2, "redelivered more than once"
    next_offsets = {p.partition: p.next_offset for p in adiskq.stats(stream_path).partitions}
    assert load_offsets(stream_path, "billing") == next_offsets
