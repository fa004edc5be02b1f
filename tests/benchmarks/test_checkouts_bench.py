"""bench_checkouts.py's workloads run as written (callgrind is not needed to check that), so the
script never rots; no count is asserted here."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

sys.path.insert(0, os.path.join(ROOT_DIR, "benchmarks", "instructions"))
import bench_checkouts


@pytest.mark.parametrize("backend", bench_checkouts.BACKENDS)
@pytest.mark.parametrize("workload", bench_checkouts.WORKLOADS)
def test_each_workload_runs_without_callgrind(workload: str, backend: str, tmp_path: pathlib.Path) -> None:
    """Each workload, with its stream written first where it reads one, exits cleanly in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=ROOT_DIR)
    if workload in ("async for", "batches"):
        stream = os.fspath(tmp_path / "stream")
        subprocess.run([sys.executable, "-c", bench_checkouts.WRITE, stream, "1000"], env=env, cwd=tmp_path, check=True)
    code = bench_checkouts.PROGRAM.format(workload=workload, backend=backend, count=1000, folder=os.fspath(tmp_path))
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
