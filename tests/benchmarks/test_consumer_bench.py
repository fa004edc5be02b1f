"""The consumer benchmark keeps working (its quick mode; figures are not checked, only that it runs)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from paths import ROOT_DIR

BENCHMARK = pathlib.Path(ROOT_DIR) / "benchmarks" / "bench_consumer.py"


def test_the_consumer_benchmark_runs_in_quick_mode() -> None:
    """bench_consumer.py --quick runs every workload on both backends and prints each figure."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick"], capture_output=True, text=True, timeout=240, check=False
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "sqlite WAL full scan" in out
    for backend in ("asyncio", "trio"):
        assert f"batches()      {backend}" in out
        assert f"async for msg  {backend}" in out
        assert f"inotify alone, other process  {backend}" in out
        assert f"adiskq, other process         {backend}" in out
        assert f"adiskq, same process          {backend}" in out
