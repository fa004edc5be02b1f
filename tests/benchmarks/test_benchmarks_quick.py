"""Every benchmark runs in its quick mode, so the scripts never rot (no timing is asserted here)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.bench import run_quick
from support.paths import ROOT_DIR

BENCHMARKS = os.path.join(ROOT_DIR, "benchmarks")


def test_storage_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """bench_storage.py --quick runs adiskq and SQLite and prints every figure with its ratio."""
    result = run_quick("bench_storage.py", "--dir", os.fspath(tmp_path), timeout=120)
    for line in (
        "adiskq append",
        "adiskq encode+append",
        "sqlite append",
        "adiskq read",
        "sqlite scan",
        "producer open",
    ):
        assert line in result.stdout
    assert "x sqlite append; target 1,500,000" in result.stdout
    assert "x sqlite scan; target 2,000,000" in result.stdout
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argument", ["--runs=0", "--batches=-1"])
def test_storage_benchmark_refuses_nonsense(argument: str) -> None:
    """bench_storage.py refuses a run count or batch count below one."""
    result = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "bench_storage.py"), "--quick", argument],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 2
    assert "at least 1" in result.stderr


def test_disk_guard_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """bench_disk_guard.py --quick runs each workload with the disk-usage check on and off, with the ratio."""
    result = run_quick("bench_disk_guard.py", "--dir", os.fspath(tmp_path), timeout=120)
    for workload in ("single", "batch"):
        for backend in ("asyncio", "trio"):
            assert f"{workload:8} {backend:8}" in result.stdout
    assert "on/off" in result.stdout


def test_shared_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """bench_shared.py --quick runs shared against exclusive producers and writer processes against
    SQLite's, printing every ratio and target."""
    result = run_quick("bench_shared.py", "--dir", os.fspath(tmp_path), timeout=300)
    for line in ("W1 asyncio", "W1 trio", "W2 asyncio", "W2 trio", "adiskq asyncio 4", "adiskq trio 1", "sqlite 4"):
        assert line in result.stdout
    assert "4 shared writers, asyncio:" in result.stdout
    assert os.listdir(tmp_path) == []


def test_recovery_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """bench_recovery.py --quick times the open after a torn record of each shape, beside its peers."""
    result = run_quick("bench_recovery.py", "--dir", os.fspath(tmp_path), timeout=120)
    for column in ("headers ms", "random ms", "no tear ms", "read+crc ms", "scan ms"):
        assert column in result.stdout
    assert "256 KiB" in result.stdout
    assert os.listdir(tmp_path) == []


def test_serializers_benchmark_quick() -> None:
    """bench_serializers.py --quick prints push and read rates of every variant beside plain bytes."""
    result = run_quick("bench_serializers.py", timeout=300)
    for backend in ("asyncio", "trio"):
        for variant in ("bytes", "json", "msgspec", "pydantic"):
            assert f"{backend:<8} {variant:<9} push" in result.stdout


def test_serializers_benchmark_against_another_checkout_quick() -> None:
    """--base compares the plain workloads of two checkouts (here this one with itself)."""
    result = subprocess.run(
        [
            sys.executable,
            os.path.join(BENCHMARKS, "bench_serializers.py"),
            "--quick",
            "--base",
            ROOT_DIR,
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for workload in ("push asyncio", "read asyncio", "push trio", "read trio"):
        assert workload in result.stdout


def test_metrics_benchmark_quick() -> None:
    """bench_metrics.py --quick runs every mode and shows that only the ones with a provider set wrap pushes."""
    result = run_quick("bench_metrics.py", timeout=300)
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert lines.keys() == {"missing", "unset", "off", "metrics", "traces"}
    for mode in ("missing", "unset", "off"):
        assert lines[mode].endswith("not wrapped")
    for mode in ("metrics", "traces"):
        assert lines[mode].endswith(" wrapped")
        assert "not wrapped" not in lines[mode]
