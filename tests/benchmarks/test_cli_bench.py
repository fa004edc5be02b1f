"""The command line's benchmark runs in its quick mode, so it never rots."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT_DIR

ROOT = ROOT_DIR


def test_the_cli_benchmark_runs_in_quick_mode() -> None:
    """`benchmarks/bench_cli.py --quick` finishes and prints start-up and throughput figures."""
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "bench_cli.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "adiskq --help, rich eager" in done.stdout
    assert "adiskq read --format json" in done.stdout
    assert "adiskq check" in done.stdout
