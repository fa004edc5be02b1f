"""Crash torture with several writers: four shared producers in their own processes push to one
stream (small segments, so rolls happen, several partitions) while random ones are SIGKILLed and
restarted, round after round, and a consumer and a named group follow in other processes.

Every acknowledged message reads back once at its offset, offsets stay contiguous, nothing is
stored twice, no writer is left listed (no stale lock), and the followers read every message once.
A few rounds run in the normal suite; ``-m slow`` runs many.
"""

from __future__ import annotations

import os
import random

import anyio
import pytest
from support import shared as shared_support
from test_torture_followers import PARTITIONS, finish, lines_of, push_stops, start_follower

from adiskq._storage.stream import StreamWriter

WRITERS = 4


def torture(tmp_path: str, flush: str, rounds: int, seed: str) -> None:
    rng = random.Random(seed)
    stream_path = os.path.join(tmp_path, "stream")
    StreamWriter.open(stream_path, partitions=PARTITIONS, segment_size_bytes=4096, shared=True).close()
    outputs = [os.path.join(tmp_path, "consumer.txt"), os.path.join(tmp_path, "group.txt")]
    followers = [
        start_follower(stream_path, "trio", outputs[0], "consumer", "0"),
        start_follower(stream_path, "asyncio", outputs[1], "group", "torture", str(PARTITIONS)),
    ]
    acknowledged: dict[tuple[int, int], bytes] = {}
    incarnation = 0

    def start(slot: int, round_: int) -> shared_support.Writer:
        nonlocal incarnation
        incarnation += 1
        backend = "asyncio" if (slot + incarnation) % 2 else "trio"
        return shared_support.Writer(stream_path, flush, backend, f"r{round_}w{slot}i{incarnation}")

    try:
        for round_ in range(rounds):
            writers = [start(slot, round_) for slot in range(WRITERS)]
            lines: list[str] = []
            for _ in range(rng.randint(2, 5)):  # kill a random writer after a random number of pushes
                slot = rng.randrange(WRITERS)
                victim = writers[slot]
                victim.wait_for_lines(len(victim.lines) + rng.randint(1, 150))
                lines += victim.kill()
                writers[slot] = start(slot, round_)
            for writer in writers:
                writer.wait_for_lines(rng.randint(1, 60))
            for writer in writers:
                lines += writer.kill()
            for key, value in shared_support.receipts(lines).items():
                assert key not in acknowledged, f"offset {key} acknowledged in two rounds"
                acknowledged[key] = value
            shared_support.check_stream(stream_path, acknowledged)
        anyio.run(push_stops, stream_path)
        for follower in followers:
            finish(follower, timeout=120)
        # Read after the stops: that producer's open indexed whole records a killed writer had not.
        everything = shared_support.check_stream(stream_path, acknowledged)
        stored = {key: value for key, value in everything.items() if not value.startswith(b"STOP")}
    finally:
        for follower in followers:
            if follower.poll() is None:
                follower.kill()
                follower.wait()
    consumer = [(int(p), int(o), v) for p, o, v in lines_of(outputs[0])]
    expected = sorted((p, o, v.decode()) for (p, o), v in stored.items() if p == 0)
    assert consumer[:-1] == expected  # every message of partition 0, in order, once (then STOP)
    group = [(int(p), int(o)) for p, o, _ in lines_of(outputs[1]) if not _.startswith("STOP")]
    assert len(group) == len(set(group)) == len(stored)  # every message once


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_killed_shared_writers_lose_nothing_acknowledged(tmp_path: object, flush: str) -> None:
    """Two rounds of random SIGKILLs among four shared writers (the sample of the normal run)."""
    torture(str(tmp_path), flush, rounds=2, seed=f"sample-{flush}")


@pytest.mark.slow
@pytest.mark.parametrize("flush", ["async", "sync"])
def test_killed_shared_writers_lose_nothing_acknowledged_full(tmp_path: object, flush: str) -> None:
    """Many rounds of random SIGKILLs among four shared writers."""
    torture(str(tmp_path), flush, rounds=15, seed=f"full-{flush}")
