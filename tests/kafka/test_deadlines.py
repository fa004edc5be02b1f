"""Connection deadlines: an idle client is closed after ``idle_timeout``, a client stuck mid-request
after ``request_timeout``, an idle one at once when the gateway closes; a busy client is never
closed by a deadline between its requests."""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from anyio.from_thread import start_blocking_portal
from conftest import receive_exactly

from adiskq.kafka import KafkaGateway

_TIMEOUT = 0.5
_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 5, 1) + b"t"  # no body in version 0


@pytest.fixture(params=["asyncio", "trio"])
def short_gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaGateway]:
    """A gateway whose idle and request timeouts are half a second."""
    with start_blocking_portal(backend=str(request.param)) as portal:
        gateway = KafkaGateway(
            str(tmp_path_factory.mktemp("root")), port=0, request_timeout=_TIMEOUT, idle_timeout=_TIMEOUT
        )
        with portal.wrap_async_context_manager(gateway):
            yield gateway


def _ask(sock: socket.socket) -> int:
    """ApiVersions v0 on this connection; the answer's error code."""
    sock.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
    size = struct.unpack(">i", receive_exactly(sock, 4))[0]
    correlation_id, error_code = struct.unpack_from(">ih", receive_exactly(sock, size))
    assert correlation_id == 5
    return int(error_code)


def _closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the gateway closes the connection (a reset counts); fails past ``seconds``."""
    started = time.monotonic()
    sock.settimeout(seconds)
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""
    return time.monotonic() - started


def test_an_idle_connection_is_closed_after_idle_timeout(short_gateway: KafkaGateway) -> None:
    """A connection that sends nothing is closed once idle_timeout (and at most a tick) has passed."""
    with socket.create_connection(("127.0.0.1", short_gateway.port), timeout=10) as sock:
        waited = _closed_within(sock, 20 * _TIMEOUT)
    assert _TIMEOUT * 0.9 <= waited <= 8 * _TIMEOUT  # a tick late at most, and room for a busy machine


def test_a_request_stuck_mid_frame_is_closed_after_request_timeout(short_gateway: KafkaGateway) -> None:
    """Half a frame, then nothing: the connection is closed after request_timeout."""
    with socket.create_connection(("127.0.0.1", short_gateway.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
        waited = _closed_within(sock, 20 * _TIMEOUT)
    assert _TIMEOUT * 0.9 <= waited <= 8 * _TIMEOUT  # a tick late at most, and room for a busy machine


def test_a_client_that_keeps_asking_outlives_the_timeouts(short_gateway: KafkaGateway) -> None:
    """Requests every tenth of a timeout for three timeouts: every one answered on one connection."""
    with socket.create_connection(("127.0.0.1", short_gateway.port), timeout=10) as sock:
        deadline = time.monotonic() + 3 * _TIMEOUT
        answered = 0
        while time.monotonic() < deadline:
            assert _ask(sock) == 0
            answered += 1
            time.sleep(_TIMEOUT / 10)  # a client's pace, not a wait for the gateway
    assert answered >= 10


def test_closing_the_gateway_ends_idle_connections_at_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    """With an idle connection open and default timeouts, leaving the gateway's block takes well under
    its 10 s grace for requests in flight."""
    with start_blocking_portal(backend="asyncio") as portal:
        gateway = KafkaGateway(str(tmp_path_factory.mktemp("root")), port=0)
        with portal.wrap_async_context_manager(gateway):
            sock = socket.create_connection(("127.0.0.1", gateway.port), timeout=10)
            assert _ask(sock) == 0
            started = time.monotonic()
        closed_in = time.monotonic() - started
        sock.close()
    assert closed_in < 3


@pytest.fixture(params=["asyncio", "trio"])
def patient_gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaGateway]:
    """A gateway with a half-second request timeout, a long idle timeout, and two connections an address."""
    with start_blocking_portal(backend=str(request.param)) as portal:
        gateway = KafkaGateway(
            str(tmp_path_factory.mktemp("root")),
            port=0,
            request_timeout=_TIMEOUT,
            idle_timeout=60,
            max_connections_per_ip=2,
        )
        with portal.wrap_async_context_manager(gateway):
            yield gateway


def test_a_connection_that_never_sends_a_request_is_closed_after_the_request_timeout(
    patient_gateway: KafkaGateway,
) -> None:
    """A socket that never sends a whole request is closed after the request timeout, not the (long)
    idle timeout: idle sockets cannot hold the gateway's descriptors; one that has asked stays idle."""
    with socket.create_connection(("127.0.0.1", patient_gateway.port), timeout=10) as spoke:
        assert _ask(spoke) == 0
        with socket.create_connection(("127.0.0.1", patient_gateway.port), timeout=10) as silent:
            waited = _closed_within(silent, 20 * _TIMEOUT)
        assert _TIMEOUT * 0.9 <= waited <= 8 * _TIMEOUT
        assert _ask(spoke) == 0  # idle all that time, still served


def test_connections_past_max_connections_per_ip_are_closed_at_once(patient_gateway: KafkaGateway) -> None:
    """An address's connections beyond max_connections_per_ip are closed without an answer; once one
    of its connections closes, the next is served."""
    port = patient_gateway.port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as first:
        assert _ask(first) == 0
        with socket.create_connection(("127.0.0.1", port), timeout=10) as second:
            assert _ask(second) == 0
            with socket.create_connection(("127.0.0.1", port), timeout=10) as third:
                assert _closed_within(third, 5) < 5
            assert _ask(second) == 0
    deadline = time.monotonic() + 10
    while True:  # the gateway sees the two close a moment later
        with socket.create_connection(("127.0.0.1", port), timeout=10) as again:
            try:
                assert _ask(again) == 0
                break
            except ConnectionError:
                assert time.monotonic() < deadline, "the closed connections were never counted off"


def test_max_connections_per_ip_takes_a_positive_count(tmp_path_factory: pytest.TempPathFactory) -> None:
    """max_connections_per_ip is 1 or more, or None (no limit, Kafka's default)."""
    with pytest.raises(ValueError, match="max_connections_per_ip=0"):
        KafkaGateway(str(tmp_path_factory.mktemp("root")), max_connections_per_ip=0)
