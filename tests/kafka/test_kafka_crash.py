"""A gateway killed with SIGKILL while a Kafka client produces with acks=all to a flush="sync"
stream loses no acknowledged record (sampled rounds; more under ``-m slow``)."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, Message, Producer
from support.gateway_start import listening_port

from adiskq._storage.stream import StreamReader


def _start_gateway(root: pathlib.Path) -> tuple[subprocess.Popen[bytes], int]:
    """``adiskq serve ROOT --flush sync`` on a free port; the process and its port."""
    process = subprocess.Popen(
        [sys.executable, "-m", "adiskq", "serve", str(root), "--kafka", "127.0.0.1:0", "--flush", "sync"],
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    return process, listening_port(process.stderr)


def _crash_round(root: pathlib.Path, seed: int) -> None:
    rng = random.Random(seed)
    root.mkdir()
    process, port = _start_gateway(root)
    acked: dict[int, bytes] = {}

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is None:
            acked[message.offset()] = message.value()

    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "acks": "all",
            "linger.ms": rng.choice([0, 1, 5]),
            "message.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 100,
        }
    )
    kill_after = rng.randint(1, 400)
    sent = 0
    deadline = time.monotonic() + 60
    try:
        while len(acked) < kill_after and time.monotonic() < deadline:
            producer.produce("crash", b"value %d" % sent, b"key %d" % sent, partition=0, on_delivery=delivered)
            sent += 1
            producer.poll(0 if sent - len(acked) < 200 else 0.005)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
        producer.purge()  # what was in flight fails: not acknowledged
        producer.flush(5)  # the acknowledgements already received are reported
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()
    assert len(acked) >= kill_after
    reader = StreamReader.open(root / "crash").partition(0)
    with reader.cursor(0) as cursor:
        stored = {message.offset: message.value for message in cursor.read(100_000)}
    lost = {offset: value for offset, value in acked.items() if stored.get(offset) != value}
    assert not lost, f"acknowledged records missing after SIGKILL: {sorted(lost)[:10]}"


def test_sigkill_loses_no_acknowledged_record(tmp_path: pathlib.Path) -> None:
    """Two rounds: produce with acks=all, SIGKILL the gateway, every acknowledged record is there."""
    for seed in range(2):
        _crash_round(tmp_path / f"round{seed}", seed)


@pytest.mark.slow
def test_sigkill_loses_no_acknowledged_record_many_rounds(tmp_path: pathlib.Path) -> None:
    """Thirty rounds of the same."""
    for seed in range(30):
        _crash_round(tmp_path / f"round{seed}", 1000 + seed)
