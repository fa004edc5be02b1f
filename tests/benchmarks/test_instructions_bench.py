"""bench_instructions.py's paths run as written (callgrind is not needed to check that), so the
script never rots; no count is asserted here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

sys.path.insert(0, os.path.join(ROOT_DIR, "benchmarks", "instructions"))
import bench_instructions


@pytest.mark.parametrize("path", sorted(bench_instructions.PATHS))
def test_each_path_runs_without_callgrind(path: str) -> None:
    """Each path's set-up and code run in a fresh interpreter and exit cleanly."""
    code = bench_instructions.SETUP.format(n=50) + bench_instructions.PATH_SETUP.get(path, "")
    result = subprocess.run(
        [sys.executable, "-c", code + bench_instructions.PATHS[path]],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
