"""``adiskq serve``: it logs one line when it listens, and SIGTERM or SIGINT stops it cleanly (exit 0)."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from support.gateway_start import listening_port

import adiskq


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_it_cleanly(tmp_path: pathlib.Path, signum: signal.Signals) -> None:
    """After a produce, the signal closes the stream cleanly (no producer left) and the exit status is 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "adiskq", "serve", str(tmp_path), "--kafka", "127.0.0.1:0", "--partitions", "2"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        port = listening_port(process.stderr)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all"})
        producer.produce("cli", b"value", b"key")
        assert producer.flush(30) == 0
        process.send_signal(signum)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, rest
    assert "closed" in rest
    stats = adiskq.stats(tmp_path / "cli")
    assert len(stats.partitions) == 2
    assert stats.message_count == 1
    assert stats.owner is None  # the gateway's producer let go of the stream


def test_bad_address_is_refused(tmp_path: pathlib.Path) -> None:
    """A --kafka that is not HOST:PORT is a usage error naming the option."""
    done = subprocess.run(
        [sys.executable, "-m", "adiskq", "serve", str(tmp_path), "--kafka", "nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--kafka" in done.stderr
