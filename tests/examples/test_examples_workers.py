"""examples/workers.py, run as a program: worker processes share a named group; one is killed, the rest go on."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

import adiskq

ROOT = pathlib.Path(ROOT_DIR)
DEMO = ROOT / "examples" / "workers.py"

ARGS = ["--workers", "3", "--partitions", "6", "--jobs", "1500", "--kill-after", "0.3"]

pytestmark = pytest.mark.timeout(120)


def test_killing_one_worker_leaves_no_job_unhandled(tmp_path: pathlib.Path) -> None:
    """Three workers share six partitions; after one is SIGKILLed the others take its partitions and
    every job is handled (at least once), and the group's commits reach the end of every partition."""
    stream = os.fspath(tmp_path / "jobs")
    done = subprocess.run(
        [sys.executable, os.fspath(DEMO), "--stream", stream, *ARGS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    killed = next(i for i, line in enumerate(lines) if line.startswith("killed worker-0"))
    assert any(line.startswith(("worker-1 holds", "worker-2 holds")) for line in lines[killed:])
    assert "handled all 1500 jobs" in done.stdout
    stats = adiskq.stats(stream)
    assert stats.groups["workers"] == {p.partition: p.next_offset for p in stats.partitions}
