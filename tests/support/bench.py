"""Support for the tests that keep the benchmarks from rotting: run one in its quick mode."""

from __future__ import annotations

import os
import subprocess
import sys

from support.paths import ROOT_DIR

BENCHMARKS_DIR = os.path.join(ROOT_DIR, "benchmarks")


def run_quick(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``benchmarks/<script> --quick *args`` run by this Python, checked to exit 0 (its stderr shown if not)."""
    result = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS_DIR, script), "--quick", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result
