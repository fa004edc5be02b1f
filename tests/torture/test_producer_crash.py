"""Crash tests with real processes: a producer killed with SIGKILL loses nothing it acknowledged."""

from __future__ import annotations

import random

import pytest
from support import crash as crash_support

import adiskq

ROUNDS = 8
ROOT = crash_support.ROOT


def run_and_kill(path: str, flush: str, backend: str, round_: int, lines_before_kill: int) -> list[str]:
    """Start a pushing producer, let it acknowledge some pushes, SIGKILL it; return its receipts."""
    return crash_support.run_and_kill(
        "tests.support.crash_producer", [path, flush, backend, str(round_)], lines_before_kill
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("flush", ["sync", "async"])
def test_sigkilled_producer_loses_nothing_it_acknowledged(stream_path: str, flush: str, backend: str) -> None:
    """Over many kill rounds: every receipt reads back, offsets are contiguous, nothing is duplicated."""
    rng = random.Random(f"{flush}-{backend}")
    acknowledged: dict[tuple[int, int], bytes] = {}
    for round_ in range(ROUNDS):
        for line in run_and_kill(stream_path, flush, backend, round_, rng.randint(1, 400)):
            partition, offset, value = line.split()
            key = (int(partition), int(offset))
            assert key not in acknowledged, f"offset {key} acknowledged twice"
            acknowledged[key] = value.encode()
        stats = adiskq.stats(stream_path)
        assert stats.owner is None  # the kill left no stale lock
        seen: set[bytes] = set()
        for partition in stats.partitions:
            assert partition.oldest_offset == 0
            for offset in range(partition.next_offset):  # contiguous: every offset reads back
                message = adiskq.read(stream_path, partition.partition, offset)
                assert message.value not in seen, "a message was stored twice"
                seen.add(message.value)
                expected = acknowledged.get((partition.partition, offset))
                assert expected is None or message.value == expected
        missing = {key for key in acknowledged if adiskq.read(stream_path, *key).value != acknowledged[key]}
        assert not missing
