"""examples/trio_service.py, run as a program: a producer, a consumer group and stats in one nursery."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

import adiskq

ROOT = pathlib.Path(ROOT_DIR)
SERVICE = ROOT / "examples" / "trio_service.py"

FAST = ["--interval", "0.001", "--stats-interval", "0.05"]

pytestmark = pytest.mark.timeout(90)


def run_service(stream: str, orders: int) -> str:
    done = subprocess.run(
        [
            sys.executable,
            os.fspath(SERVICE),
            "--stream",
            stream,
            "--orders",
            str(orders),
            "--interval",
            "0.001",
            "--stats-interval",
            "0.05",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_service_bills_every_order_and_prints_stats(tmp_path: pathlib.Path) -> None:
    """One run takes and bills every order, prints stats while it runs, and commits the group."""
    stream = os.fspath(tmp_path / "orders")
    output = run_service(stream, 300)
    assert "billed 300 orders" in output
    assert any(line.startswith("stats: ") for line in output.splitlines())
    stats = adiskq.stats(stream)
    assert sum(p.next_offset for p in stats.partitions) == 300
    assert stats.groups["billing"] == {p.partition: p.next_offset for p in stats.partitions if p.next_offset}


def test_a_second_run_bills_only_the_new_orders(tmp_path: pathlib.Path) -> None:
    """The billing group is named: a restarted service resumes after what it already billed."""
    stream = os.fspath(tmp_path / "orders")
    run_service(stream, 100)
    output = run_service(stream, 50)
    assert "billed 50 orders" in output
    stats = adiskq.stats(stream)
    assert sum(p.next_offset for p in stats.partitions) == 150
    assert sum(stats.groups["billing"].values()) == 150
