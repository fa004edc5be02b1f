"""SASL and the per-address connection limit, the gateway beside Apache Kafka (``kafka_sasl_broker``:
a node with a SASL_PLAINTEXT listener, ``connection.failed.authentication.delay.ms`` and
``max.connections.per.ip``), each configured alike, compared by what a client sees: a login with
each mechanism, a wrong password and an unknown user (librdkafka's error, and the exchange on the
wire), the delay before a failed login is answered, a request before login, and the connection
past the limit. What still differs is pinned here too and listed in README's "Differences from a
Kafka cluster"."""

from __future__ import annotations

import base64
import os
import re
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from confluent_kafka import KafkaError, Producer
from differential import Side
from support.cli import invoke
from support.kafka_broker import KafkaSaslBroker

from adiskq.kafka import KafkaGateway, SecurityOptions

SASL_AUTHENTICATION_FAILED = 58  # Kafka's error code in a SaslAuthenticate answer


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory, kafka_sasl_broker: KafkaSaslBroker) -> str:
    """The Kafka node's one user, in a gateway credentials file (``adiskq kafka-user``), with the
    4,096 SCRAM iterations Kafka's ``--add-scram`` gives."""
    path = str(tmp_path_factory.mktemp("sasl-differential") / "users.json")
    result = invoke(
        "kafka-user",
        path,
        kafka_sasl_broker.user,
        "--password-stdin",
        "--iterations",
        "4096",
        input=kafka_sasl_broker.password + "\n",
    )
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def sasl_gateway(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    credentials: str,
    kafka_sasl_broker: KafkaSaslBroker,
) -> Iterator[Side]:
    """A gateway configured as the Kafka node is (the same user, failed-login delay and
    per-address limit), on the module's backend, as one side of the comparison."""
    security = SecurityOptions(
        sasl_credentials=credentials, failed_authentication_delay_ms=kafka_sasl_broker.failed_delay_ms
    )
    root = str(tmp_path_factory.mktemp("sasl-gateway"))
    with start_blocking_portal(backend=str(request.param)) as portal:
        gateway = KafkaGateway(
            root, port=0, security=security, max_connections_per_ip=kafka_sasl_broker.per_address_limit
        )
        with portal.wrap_async_context_manager(gateway):
            yield Side("gateway", f"127.0.0.1:{gateway.port}", f"g-{request.param}")


@pytest.fixture
def kafka_side(kafka_sasl_broker: KafkaSaslBroker, request: pytest.FixtureRequest) -> Side:
    return Side("kafka", kafka_sasl_broker.bootstrap, f"k-{request.node.name}"[:100].replace("[", "-").strip("]"))


def both(gateway: Side, kafka: Side, scenario: Callable[[Side], Any]) -> tuple[Any, Any]:
    """(what ``scenario`` saw of the gateway, of Kafka)."""
    return scenario(gateway), scenario(kafka)


# --- raw requests --------------------------------------------------------------------------------


def frame(api_key: int, api_version: int, body: bytes = b"", correlation_id: int = 1) -> bytes:
    """A request frame with a v1 header (client id "t")."""
    message = struct.pack(">hhih", api_key, api_version, correlation_id, 1) + b"t" + body
    return struct.pack(">i", len(message)) + message


def answer_of(sock: socket.socket) -> bytes | None:
    """The next answer's body (correlation id first), or None if the broker closed the connection."""
    prefix = sock.recv(4, socket.MSG_WAITALL)
    if len(prefix) < 4:
        return None
    (size,) = struct.unpack(">i", prefix)
    body = sock.recv(size, socket.MSG_WAITALL)
    return body if len(body) == size else None


