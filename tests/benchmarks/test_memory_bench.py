"""bench_memory.py runs in its quick mode, so the script never rots (no figure is asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from paths import ROOT_DIR

BENCHMARKS = os.path.join(ROOT_DIR, "benchmarks")


def test_memory_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """--quick measures W1's peak memory for adiskq on both backends and SQLite with and without asyncio."""
    out = os.path.join(os.fspath(tmp_path), "memory.json")
    result = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "bench_memory.py"), "--quick", "--json", out],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for line in ("adiskq (asyncio)", "adiskq (Trio)", "SQLite WAL, asyncio imported", "import asyncio", "target"):
        assert line in result.stdout
    with open(out) as figures:
        peaks = json.load(figures)["peak_rss_mib"]
    # Every process really ran: each peak is at least the bare interpreter's.
    assert all(peak >= peaks["python"] for peak in peaks.values())
