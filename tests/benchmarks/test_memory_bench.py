"""bench_memory.py runs in its quick mode, so the script never rots (no figure is asserted here)."""

from __future__ import annotations

import json
import os

from support.bench import run_quick


def test_memory_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """--quick measures W1's peak memory for adiskq on both backends and SQLite with and without asyncio."""
    out = os.path.join(os.fspath(tmp_path), "memory.json")
    result = run_quick("peers/bench_memory.py", "--json", out, timeout=300)
    for line in ("adiskq (asyncio)", "adiskq (Trio)", "SQLite WAL, asyncio imported", "import asyncio", "target"):
        assert line in result.stdout
    with open(out) as figures:
        peaks = json.load(figures)["peak_rss_mib"]
    # Every process really ran: each peak is at least the bare interpreter's.
    assert all(peak >= peaks["python"] for peak in peaks.values())
