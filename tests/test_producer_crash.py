"""Crash tests with real processes: a producer killed with SIGKILL loses nothing it acknowledged."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest

import adiskq

ROUNDS = 8
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_and_kill(path: str, flush: str, backend: str, round_: int, lines_before_kill: int) -> list[str]:
    """Start a pushing producer, let it acknowledge some pushes, SIGKILL it; return its receipts."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.crash_producer", path, flush, backend, str(round_)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    receipts: list[str] = []
    try:
        assert child.stdout.readline().strip() == "open"
        while len(receipts) < lines_before_kill:
            line = child.stdout.readline()
            assert line, "the producer exited early"
            receipts.append(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        # Read on through the same buffered pipe: communicate() would skip what readline() buffered.
        rest = child.stdout.read()
        child.stdout.close()
    # Lines printed after our last read were acknowledged too; a torn last line was not complete.
    receipts.extend(line + "\n" for line in rest.split("\n")[:-1])
    return receipts


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
