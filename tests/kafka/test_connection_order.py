"""One connection's requests pipelined: answered in request order, and a client that does not read
its answers is let go, whichever requests are answered at once and which wait."""

from __future__ import annotations

import datetime as dt
import io
import socket
import struct
import time
from collections.abc import Iterator

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from conftest import RunningGateway, receive_exactly
from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.types import TopicName
from kio.serial import entity_writer

import adiskq
from adiskq.kafka import KafkaGateway

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 0, 1) + b"t"  # no body in version 0
_TIMEOUT = 0.5


def _frame(api_key: int, api_version: int, correlation_id: int, body: bytes = b"") -> bytes:
    message = struct.pack(">hhih", api_key, api_version, correlation_id, 1) + b"t" + body
    return struct.pack(">i", len(message)) + message


def _fetch_body(topic: str, offset: int, max_wait_ms: int) -> bytes:
    request = FetchRequest(
        max_wait=dt.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),),
            ),
        ),
    )
    buffer = io.BytesIO()
    entity_writer(FetchRequest)(buffer, request)
    return buffer.getvalue()


def _answers(sock: socket.socket, count: int) -> list[int]:
    """The correlation ids of the next ``count`` answers, in the order they came."""
    got = []
    for _ in range(count):
        size = struct.unpack(">i", receive_exactly(sock, 4))[0]
        got.append(struct.unpack(">i", receive_exactly(sock, size)[:4])[0])
    return got


def test_a_waiting_fetch_keeps_the_answers_after_it_in_order(gateway: RunningGateway, topic: str) -> None:
    """A long-polling Fetch pipelined before requests answered at once is answered first, when its wait ends."""
    with socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=10) as sock:
        metadata_v1 = struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic.encode()  # creates the topic
        sock.sendall(_frame(3, 1, 1, metadata_v1))
        assert _answers(sock, 1) == [1]
        started = time.monotonic()
        sock.sendall(
            _frame(1, 4, 2, _fetch_body(topic, 0, 300))  # nothing to read: waits 300 ms
            + _frame(18, 0, 3)
            + _frame(1, 4, 4, _fetch_body(topic, 0, 0))  # no wait: answered at once
            + _frame(18, 0, 5)
        )
        assert _answers(sock, 4) == [2, 3, 4, 5]
        assert time.monotonic() - started >= 0.25  # the first answer came after its wait


def test_a_client_that_stops_sending_still_gets_every_answer(gateway: RunningGateway, topic: str) -> None:
    """Requests, then the client's end shut for writing while a Fetch waits: each is answered, then it closes."""
    with socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=10) as sock:
        metadata_v1 = struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic.encode()  # creates the topic
        sock.sendall(_frame(3, 1, 1, metadata_v1))
        assert _answers(sock, 1) == [1]
        sock.sendall(_frame(1, 4, 2, _fetch_body(topic, 0, 300)) + _frame(18, 0, 3))
        sock.shutdown(socket.SHUT_WR)
        assert _answers(sock, 2) == [2, 3]
        assert sock.recv(1) == b""


@pytest.fixture(params=["asyncio", "trio"])
def short_gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaGateway]:
    """A gateway whose idle and request timeouts are half a second, over a topic "big" holding one
    message of 200 kB."""
    root = str(tmp_path_factory.mktemp("root"))

    async def write() -> None:
        async with adiskq.Producer(f"{root}/big", partitions=1) as producer:
            await producer.push(b"x" * 200_000)

    anyio.run(write)
    with start_blocking_portal(backend=str(request.param)) as portal:
        gateway = KafkaGateway(root, port=0, request_timeout=_TIMEOUT, idle_timeout=_TIMEOUT)
        with portal.wrap_async_context_manager(gateway):
            yield gateway


def test_a_client_that_never_reads_its_answers_is_disconnected(short_gateway: KafkaGateway) -> None:
    """Fetches sent without end and no answer read: the gateway stops reading, then closes after request_timeout."""
    with socket.create_connection(("127.0.0.1", short_gateway.port), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        requests = _frame(1, 4, 0, _fetch_body("big", 0, 0)) * 20  # 200 kB answered for each
        sock.settimeout(0.2)
        deadline = time.monotonic() + 40 * _TIMEOUT
        with pytest.raises((ConnectionResetError, BrokenPipeError)):  # noqa: PT012 (the loop is the client)
            while time.monotonic() < deadline:
                try:
                    sock.send(requests)
                except TimeoutError:
                    continue  # the gateway has stopped reading: keep trying until it lets go
        assert time.monotonic() < deadline
