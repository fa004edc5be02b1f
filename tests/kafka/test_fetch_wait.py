"""Fetch's long poll is woken by the stream's own wake-ups, never by a timer."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

import adiskq._async.notify

_PUSH = textwrap.dedent(
    """
    import sys, anyio, adiskq

    async def main():
        async with adiskq.Producer(sys.argv[1]) as producer:
            await producer.push(sys.argv[2].encode(), key="k")

    anyio.run(main)
    """
)


def push_from_another_process(path: str, value: str) -> None:
    """Push one message with a library producer in a process of its own."""
    subprocess.run([sys.executable, "-c", _PUSH, path, value], check=True, timeout=60)


def _long_polls(gateway) -> int:
    """How many of the gateway's connections wait in a Fetch now (their waiter is armed)."""
    core = gateway.gateway._core
    return sum(not connection.fetches.waiter.fired for connection in list(core.connections))


def test_fetch_wakes_on_a_write_by_another_process(gateway, topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kafka consumer waiting in a 60 s long poll gets a message another process's library producer
    pushes at once: inotify wakes the Fetch (the backup poll is set to 10 minutes here)."""
    monkeypatch.setattr(adiskq._async.notify, "BACKUP_POLL_SECONDS", 600.0)
    path = gateway.path(topic)
    push_from_another_process(path, "before")
    consumer = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "group.id": "long-poll",
            "fetch.wait.max.ms": 60_000,
            "socket.timeout.ms": 120_000,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 1)])
        waiting = _long_polls(gateway)
        deadline = time.monotonic() + 30
        while _long_polls(gateway) <= waiting and time.monotonic() < deadline:
            consumer.poll(0.05)  # the client sends its Fetch from its own thread; this waits for it
        assert _long_polls(gateway) > waiting, "the consumer's Fetch never waited"
        pushed = time.monotonic()
        push_from_another_process(path, "after")
        message = None
        while message is None and time.monotonic() < pushed + 30:
            message = consumer.poll(0.1)
        received = time.monotonic()
    finally:
        consumer.close()
    assert message is not None
    assert (message.offset(), message.value()) == (1, b"after")
    assert received - pushed < 20  # far below the 60 s long poll it was waiting in


def _fetch(gateway, topic: str, offset: int, min_bytes: int, max_wait_ms: int, partition_max_bytes: int = 1 << 20):
    """One raw Fetch v12 of partition 0; the partition's answer."""
    import datetime as dt

    from conftest import call
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import TopicName

    request = FetchRequest(
        max_wait=dt.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes),),
            ),
        ),
        forgotten_topics_data=(),
    )
    return call(gateway.gateway.port, request).responses[0].partitions[0]


def test_min_bytes_waits_for_max_wait_then_answers_what_there_is(gateway, topic: str) -> None:
    """With less than min_bytes at hand the Fetch waits out max_wait_ms, then answers with what there is;
    with enough it answers at once."""
    from kafka_support import produce_all

    produce_all(gateway.bootstrap, topic, [(b"k", b"x" * 100, [], 1_700_000_000_000)])
    started = time.monotonic()
    answer = _fetch(gateway, topic, 0, min_bytes=1_000_000, max_wait_ms=300)
    waited = time.monotonic() - started
    assert waited >= 0.29
    assert answer.error_code.value == 0
    assert answer.high_watermark == 1
    assert b"x" * 100 in answer.records
    started = time.monotonic()
    answer = _fetch(gateway, topic, 0, min_bytes=1, max_wait_ms=30_000)
    assert time.monotonic() - started < 10
    assert b"x" * 100 in answer.records


def test_offset_past_the_end_is_out_of_range(gateway, topic: str) -> None:
    """A Fetch past the next offset answers OFFSET_OUT_OF_RANGE at once, with empty records."""
    from kafka_support import produce_all

    produce_all(gateway.bootstrap, topic, [(b"k", b"v", [], 1_700_000_000_000)])
    answer = _fetch(gateway, topic, 5, min_bytes=1, max_wait_ms=30_000)
    assert answer.error_code.value == 1
    assert answer.records == b""


