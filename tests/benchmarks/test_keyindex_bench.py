"""bench_keyindex.py runs in its quick mode, so the script never rots (no timing is asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys

from support.bench import run_quick
from support.paths import ROOT_DIR

BENCHMARKS = os.path.join(ROOT_DIR, "benchmarks")


def test_keyindex_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """--quick measures ingest with the index on and off, beside SQLite, and lookups beside SQLite."""
    result = run_quick("bench_keyindex.py", "--dir", os.fspath(tmp_path), timeout=300)
    for line in (
        "push_many 1k keys, index on",
        "push_many 1M keys, index off",
        "push, index on",
        "sqlite executemany, key index on",
        "adiskq find",
        "sqlite select",
        "target <= 2.0 ms",
        "target >= 0.85x msg/s",
    ):
        assert line in result.stdout
    assert os.listdir(tmp_path) == []


def test_keyindex_benchmark_refuses_keep_without_a_folder() -> None:
    """--keep needs --dir: a temporary folder would be deleted anyway."""
    result = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "bench_keyindex.py"), "--quick", "--keep"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--keep needs --dir" in result.stderr
