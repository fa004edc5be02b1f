"""The demo ./scripts/demo runs: a consumer group follows a producer, and resumes on the next run."""

from __future__ import annotations

import os
import subprocess
import sys


def run_demo(path: str) -> str:
    """The demo's output on the stream at `path`."""
    done = subprocess.run(
        [sys.executable, "-m", "adiskq.demo", path], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_group_follows_the_producer_and_resumes(tmp_path: object) -> None:
    """Each run, the group 'billing' gets exactly the 12 messages pushed in that run."""
    path = os.path.join(str(tmp_path), "demo")
    first = [line for line in run_demo(path).splitlines() if line.startswith("  billing got")]
    second = [line for line in run_demo(path).splitlines() if line.startswith("  billing got")]
    assert len(first) == 12
    assert len(second) == 12
    assert "partition 2 offset 0" in first[0]
    assert "partition 2 offset 6" in second[0]  # resumed after what the first run committed
