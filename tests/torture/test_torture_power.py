"""Power loss, simulated: after a SIGKILL, bytes that were never fsynced are cut or zeroed.

With flush="sync" every acknowledged message survives; with flush="async" what survives is a
contiguous prefix of each partition, readable without error, and reopening repairs the rest.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from support import crash as crash_support

import adiskq

ROOT = crash_support.ROOT
ROUNDS = 5
REOPEN = """
import sys, anyio, adiskq
async def main():
    async with adiskq.Producer(sys.argv[1]) as producer:
        print(len(producer.recovery.repairs))
anyio.run(main)
"""


def run_and_kill(path: str, flush: str, backend: str, round_: int, log: str, lines: int) -> list[str]:
    """A pushing producer noting its fsyncs in `log`, killed after `lines` acknowledgements."""
    return crash_support.run_and_kill(
        "tests.support.powerloss_producer", [path, flush, backend, str(round_), log], lines
    )


def durable_sizes(log: str) -> dict[str, int]:
    """The largest size each file had when an fsync of it began."""
    sizes: dict[str, int] = {}
    with open(log) as lines:
        for line in lines:
            path, size = line.rstrip("\n").split("\t")
            sizes[path] = max(sizes.get(path, 0), int(size))
    return sizes


def cut_power(stream: str, log: str, rng: random.Random) -> None:
    """Lose what no fsync covered: cut each segment file back, or zero its unsynced bytes."""
    durable = durable_sizes(log)
    for folder, _, files in os.walk(os.path.join(stream, "parts")):
        for name in files:
            path = os.path.join(folder, name)
            size = os.path.getsize(path)
            keep = durable.get(path, 0)
            if size <= keep:
                continue
            point = rng.randint(keep, size)
            with open(path, "r+b") as file:
                if rng.random() < 0.5:
                    file.truncate(point)
                else:  # the size reached the disk, the data did not
                    file.seek(point)
                    file.write(b"\0" * (size - point))


def surviving(stream: str) -> dict[tuple[int, int], bytes]:
    """Every message after recovery, checked readable and contiguous from each partition's start."""
    messages = {}
    for partition in adiskq.stats(stream).partitions:
        for offset in range(partition.oldest_offset, partition.next_offset):
            messages[(partition.partition, offset)] = adiskq.read(stream, partition.partition, offset).value
    return messages


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("flush", ["sync", "async"])
def test_power_loss_keeps_what_the_flush_policy_promises(tmp_path: object, flush: str, backend: str) -> None:
    """sync: every acknowledged message survives a power cut; async: a clean contiguous prefix does."""
    stream = os.path.join(str(tmp_path), "stream")
    log = os.path.join(str(tmp_path), "fsyncs.log")
    rng = random.Random(f"power-{flush}-{backend}")
    acknowledged: dict[tuple[int, int], bytes] = {}
    for round_ in range(ROUNDS):
        for line in run_and_kill(stream, flush, backend, round_, log, rng.randint(20, 300)):
            partition, offset, value = line.split()
            acknowledged[(int(partition), int(offset))] = value.encode()
        cut_power(stream, log, rng)
        # Reopening runs recovery: it must succeed and leave a readable, contiguous stream.
        reopened = subprocess.run(
            [sys.executable, "-c", REOPEN, stream], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert reopened.stdout.strip().isdigit()
        after = surviving(stream)
        assert len(set(after.values())) == len(after), "a message survived twice"
        if flush == "sync":
            lost = {key for key, value in acknowledged.items() if after.get(key) != value}
            assert not lost, f"acknowledged messages lost or changed: {sorted(lost)[:5]}"
        else:
            changed = {key for key, value in after.items() if key in acknowledged and acknowledged[key] != value}
            assert not changed
            # A power cut may take back acknowledged async pushes; later rounds reuse those offsets.
            acknowledged = {key: value for key, value in acknowledged.items() if key in after}
