"""Clients that pipeline Fetches and never read their answers: the gateway closes them after its
request timeout and its memory comes back, burst after burst (glibc keeps freed heap otherwise)."""

from __future__ import annotations

import pathlib
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

CLIENTS = 20
BURSTS = 4
# What the gateway's resident memory may keep after a burst, over what it held before the first:
# each burst makes it hold 40 MB and more in answers (20 clients, a 4 MiB answer each and more queued).
KEPT_BOUND_KIB = 12 * 1024
_SERVE = """
import sys, anyio
from adiskq.kafka import KafkaGateway
async def main():
    async with KafkaGateway(sys.argv[1], port=0, request_timeout=1.0) as gateway:
        print(gateway.port, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
anyio.run(main, backend=sys.argv[2])
"""


class _Gateway:
    def __init__(self, root: pathlib.Path, backend: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(root), backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def rss_kib(self) -> int:
        status = pathlib.Path(f"/proc/{self.process.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])


@pytest.fixture(params=["asyncio", "trio"])
def gateway(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[_Gateway]:
    """A gateway in a child process with a one-second request timeout."""
    served = _Gateway(tmp_path, str(request.param))
    try:
        yield served
    finally:
        assert served.process.stdin is not None
        served.process.stdin.close()
        served.process.wait(60)
        assert served.process.stdout is not None
        served.process.stdout.close()


def _fetch_v4(topic: bytes, correlation_id: int) -> bytes:
    """A Fetch v4 of partition 0 from offset 0: up to 8 MiB, 4 MiB of the partition."""
    body = struct.pack(">iiiib", -1, 0, 1, 8 << 20, 0) + struct.pack(">ih", 1, len(topic)) + topic
    body += struct.pack(">iiqi", 1, 0, 0, 4 << 20)
    head = struct.pack(">hhih", 1, 4, correlation_id, 0)
    return struct.pack(">i", len(head) + len(body)) + head + body


def _burst(port: int, topic: bytes) -> None:
    """CLIENTS connections that pipeline Fetches and never read, until the gateway has closed each."""
    sockets = []
    for _ in range(CLIENTS):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        sockets.append(sock)
    closed: set[int] = set()
    sent = 0
    deadline = time.monotonic() + 30
    try:
        while len(closed) < CLIENTS:
            assert time.monotonic() < deadline, f"the gateway closed {len(closed)} of {CLIENTS} non-reading clients"
            for i, sock in enumerate(sockets):
                if i in closed:
                    continue
                try:
                    sock.send(_fetch_v4(topic, sent))
                    sent += 1
                except BlockingIOError:
                    pass
                except OSError:
                    closed.add(i)
            time.sleep(0.02)  # a client's pace, not a wait for an event
    finally:
        for sock in sockets:
            sock.close()


def test_memory_comes_back_after_clients_that_never_read(gateway: _Gateway) -> None:
    """Burst after burst of non-reading clients, the gateway's memory returns to what it held before."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{gateway.port}", "linger.ms": 5})
    for _ in range(3000):
        producer.produce("bulk", b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    before = gateway.rss_kib()
    for burst in range(BURSTS):
        _burst(gateway.port, b"bulk")
        deadline = time.monotonic() + 45  # (a loaded machine closes and frees slowly)
        while (kept := gateway.rss_kib() - before) > KEPT_BOUND_KIB:
            assert time.monotonic() < deadline, f"burst {burst + 1}: the gateway kept {kept} KiB"
            time.sleep(0.1)  # polling the gateway's memory for the moment it drops