def test_fetch_reports_the_partitions_bounds_as_retention_moves_them(gateway, topic: str) -> None:
    """On one connection, Fetches answer the high watermark and the log start offset of the moment,
    before and after retention deleted the oldest segments."""
    import datetime as dt
    import io
    import socket
    import struct

    import anyio
    from conftest import receive_exactly
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.fetch.v12.response import FetchResponse
    from kio.schema.types import TopicName
    from kio.serial import entity_reader, entity_writer

    import adiskq

    path = gateway.path(topic)

    async def write(count: int, vacuum: bool = False) -> None:
        async with adiskq.Producer(path, segment_size_bytes=4096) as producer:
            await producer.push_many([adiskq.Record(b"v" * 100, key=b"k%d" % i) for i in range(count)])
            if vacuum:
                await producer.vacuum(adiskq.Retention(max_bytes=4096))

    def fetch(sock: socket.socket, offset: int) -> tuple[int, int, int]:
        body = io.BytesIO()
        partition = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        request = FetchRequest(
            max_wait=dt.timedelta(0),
            min_bytes=0,
            topics=(FetchTopic(topic=TopicName(topic), partitions=(partition,)),),
            forgotten_topics_data=(),
        )
        entity_writer(FetchRequest)(body, request)
        message = struct.pack(">hhih", 1, 12, 3, 1) + b"t\0" + body.getvalue()
        sock.sendall(struct.pack(">i", len(message)) + message)
        payload = receive_exactly(sock, struct.unpack(">i", receive_exactly(sock, 4))[0])
        answer = entity_reader(FetchResponse)(payload, 5)[0].responses[0].partitions[0]
        assert answer.error_code.value == 0
        return answer.high_watermark, answer.log_start_offset, answer.records.count(b"v" * 100)

    anyio.run(write, 100)
    with socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=10) as sock:
        assert fetch(sock, 0) == (100, 0, 100)
        assert fetch(sock, 100) == (100, 0, 0)
        anyio.run(write, 100, True)
        oldest = adiskq.stats(path).partitions[0].oldest_offset
        assert oldest > 0
        assert fetch(sock, 200) == (200, oldest, 0)
        assert fetch(sock, 150) == (200, oldest, 50)


def test_long_polls_one_after_another_on_one_connection_are_each_woken(gateway, topic: str) -> None:
    """On one connection, Fetch after Fetch waits at the end and is answered as soon as a message is
    written, whether another process writes it (inotify) or a Kafka Produce to the gateway (its own
    producer's wake-up); the last, with nothing written, answers empty after its max_wait_ms."""
    import datetime as dt
    import io
    import socket
    import struct

    from conftest import receive_exactly
    from kafka_support import produce_all
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.fetch.v12.response import FetchResponse
    from kio.schema.types import TopicName
    from kio.serial import entity_reader, entity_writer

    path = gateway.path(topic)
    push_from_another_process(path, "first")  # the topic, with offset 0

    def send_fetch(sock: socket.socket, offset: int, max_wait_ms: int) -> None:
        body = io.BytesIO()
        partition = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
        request = FetchRequest(
            max_wait=dt.timedelta(milliseconds=max_wait_ms),
            min_bytes=1,
            topics=(FetchTopic(topic=TopicName(topic), partitions=(partition,)),),
            forgotten_topics_data=(),
        )
        entity_writer(FetchRequest)(body, request)
        message = struct.pack(">hhih", 1, 12, 3, 1) + b"t\0" + body.getvalue()
        sock.sendall(struct.pack(">i", len(message)) + message)

    def answer(sock: socket.socket) -> tuple[int, bytes]:
        payload = receive_exactly(sock, struct.unpack(">i", receive_exactly(sock, 4))[0])
        partition = entity_reader(FetchResponse)(payload, 5)[0].responses[0].partitions[0]
        assert partition.error_code.value == 0
        return partition.high_watermark, partition.records

    def wait_until_parked(waiting: int) -> None:
        deadline = time.monotonic() + 30
        while _long_polls(gateway) <= waiting:
            assert time.monotonic() < deadline, "the Fetch never waited"
            time.sleep(0.005)

    writes = [
        lambda: push_from_another_process(path, "second"),
        lambda: push_from_another_process(path, "third"),
        lambda: produce_all(gateway.bootstrap, topic, [(b"k", b"fourth", [], 1_700_000_000_000)]),
        lambda: produce_all(gateway.bootstrap, topic, [(b"k", b"fifth", [], 1_700_000_000_000)]),
    ]
    with socket.create_connection(("127.0.0.1", gateway.gateway.port), timeout=60) as sock:
        values = [b"second", b"third", b"fourth", b"fifth"]
        for offset, (write, value) in enumerate(zip(writes, values, strict=True), start=1):
            waiting = _long_polls(gateway)
            send_fetch(sock, offset, max_wait_ms=60_000)
            wait_until_parked(waiting)
            written = time.monotonic()
            write()
            high_watermark, records = answer(sock)
            assert time.monotonic() - written < 20  # far below the 60 s long poll
            assert high_watermark == offset + 1
            assert value in records
        started = time.monotonic()
        send_fetch(sock, 5, max_wait_ms=300)
        high_watermark, records = answer(sock)
        assert time.monotonic() - started >= 0.29
        assert (high_watermark, records) == (5, b"")
