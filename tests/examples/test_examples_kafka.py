"""examples/kafka_gateway.py, run as a program: Kafka clients produce through the embedded gateway and
the service's own consumer reads their records."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

ROOT = pathlib.Path(ROOT_DIR)
SERVICE = ROOT / "examples" / "kafka_gateway.py"

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_kcat_orders_reach_the_service_consumer(tmp_path: pathlib.Path, backend: str) -> None:
    """Two orders kcat produces are printed by the service's library consumer, with their keys."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed: apt-get install kcat (scripts/test does it)"
    service = subprocess.Popen(
        [
            sys.executable,
            os.fspath(SERVICE),
            "--root",
            os.fspath(tmp_path),
            "--port",
            "0",
            "--count",
            "2",
            "--backend",
            backend,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert service.stdout is not None
        found = re.search(r"bootstrap\.servers=(\S+)", service.stdout.readline())
        assert found
        # kcat's exit status is not checked: the service stops (closing kcat's connections) as
        # soon as it has read the two orders, which may be before kcat has taken its last answer.
        subprocess.run(
            [kcat, "-b", found.group(1), "-P", "-t", "orders", "-K:"],
            input=b'customer-00:{"id": 1}\ncustomer-01:{"id": 2}\n',
            capture_output=True,
            timeout=30,
            check=False,
        )
        out, _ = service.communicate(timeout=60)
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()
        if service.stdout is not None:
            service.stdout.close()
    assert service.returncode == 0
    assert out.splitlines() == [
        'order 0: key=customer-00 value={"id": 1}',
        'order 1: key=customer-01 value={"id": 2}',
    ]
