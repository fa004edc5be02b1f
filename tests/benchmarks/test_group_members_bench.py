"""The consumer-group benchmark keeps working (its quick mode; figures are not checked, only that it runs)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

from support.bench import run_quick
from support.paths import ROOT_DIR

BENCHMARK = pathlib.Path(ROOT_DIR) / "benchmarks" / "bench_group.py"


def test_the_group_benchmark_runs_in_quick_mode(tmp_path: pathlib.Path) -> None:
    """bench_group.py --quick measures join, leave and kill on both backends and leaves nothing behind."""
    result = run_quick("bench_group.py", "--dir", str(tmp_path), timeout=240)
    for backend in ("asyncio", "trio"):
        for case in (
            "join  (open -> 2/2/1/1)",
            "leave (SIGTERM -> 2/2/2)",
            "kill  (SIGKILL -> 3/3)",
            "kill  (interval only)",
        ):
            assert re.search(rf"{re.escape(case)}\s+{backend}\s+interval 0\.2 s: median", result.stdout)
    assert list(tmp_path.iterdir()) == []


def test_the_group_benchmark_refuses_no_runs() -> None:
    """bench_group.py refuses a run count below one."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARK), "--quick", "--runs=0"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert "at least 1" in result.stderr