def connect(side: Side, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", side.port), timeout=30, source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def handshake(sock: socket.socket, mechanism: str) -> None:
    """SaslHandshake v1 for ``mechanism``, asserting it is accepted."""
    sock.sendall(frame(17, 1, struct.pack(">h", len(mechanism)) + mechanism.encode()))
    answer = answer_of(sock)
    assert answer is not None
    assert answer[4:6] == b"\0\0", answer


def authenticate(sock: socket.socket, token: bytes) -> tuple[int | None, bytes, float]:
    """SaslAuthenticate v1 with ``token``: its error code (None: the connection was closed without
    an answer), the server's token, and the seconds the answer took."""
    started = time.monotonic()
    sock.sendall(frame(36, 1, struct.pack(">i", len(token)) + token))
    answer = answer_of(sock)
    took = time.monotonic() - started
    if answer is None:
        return None, b"", took
    (error,) = struct.unpack_from(">h", answer, 4)
    (message_length,) = struct.unpack_from(">h", answer, 6)
    at = 8 + max(message_length, 0)
    (token_length,) = struct.unpack_from(">i", answer, at)
    return error, answer[at + 4 : at + 4 + max(token_length, 0)], took


def plain_login(side: Side, user: str, password: str) -> tuple[int | None, float]:
    with connect(side) as sock:
        handshake(sock, "PLAIN")
        error, _token, took = authenticate(sock, b"\0" + user.encode() + b"\0" + password.encode())
        return error, took


def scram_login_with_a_wrong_proof(side: Side, mechanism: str, user: str) -> list[tuple[int | None, float]]:
    """A SCRAM exchange whose final message carries a wrong proof: each step's error code and time
    (one step only when the first is refused)."""
    with connect(side) as sock:
        handshake(sock, mechanism)
        nonce = base64.b64encode(os.urandom(18)).decode()
        error, server_first, took = authenticate(sock, f"n,,n={user},r={nonce}".encode())
        steps = [(error, took)]
        if error != 0:
            return steps
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        proof = base64.b64encode(bytes(64 if mechanism.endswith("512") else 32)).decode()
        error, _token, took = authenticate(sock, f"c=biws,r={fields['r']},p={proof}".encode())
        return [*steps, (error, took)]


# --- librdkafka -----------------------------------------------------------------------------------


def sasl_config(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def without_addresses_and_times(text: str) -> str:
    """librdkafka's error text less the broker's address and the milliseconds it took."""
    return re.sub(r"\(after \d+ms", "(after ?ms", re.sub(r"127\.0\.0\.1:\d+", "HOST:PORT", text))


def first_error(side: Side, config: dict[str, str]) -> KafkaError:
    """The first error librdkafka reports of ``side`` (within 30 s)."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": side.bootstrap, "error_cb": errors.append, **config})
    deadline = time.monotonic() + 30
    while not errors:
        assert time.monotonic() < deadline, f"librdkafka reported no error of {side.kind}"
        producer.poll(0.1)
    return errors[0]


# --- the comparisons ------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_login_with_each_mechanism_is_served_alike(
    sasl_gateway: Side, kafka_side: Side, kafka_sasl_broker: KafkaSaslBroker, mechanism: str
) -> None:
    """librdkafka logs in and produces: the same delivery (partition 0, offset 0) on both."""
    config = sasl_config(mechanism, kafka_sasl_broker.user, kafka_sasl_broker.password)

    def deliver(side: Side) -> tuple[str | None, int | None, int | None]:
        delivered: list[tuple[str | None, int | None, int | None]] = []
        producer = Producer({"bootstrap.servers": side.bootstrap, "message.timeout.ms": 60_000, **config})
        producer.produce(
            side.name(mechanism),
            b"hello",
            partition=0,
            on_delivery=lambda error, message: delivered.append(
                (error and error.name(), message.partition(), message.offset())
            ),
        )
        assert producer.flush(60) == 0
        return delivered[0]

    assert both(sasl_gateway, kafka_side, deliver) == ((None, 0, 0), (None, 0, 0))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("who", ["wrong password", "unknown user"])
def test_a_failed_login_is_the_same_authentication_error(
    sasl_gateway: Side, kafka_side: Side, kafka_sasl_broker: KafkaSaslBroker, mechanism: str, who: str
) -> None:
    """librdkafka reports the same error, code and message (Kafka's words for each mechanism)."""
    user, password = kafka_sasl_broker.user, kafka_sasl_broker.password
    if who == "wrong password":
        password = "wrong"
    else:
        user = "mallory"
    gateway, kafka = both(
        sasl_gateway, kafka_side, lambda side: first_error(side, sasl_config(mechanism, user, password))
    )
    assert gateway.code() == kafka.code() == KafkaError._AUTHENTICATION
    assert without_addresses_and_times(gateway.str()) == without_addresses_and_times(kafka.str())


def test_a_wrong_plain_password_is_answered_after_the_delay(
    sasl_gateway: Side, kafka_side: Side, kafka_sasl_broker: KafkaSaslBroker
) -> None:
    """A failed PLAIN login, a known user's or an unknown one's, is answered with
    SASL_AUTHENTICATION_FAILED only after ``connection.failed.authentication.delay.ms`` (600 ms on
    both), then the connection closes; a good one is answered at once."""
    delay = kafka_sasl_broker.failed_delay_ms / 1000
    user, password = kafka_sasl_broker.user, kafka_sasl_broker.password

    def logins(side: Side) -> list[tuple[int | None, bool]]:
        seen = []
        for who, secret in ((user, "wrong"), ("mallory", "wrong"), (user, password)):
            error, took = plain_login(side, who, secret)
            seen.append((error, took >= delay))
        return seen

    gateway, kafka = both(sasl_gateway, kafka_side, logins)
    assert gateway == kafka == [(SASL_AUTHENTICATION_FAILED, True), (SASL_AUTHENTICATION_FAILED, True), (0, False)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_scram_proof_is_answered_after_the_delay(
    sasl_gateway: Side, kafka_side: Side, kafka_sasl_broker: KafkaSaslBroker, mechanism: str
) -> None:
    """A known user's SCRAM exchange with a wrong proof: the first message is answered at once with
    the salt, the final one with SASL_AUTHENTICATION_FAILED after the delay, on both."""
    delay = kafka_sasl_broker.failed_delay_ms / 1000

    def exchange(side: Side) -> list[tuple[int | None, bool]]:
        steps = scram_login_with_a_wrong_proof(side, mechanism, kafka_sasl_broker.user)
        return [(error, took >= delay) for error, took in steps]

    gateway, kafka = both(sasl_gateway, kafka_side, exchange)
    assert gateway == kafka == [(0, False), (SASL_AUTHENTICATION_FAILED, True)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_unknown_scram_user_is_refused_one_message_later_than_kafka_does(
    sasl_gateway: Side, kafka_side: Side, mechanism: str
) -> None:
    """A difference, on purpose: Kafka refuses an unknown SCRAM user at its first message, so its
    answer tells that the user does not exist; the gateway answers it with a salt as for a known
    user and refuses the final message, so users cannot be told apart. Both refuse with
    SASL_AUTHENTICATION_FAILED after the delay."""
    gateway, kafka = both(
        sasl_gateway,
        kafka_side,
        lambda side: [error for error, _took in scram_login_with_a_wrong_proof(side, mechanism, "mallory")],
    )
    assert kafka == [SASL_AUTHENTICATION_FAILED]
    assert gateway == [0, SASL_AUTHENTICATION_FAILED]


@pytest.mark.parametrize(
    "request_before_login",
    [
        pytest.param(frame(3, 1, struct.pack(">i", -1)), id="Metadata"),
        pytest.param(frame(99, 0), id="an unknown API key"),
        pytest.param(frame(36, 1, struct.pack(">i", 1) + b"x"), id="SaslAuthenticate before SaslHandshake"),
    ],
)
def test_a_request_before_login_closes_the_connection_without_an_answer(
    sasl_gateway: Side, kafka_side: Side, request_before_login: bytes
) -> None:
    """On a SASL listener, ApiVersions is answered before login; any other request, an API no
    broker knows included, closes the connection without an answer, on both."""

    def send(side: Side) -> tuple[bool, bytes | None]:
        with connect(side) as sock:
            sock.sendall(frame(18, 0))
            versions = answer_of(sock)
            sock.sendall(request_before_login)
            return versions is not None, answer_of(sock)

    assert both(sasl_gateway, kafka_side, send) == ((True, None), (True, None))


def test_connections_past_the_per_address_limit_are_closed_alike(
    sasl_gateway: Side, kafka_side: Side, kafka_sasl_broker: KafkaSaslBroker
) -> None:
    """``max.connections.per.ip`` on Kafka and ``max_connections_per_ip`` on the gateway, both 3: an
    address's fourth connection is accepted by the kernel and then closed without an answer, the
    three before it are served, and once one of them closes a new one is served again. (Made from
    another loopback address, so only these connections count.)"""
    source = kafka_sasl_broker.limited_address

    def served(sock: socket.socket) -> bool:
        try:
            sock.sendall(frame(18, 0))
            return answer_of(sock) is not None
        except OSError:  # reset: closed before the request
            return False

    def connections(side: Side) -> tuple[list[bool], bool]:
        socks = [connect(side, source) for _ in range(kafka_sasl_broker.per_address_limit + 1)]
        try:
            seen = [served(sock) for sock in socks]
            socks.pop(0).close()
            socks.pop().close()
            # The server learns of the close when it reads it: until then a new connection may be
            # refused, so each try is a new connection and a request (no waiting in between).
            deadline = time.monotonic() + 30
            while True:
                sock = connect(side, source)
                socks.append(sock)
                if served(sock):
                    return seen, True
                sock.close()
                socks.pop()
                if time.monotonic() > deadline:
                    return seen, False
        finally:
            for sock in socks:
                sock.close()

    gateway, kafka = both(sasl_gateway, kafka_side, connections)
    assert gateway == kafka == ([True, True, True, False], True)
