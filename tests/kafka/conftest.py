"""Fixtures of the Kafka gateway's tests: one gateway per module on each backend, in a thread.

The gateway runs in a blocking portal (its own event loop in a thread, asyncio or Trio), so the
real Kafka clients, most of them synchronous, talk to it from the test's thread.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import struct
from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from adiskq.kafka import GroupOptions, KafkaGateway


@dataclasses.dataclass
class RunningGateway:
    """A gateway serving in a thread."""

    gateway: KafkaGateway
    root: str
    backend: str
    portal: BlockingPortal

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` for a client."""
        return f"127.0.0.1:{self.gateway.port}"

    def path(self, topic: str) -> str:
        """The stream folder of a topic."""
        return os.path.join(self.root, topic)


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """A gateway on a free port (one per test module and backend), over an empty root folder."""
    root = str(tmp_path_factory.mktemp("kafka-root"))
    backend = str(request.param)
    with start_blocking_portal(backend=backend) as portal:
        # A group's first generation at once (Kafka waits 3 s for more members): the tests' consumers
        # start one at a time.
        gateway = KafkaGateway(root, port=0, partitions=1, groups=GroupOptions(initial_rebalance_delay_ms=0))
        with portal.wrap_async_context_manager(gateway):
            yield RunningGateway(gateway, root, backend, portal)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name of this test's own (no other test writes it)."""
    name = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)
    return name[:200]


def raw_request(port: int, api_key: int, api_version: int, body: bytes = b"", correlation_id: int = 7) -> bytes:
    """Send one request frame with a v1 header (client id "t") and return the response frame's payload."""
    header = struct.pack(">hhih", api_key, api_version, correlation_id, 1) + b"t"
    message = header + body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(message)) + message)
        size = struct.unpack(">i", receive_exactly(sock, 4))[0]
        return receive_exactly(sock, size)


def receive_exactly(sock: socket.socket, count: int) -> bytes:
    """``count`` bytes from the socket (ConnectionError if it closes first)."""
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {count} bytes")
        data += chunk
    return data


def call(port: int, request: object, correlation_id: int = 11) -> object:
    """Send one kio request to the gateway and return its response, read with kio."""
    import io

    from kio.index import load_response_from_request
    from kio.serial import entity_reader, entity_writer

    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)  # type: ignore[arg-type]
    header_type = request.__header_schema__  # type: ignore[attr-defined]
    header = struct.pack(">hhih", request.__api_key__, request.__version__, correlation_id, 1) + b"t"  # type: ignore[attr-defined]
    if header_type.__flexible__:
        header += b"\0"
    payload = raw_frame(port, header + buffer.getvalue())
    response_type = load_response_from_request(type(request))  # type: ignore[arg-type]
    at = 4 + (1 if response_type.__header_schema__.__flexible__ else 0)
    assert struct.unpack(">i", payload[:4])[0] == correlation_id
    return entity_reader(response_type)(payload, at)[0]


def raw_frame(port: int, message: bytes) -> bytes:
    """Send one frame; the response frame's payload."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(message)) + message)
        size = struct.unpack(">i", receive_exactly(sock, 4))[0]
        return receive_exactly(sock, size)


# --- differential tests: the same scenario against the gateway and Apache Kafka (differential.py) ---
pytest.register_assert_rewrite("differential")  # its comparison shows both sides' differences
from differential import differential  # noqa: E402, F401  (a fixture, offered to every test here)
