"""benchmarks/kafka/kafka_trip_instructions.py runs each shape as written (callgrind is not needed to check
that), so the script never rots; no figure is asserted here."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.paths import ROOT_DIR


@pytest.mark.timeout(120)
@pytest.mark.parametrize("server", ["gateway", "floor"])
@pytest.mark.parametrize("shape", ["trip", "produce", "fetch"])
def test_each_shape_runs_against_a_gateway_and_the_floor(shape: str, server: str) -> None:
    """Each shape replays its requests against ``adiskq serve`` (or the bare asyncio server the gateway
    is compared with) and reports that server's CPU a trip."""
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/kafka/kafka_trip_instructions.py",
            "--shape",
            shape,
            "--trips",
            "20",
            "--server",
            server,
        ],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"{shape}: {server} CPU "), done.stdout
