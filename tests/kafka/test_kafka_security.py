"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and TLS on the gateway, with real clients."""

from __future__ import annotations

import asyncio
import json
import pathlib
import socket
import ssl
import struct
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from group_support import ServeProcess, bootstrap, running_gateway
from support.cli import invoke

from adiskq.kafka import SecurityOptions

# kafka-python reads its bundled data with importlib.resources' deprecated read_text and open_text.
pytestmark = [
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

USER, PASSWORD = "alice", "correct horse"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A credentials file with one user, written by ``adiskq kafka-user``."""
    path = str(tmp_path_factory.mktemp("sasl") / "users.json")
    result = invoke("kafka-user", path, USER, "--password-stdin", "--iterations", "4096", input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for localhost and 127.0.0.1 and its key, made by ``openssl``."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def round_trip(servers: str, topic: str, **config: Any) -> None:
    """Produce one message and read it back with librdkafka under ``config``."""
    producer = Producer({"bootstrap.servers": servers, **config})
    producer.produce(topic, b"hello", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "g", **config})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "the message never came back"
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                assert message.value() == b"hello"
                return
    finally:
        consumer.close()


def refused(servers: str, **config: Any) -> KafkaError:
    """The error librdkafka reports when the gateway refuses it (within 30 s)."""
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": servers, "error_cb": errors.append, **config})
    deadline = time.monotonic() + 30
    while not errors:
        assert time.monotonic() < deadline, "the client was never refused"
        producer.poll(0.1)
    return errors[0]


def sasl(mechanism: str, password: str = PASSWORD, protocol: str = "SASL_PLAINTEXT") -> dict[str, str]:
    return {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": password,
    }


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_login_produces_and_consumes(
    tmp_path: pathlib.Path, credentials: str, backend: str, mechanism: str
) -> None:
    """A librdkafka client that authenticates with the right password produces and consumes."""
    security = SecurityOptions(sasl_credentials=credentials)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        round_trip(bootstrap(gateway), "secured", **sasl(mechanism))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize(("user", "password"), [(USER, "wrong"), ("mallory", PASSWORD)], ids=["password", "user"])
def test_sasl_wrong_login_is_refused(
    tmp_path: pathlib.Path, credentials: str, backend: str, mechanism: str, user: str, password: str
) -> None:
    """A wrong password or an unknown user is an authentication failure the client reports, for every mechanism."""
    security = SecurityOptions(sasl_credentials=credentials)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        error = refused(bootstrap(gateway), **{**sasl(mechanism, password=password), "sasl.username": user})
        assert error.code() == KafkaError._AUTHENTICATION, error
        assert "invalid" in error.str().lower()  # the gateway's refusal, not the client's check
        assert "Authentication failed" in error.str()


def frame(api_key: int, api_version: int, body: bytes = b"") -> bytes:
    message = struct.pack(">hhih", api_key, api_version, 1, 1) + b"t" + body
    return struct.pack(">i", len(message)) + message


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_unauthenticated_request_closes_connection(tmp_path: pathlib.Path, credentials: str, backend: str) -> None:
    """Without authenticating, ApiVersions is answered but a Metadata request closes the connection."""
    security = SecurityOptions(sasl_credentials=credentials)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
            sock.sendall(frame(18, 0))
            (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            assert len(sock.recv(size, socket.MSG_WAITALL)) == size
            sock.sendall(frame(3, 1, struct.pack(">i", -1)))  # Metadata v1, all topics
            assert sock.recv(4) == b""  # closed, no answer
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
            sock.sendall(frame(99, 0))  # an API no broker serves: not answered UNSUPPORTED_VERSION either
            assert sock.recv(4) == b""
        error = refused(bootstrap(gateway))  # a client that does not speak SASL at all
        assert error.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error


def exchange(sock: socket.socket, data: bytes) -> bytes:
    """Send a size-prefixed frame; the answer's body ("" if the gateway closed the connection)."""
    sock.sendall(struct.pack(">i", len(data)) + data)
    prefix = sock.recv(4, socket.MSG_WAITALL)
    if not prefix:
        return b""
    (size,) = struct.unpack(">i", prefix)
    return sock.recv(size, socket.MSG_WAITALL) if size else b"\0"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_handshake_v0_takes_bare_tokens(tmp_path: pathlib.Path, credentials: str, backend: str) -> None:
    """After a version-0 SaslHandshake the PLAIN token travels bare; then requests are answered, and a
    wrong password closes the connection."""
    security = SecurityOptions(sasl_credentials=credentials)
    handshake = frame(17, 0, struct.pack(">h", 5) + b"PLAIN")[4:]
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        for password, authenticated in ((PASSWORD, True), ("wrong", False)):
            with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
                answer = exchange(sock, handshake)
                assert answer[4:6] == b"\0\0"  # correlation id, then error code NONE
                token = b"\0" + USER.encode() + b"\0" + password.encode()
                assert (exchange(sock, token) == b"\0") is authenticated  # an empty token back, or closed
                if authenticated:
                    assert exchange(sock, frame(3, 1, struct.pack(">i", -1))[4:])  # Metadata is answered


def test_credentials_file_keeps_no_password(credentials: str) -> None:
    """The credentials file holds salted SCRAM keys for both hashes, not the password."""
    text = pathlib.Path(credentials).read_text()
    assert PASSWORD not in text
    assert set(json.loads(text)["users"][USER]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_tls_with_self_signed_certificate(tmp_path: pathlib.Path, certificate: tuple[str, str], backend: str) -> None:
    """Over TLS a client trusting the certificate produces and consumes; one that does not is refused."""
    cert, key = certificate
    with running_gateway(str(tmp_path), backend, security=SecurityOptions(tls_cert=cert, tls_key=key)) as gateway:
        servers = bootstrap(gateway)
        round_trip(servers, "private", **{"security.protocol": "SSL", "ssl.ca.location": cert})
        error = refused(servers, **{"security.protocol": "SSL"})  # the system's CAs do not know it
        assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sasl_over_tls_with_python_clients(
    tmp_path: pathlib.Path, credentials: str, certificate: tuple[str, str], backend: str
) -> None:
    """SASL_SSL: librdkafka with SCRAM-SHA-512, kafka-python with SCRAM-SHA-256, aiokafka with PLAIN."""
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    cert, key = certificate
    security = SecurityOptions(sasl_credentials=credentials, tls_cert=cert, tls_key=key)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        servers = bootstrap(gateway)
        round_trip(servers, "both", **sasl("SCRAM-SHA-512", protocol="SASL_SSL"), **{"ssl.ca.location": cert})
        producer = KafkaProducer(
            bootstrap_servers=servers,
            security_protocol="SASL_SSL",
            ssl_cafile=cert,
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username=USER,
            sasl_plain_password=PASSWORD,
        )
        try:
            producer.send("both", b"from kafka-python", partition=0).get(timeout=30)
        finally:
            producer.close()

        async def aiokafka_send() -> None:
            context = ssl.create_default_context(cafile=cert)
            producer = AIOKafkaProducer(
                bootstrap_servers=servers,
                security_protocol="SASL_SSL",
                ssl_context=context,
                sasl_mechanism="PLAIN",
                sasl_plain_username=USER,
                sasl_plain_password=PASSWORD,
            )
            await producer.start()
            try:
                await producer.send_and_wait("both", b"from aiokafka", partition=0)
            finally:
                await producer.stop()

        asyncio.run(aiokafka_send())
    import adiskq

    assert adiskq.stats(str(tmp_path / "both")).message_count == 3


def kcat(port: int, cert: str, *args: str, stdin: bytes | None = None) -> bytes:
    """kcat over SASL_SSL with SCRAM-SHA-256 as alice."""
    result = subprocess.run(
        [
            "kcat", "-b", f"127.0.0.1:{port}", "-q",
            "-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={cert}",
            "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", f"sasl.username={USER}", "-X", f"sasl.password={PASSWORD}",
            *args,
        ],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def test_serve_command_with_sasl_tls_and_groups(
    tmp_path: pathlib.Path, credentials: str, certificate: tuple[str, str]
) -> None:
    """`adiskq serve --sasl-credentials --tls-cert --tls-key`: kcat produces and reads as a group over
    SASL_SSL; after a restart of the server the group resumes where it committed."""
    cert, key = certificate
    options = ["--sasl-credentials", credentials, "--tls-cert", cert, "--tls-key", key]
    options += ["--group-min-session-timeout-ms", "100"]
    group = ["-G", "ops", "logs", "-f", "%s\\n", "-X", "auto.offset.reset=earliest"]
    group += ["-X", "session.timeout.ms=1000", "-X", "heartbeat.interval.ms=100"]
    server = ServeProcess(str(tmp_path), *options)
    try:
        kcat(server.port, cert, "-P", "-t", "logs", stdin=b"one\ntwo\nthree\n")
        assert kcat(server.port, cert, *group, "-c", "3").split() == [b"one", b"two", b"three"]
    finally:
        assert server.stop() == 0
    server = ServeProcess(str(tmp_path), *options)
    try:
        kcat(server.port, cert, "-P", "-t", "logs", stdin=b"four\n")
        assert kcat(server.port, cert, *group, "-c", "1").split() == [b"four"]
    finally:
        assert server.stop() == 0


@pytest.mark.anyio
async def test_embedded_gateway_with_sasl_and_group(
    tmp_path: pathlib.Path, credentials: str, anyio_backend: str
) -> None:
    """`async with KafkaGateway(..., groups=, security=)` in the caller's event loop: a SCRAM client joins a
    group there, commits, and the commit is in the stream's groups."""
    import anyio.to_thread

    import adiskq
    from adiskq.kafka import GroupOptions, KafkaGateway

    security = SecurityOptions(sasl_credentials=credentials, sasl_mechanisms=("SCRAM-SHA-512",))
    async with KafkaGateway(
        str(tmp_path),
        port=0,
        groups=GroupOptions(min_session_timeout_ms=100, initial_rebalance_delay_ms=0),
        security=security,
    ) as gateway:
        servers = f"127.0.0.1:{gateway.port}"

        def consume_and_commit() -> None:
            round_trip(servers, "embedded", **sasl("SCRAM-SHA-512"))
            member = Consumer(
                {
                    "bootstrap.servers": servers,
                    "group.id": "embedded-group",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 1000,
                    "heartbeat.interval.ms": 100,
                    **sasl("SCRAM-SHA-512"),
                }
            )
            member.subscribe(["embedded"])
            try:
                deadline = time.monotonic() + 30
                while True:
                    assert time.monotonic() < deadline, "the group never read the message"
                    message = member.poll(0.1)
                    if message is not None and message.error() is None:
                        member.commit(message, asynchronous=False)
                        return
            finally:
                member.close()

        await anyio.to_thread.run_sync(consume_and_commit)
    assert adiskq.stats(str(tmp_path / "embedded")).groups["embedded-group"] == {0: 1}


SLOW_ITERATIONS = 1_000_000  # a PBKDF2 that takes a good part of a second


@pytest.fixture(scope="module")
def slow_credentials(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A credentials file whose keys take SLOW_ITERATIONS to derive."""
    path = str(tmp_path_factory.mktemp("sasl-slow") / "users.json")
    result = invoke(
        "kafka-user", path, USER, "--password-stdin", "--iterations", str(SLOW_ITERATIONS), input=PASSWORD + "\n"
    )
    assert result.exit_code == 0, result.output
    return path


def send_plain_login(sock: socket.socket, user: str, password: str) -> None:
    """SaslHandshake v1 for PLAIN (its answer read), then a SaslAuthenticate v1 with the token (sent only)."""
    assert exchange(sock, frame(17, 1, struct.pack(">h", 5) + b"PLAIN")[4:])[4:6] == b"\0\0"
    token = b"\0" + user.encode() + b"\0" + password.encode()
    sock.sendall(frame(36, 1, struct.pack(">i", len(token)) + token))


def plain_login_error(sock: socket.socket) -> int:
    """The error code of the SaslAuthenticate answer ``send_plain_login`` waits for."""
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    body = sock.recv(size, socket.MSG_WAITALL)
    return int(struct.unpack_from(">h", body, 4)[0])


def timed_plain_login(port: int, user: str, password: str) -> tuple[int, float]:
    """A PLAIN login on a new connection: its answer's error code, and the seconds it took."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        started = time.monotonic()
        send_plain_login(sock, user, password)
        error = plain_login_error(sock)
        return error, time.monotonic() - started


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_plain_key_derivation_leaves_other_clients_served(
    tmp_path: pathlib.Path, slow_credentials: str, backend: str
) -> None:
    """While PLAIN logins derive their keys (a PBKDF2 of a good part of a second each), another client
    asking ApiVersions again and again is answered at once every time: the derivations run off the
    event loop."""
    security = SecurityOptions(sasl_credentials=slow_credentials, failed_authentication_delay_ms=0)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        logins = [socket.create_connection(("127.0.0.1", gateway.port), timeout=30) for _ in range(2)]
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as other:
            started = time.monotonic()
            for login in logins:
                send_plain_login(login, USER, PASSWORD)
            slowest = 0.0
            for login in logins:
                login.setblocking(False)
            answered: set[int] = set()
            while len(answered) < len(logins):  # ask until both logins are answered
                asked = time.monotonic()
                assert len(exchange(other, frame(18, 0)[4:])) > 6  # ApiVersions answered
                slowest = max(slowest, time.monotonic() - asked)
                for i, login in enumerate(logins):
                    try:
                        if i not in answered and login.recv(4, socket.MSG_PEEK):
                            answered.add(i)
                    except BlockingIOError:
                        pass
                assert time.monotonic() - started < 60, "the logins were never answered"
            took = time.monotonic() - started
        for login in logins:
            login.setblocking(True)
            assert plain_login_error(login) == 0
            login.close()
    assert took > 0.3, f"the derivations took only {took:.3f} s: too fast to tell"
    assert slowest < took / 3, (slowest, took)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_plain_refusal_of_an_unknown_user_costs_a_known_users_derivation(
    tmp_path: pathlib.Path, slow_credentials: str, backend: str
) -> None:
    """A PLAIN login of a user the file lacks takes as long to refuse as a wrong password of a known
    one: the time of a refusal does not tell which users exist."""
    security = SecurityOptions(sasl_credentials=slow_credentials, failed_authentication_delay_ms=0)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        known_error, known = timed_plain_login(gateway.port, USER, "wrong")
        unknown_error, unknown = timed_plain_login(gateway.port, "mallory", "wrong")
    assert known_error == unknown_error == KafkaError.SASL_AUTHENTICATION_FAILED
    assert known > 0.2, f"the derivation took only {known:.3f} s: too fast to tell"
    assert unknown > known / 2, (unknown, known)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_failed_login_is_answered_after_the_authentication_delay(
    tmp_path: pathlib.Path, credentials: str, backend: str
) -> None:
    """A failed login is answered (then the connection closed) only after
    failed_authentication_delay_ms, Kafka's connection.failed.authentication.delay.ms; a good one at once."""
    security = SecurityOptions(sasl_credentials=credentials, failed_authentication_delay_ms=600)
    with running_gateway(str(tmp_path), backend, security=security) as gateway:
        error, refused_in = timed_plain_login(gateway.port, USER, "wrong")
        assert error == KafkaError.SASL_AUTHENTICATION_FAILED
        assert refused_in >= 0.6
        error, accepted_in = timed_plain_login(gateway.port, USER, PASSWORD)
        assert error == 0
        assert accepted_in < 0.6
    assert SecurityOptions().failed_authentication_delay_ms == 100  # Kafka's default
