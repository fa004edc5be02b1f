"""bench_tags.py runs in its quick mode, so the script never rots (no timing is asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT_DIR

BENCHMARKS = os.path.join(ROOT_DIR, "benchmarks")


def test_tags_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """--quick measures filtered and unfiltered reads at three selectivities and tagged pushes, on both cores."""
    result = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "bench_tags.py"), "--quick", "--dir", os.fspath(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for line in ("compiled core", "reference core", "5%", "1%", "100%", "push_many", "target >= 0.95x"):
        assert line in result.stdout
    assert os.listdir(tmp_path) == []
