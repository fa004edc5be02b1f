"""examples/orders_service.py, run as a program, unchanged, on a stream folder and on a Kafka topic."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import uuid
from typing import Any

import pytest
from support.paths import ROOT_DIR

ROOT = pathlib.Path(ROOT_DIR)
SERVICE = ROOT / "examples" / "orders_service.py"

pytestmark = pytest.mark.timeout(240)


def run_service(where: str, orders: int) -> str:
    done = subprocess.run(
        [sys.executable, os.fspath(SERVICE), "--where", where, "--orders", str(orders)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(params=["local", "kafka"])
def where(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> str:
    if request.param == "kafka":
        broker: Any = request.getfixturevalue("kafka_broker")
        return f"kafka://{broker.bootstrap}/orders-{uuid.uuid4().hex[:10]}"
    return os.fspath(tmp_path / "orders")


def test_the_service_runs_the_same_on_a_folder_and_on_kafka(where: str) -> None:
    """Two runs: the first bills 196 of 200 orders and refuses 4; the second bills only its own 100."""
    first = run_service(where, 200)
    billed_cents = sum(100 + n for n in range(200) if n % 50 != 49)
    assert f"billed 196 orders, {billed_cents} cents; refused 4; lag 0" in first
    second = run_service(where, 100)
    assert f"billed 98 orders, {sum(100 + n for n in range(100) if n % 50 != 49)} cents; refused 2; lag 0" in second
