"""Thousands of idle connections, and more than the gateway has file descriptors for: the gateway
(a subprocess with its own open-files limit) keeps serving, and a real client keeps producing and
fetching."""

from __future__ import annotations

import logging
import os
import pathlib
import resource
import socket
import struct
import time
from collections.abc import Callable, Iterator

import anyio
import anyio.abc
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import receive_exactly
from gateway_process import GatewayProcess
from kafka_support import consume, produce_all

from adiskq.kafka._accepting import ResilientListener

IDLE = 2500
TEST_FILES = 8192  # the open-files limit this test process needs for its end of the idle connections


@pytest.fixture
def many_files() -> Iterator[None]:
    """This process's soft open-files limit raised to TEST_FILES for the test."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < TEST_FILES:
        pytest.fail(f"the hard open-files limit is {hard}; these tests need {TEST_FILES}: raise it (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, TEST_FILES), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def open_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections to the gateway that send nothing."""
    sockets: list[socket.socket] = []
    try:
        sockets.extend(socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(count))
    except BaseException:
        close_all(sockets)
        raise
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    """Close every socket."""
    for sock in sockets:
        sock.close()


def api_versions(sock: socket.socket) -> None:
    """One ApiVersions v0 request on an open connection, answered (the gateway serves it)."""
    message = struct.pack(">hhih", 18, 0, 5, 1) + b"t"
    sock.sendall(struct.pack(">i", len(message)) + message)
    size = struct.unpack(">i", receive_exactly(sock, 4))[0]
    assert struct.unpack(">i", receive_exactly(sock, size)[:4])[0] == 5  # its correlation id


def wait_until(condition: Callable[[], bool], gateway: GatewayProcess, *, what: str, timeout: float = 30) -> None:
    """Wait until ``condition()`` holds, failing after ``timeout`` seconds or if the gateway exits."""
    deadline = time.monotonic() + timeout
    while not condition():
        gateway.check_alive()
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{gateway.log()[-3000:]}"
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_thousands_of_idle_connections_leave_a_client_served(
    tmp_path: pathlib.Path, backend: str, many_files: None
) -> None:
    """2,500 idle connections are all held open, and meanwhile a client produces and fetches."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend, nofile=TEST_FILES) as gateway:
        idle = open_idle(gateway.port, IDLE)
        try:
            api_versions(idle[-1])  # the last one is served: every one before it was accepted
            records = [(b"k%d" % i, b"v%d" % i, [], 1_700_000_000_000 + i) for i in range(20)]
            started = time.monotonic()
            produce_all(gateway.bootstrap, "busy", records, acks="all")
            got = consume(gateway.bootstrap, "busy", 0, 20)
            elapsed = time.monotonic() - started
            assert [(m.key(), m.value()) for m in got] == [(k, v) for k, v, _, _ in records]
            assert elapsed < 20, f"producing and fetching 20 records took {elapsed:.1f} s"
            assert gateway.open_descriptors() > IDLE  # none of the idle ones was dropped
            api_versions(idle[0])  # the first is still open and served
        finally:
            close_all(idle)
        gateway.check_alive()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_more_connections_than_files_allow_leave_clients_served(
    tmp_path: pathlib.Path, backend: str, many_files: None
) -> None:
    """With more connections coming than its open-files limit allows, the gateway stops accepting
    at its connection limit, keeps descriptors for its files and serves its clients; once
    connections close it accepts new ones."""
    root = tmp_path / "root"
    root.mkdir()
    with GatewayProcess(root, backend, nofile=256) as gateway:
        producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0, "acks": "all"})
        consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "t", "enable.auto.commit": False})
        consumer.assign([TopicPartition("starved", 0, 0)])

        def round_trip(value: bytes) -> None:
            producer.produce("starved", value, partition=0)
            assert producer.flush(30) == 0, "a record was left undelivered"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    assert message.value() == value
                    return
            raise AssertionError(f"{value!r} was not fetched within 30 s:\n{gateway.log()[-3000:]}")

        try:
            round_trip(b"before")  # the client's connections are open
            idle = open_idle(gateway.port, 400)  # more than 256 descriptors: the backlog keeps the rest
            try:
                wait_until(lambda: "the most its open-files limit" in gateway.log(), gateway, what="the limit")
                round_trip(b"starved")  # the served connections go on
            finally:
                close_all(idle)
            wait_until(lambda: "accepting clients again" in gateway.log(), gateway, what="accepting again")
            records = [(b"k", b"after", [], 1_700_000_000_000)]
            produce_all(gateway.bootstrap, "starved", records)  # a new client is accepted
            assert [m.value() for m in consume(gateway.bootstrap, "starved", 0, 1, start=2)] == [b"after"]
        finally:
            producer.flush(10)
            consumer.close()
        gateway.check_alive()


class OnLog(logging.Handler):
    """Sets an event when a record containing ``text`` is logged (in the event loop's thread)."""

    def __init__(self, text: str, event: anyio.Event) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


@pytest.mark.anyio
async def test_accepting_outlives_running_out_of_descriptors(caplog: pytest.LogCaptureFixture) -> None:
    """When an accept fails for want of file descriptors (EMFILE), the listener logs it and keeps
    accepting: the clients that came meanwhile are served once descriptors are free again."""
    clients = [socket.socket() for _ in range(3)]  # their descriptors exist before the limit drops
    accepted: list[anyio.abc.SocketStream] = []
    all_accepted = anyio.Event()

    async def handler(stream: anyio.abc.SocketStream) -> None:
        accepted.append(stream)
        if len(accepted) == len(clients):
            all_accepted.set()
        await anyio.sleep_forever()

    refused = anyio.Event()
    logging.getLogger("adiskq.kafka").addHandler(on_log := OnLog("cannot accept more", refused))
    listener = ResilientListener(await anyio.create_tcp_listener(local_host="127.0.0.1"), limit=None)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        async with anyio.create_task_group() as serving:
            serving.start_soon(listener.serve, handler)
            lowest_free = os.dup(0)  # the descriptor the next accept would get
            os.close(lowest_free)
            with caplog.at_level(logging.INFO, logger="adiskq.kafka"):
                resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # no new descriptor at all
                try:
                    for client in clients:
                        client.connect(("127.0.0.1", port))  # completes in the kernel's backlog
                    with anyio.fail_after(10):
                        await refused.wait()
                finally:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
                with anyio.fail_after(10):
                    await all_accepted.wait()
            assert any("accepting Kafka clients again" in r.getMessage() for r in caplog.records)
            serving.cancel_scope.cancel()
    finally:
        logging.getLogger("adiskq.kafka").removeHandler(on_log)
        for stream in accepted:
            await stream.aclose()
        await listener.aclose()
        for client in clients:
            client.close()
