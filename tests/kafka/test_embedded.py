"""The gateway embedded in a service's own event loop (asyncio and Trio), beside library producers
and consumers of the same streams."""

from __future__ import annotations

import os
import pathlib

import anyio
import anyio.abc
import anyio.to_thread
import pytest
from kafka_support import consume, produce_all

import adiskq
from adiskq.kafka import KafkaGateway

pytestmark = pytest.mark.anyio


async def _read_all(path: str, partition: int = 0) -> list[adiskq.Message]:
    async with adiskq.Consumer(path, partition, end="close") as consumer:
        return [message async for message in consumer]


async def test_kafka_producer_to_library_consumer(tmp_path: pathlib.Path, anyio_backend: str) -> None:
    """Records a Kafka client produces to the embedded gateway are read by a library consumer: null
    key and value kept apart from empty ones, header order kept, milliseconds as nanoseconds."""
    records = [
        (None, b"a", [("x", b"1"), ("b", b"2")], 1_700_000_000_001),
        (b"", None, [], 1_700_000_000_002),
        (b"k", b"", [], 1_700_000_000_003),
    ]
    async with KafkaGateway(tmp_path, port=0) as gateway:
        await anyio.to_thread.run_sync(produce_all, f"127.0.0.1:{gateway.port}", "orders", records)
        messages = await _read_all(os.path.join(tmp_path, "orders"))
        back = await anyio.to_thread.run_sync(consume, f"127.0.0.1:{gateway.port}", "orders", 0, 3)
    assert [(m.key, m.value, m.timestamp_ns) for m in messages] == [
        (b"", b"a", 1_700_000_000_001_000_000),
        (b"", b"", 1_700_000_000_002_000_000),
        (b"k", b"", 1_700_000_000_003_000_000),
    ]
    assert list(messages[0].headers.items()) == [("x", b"1"), ("b", b"2"), ("adiskq.kafka.null", b"key")]
    assert messages[1].headers["adiskq.kafka.null"] == b"value"
    assert [(m.key(), m.value(), m.headers() or [], m.timestamp()[1]) for m in back] == records


async def test_library_producer_to_kafka_consumer(tmp_path: pathlib.Path, anyio_backend: str) -> None:
    """A library producer's messages reach a Kafka consumer already waiting in a long poll; the
    nanosecond timestamp goes out as its millisecond."""
    path = os.path.join(tmp_path, "events")
    async with adiskq.Producer(path) as producer, KafkaGateway(tmp_path, port=0) as gateway:
        await producer.push(b"first", key="k", timestamp=1_700_000_000_000_999_999)
        bootstrap = f"127.0.0.1:{gateway.port}"
        async with anyio.create_task_group() as task_group:
            got: list[list[object]] = []

            async def kafka_reader() -> None:
                got.append(await anyio.to_thread.run_sync(lambda: consume(bootstrap, "events", 0, 3)))

            task_group.start_soon(kafka_reader)
            await producer.push(b"second", key="k", headers={"h": b"v"})
            await producer.push(b"third", key="k")
    messages = got[0]
    assert [(m.offset(), m.key(), m.value()) for m in messages] == [  # type: ignore[attr-defined]
        (0, b"k", b"first"),
        (1, b"k", b"second"),
        (2, b"k", b"third"),
    ]
    assert messages[0].timestamp()[1] == 1_700_000_000_000  # type: ignore[attr-defined]
    assert messages[1].headers() == [("h", b"v")]  # type: ignore[attr-defined]


async def test_shared_writers_side_by_side(tmp_path: pathlib.Path, anyio_backend: str) -> None:
    """With shared=True the gateway writes a stream beside a library shared producer; every
    message of both is there, with contiguous offsets."""
    path = os.path.join(tmp_path, "mixed")
    async with adiskq.Producer(path, shared=True) as producer, KafkaGateway(tmp_path, port=0, shared=True) as gateway:
        await producer.push(b"library 1", key="a")
        records = [(b"b", b"kafka %d" % i, [], 1_700_000_000_000 + i) for i in range(3)]
        await anyio.to_thread.run_sync(produce_all, f"127.0.0.1:{gateway.port}", "mixed", records)
        await producer.push(b"library 2", key="a")
    messages = await _read_all(path)
    assert [m.offset for m in messages] == [0, 1, 2, 3, 4]
    assert sorted(m.value for m in messages) == sorted([b"library 1", b"library 2", b"kafka 0", b"kafka 1", b"kafka 2"])


async def test_acks_all_on_sync_stream(tmp_path: pathlib.Path, anyio_backend: str) -> None:
    """acks=all on a flush="sync" gateway: each acknowledged record is in the stream when the ack comes."""
    async with KafkaGateway(tmp_path, port=0, flush="sync") as gateway:
        records = [(b"k", b"%d" % i, [], 1_700_000_000_000 + i) for i in range(20)]
        reports = await anyio.to_thread.run_sync(
            lambda: produce_all(f"127.0.0.1:{gateway.port}", "durable", records, acks="all")
        )
        assert [r.offset() for r in reports] == list(range(20))
        assert adiskq.stats(os.path.join(tmp_path, "durable")).message_count == 20


async def _send_fetch(stream: anyio.abc.ByteStream, offset: int, max_wait_ms: int, min_bytes: int = 1) -> None:
    """A raw Fetch v12 of partition 0 of "events" from ``offset``."""
    import datetime as dt
    import io
    import struct

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.types import TopicName
    from kio.serial import entity_writer

    partition = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    request = FetchRequest(
        max_wait=dt.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        topics=(FetchTopic(topic=TopicName("events"), partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    body = io.BytesIO()
    entity_writer(FetchRequest)(body, request)
    message = struct.pack(">hhih", 1, 12, 3, 1) + b"t\0" + body.getvalue()
    await stream.send(struct.pack(">i", len(message)) + message)


async def _fetch_answer(stream: anyio.abc.ByteStream) -> tuple[int, bytes]:
    """The next Fetch answer's high watermark and records (partition 0 of its one topic)."""
    import struct

    from kio.schema.fetch.v12.response import FetchResponse
    from kio.serial import entity_reader

    received = b""
    while len(received) < 4 or len(received) < 4 + struct.unpack_from(">i", received)[0]:
        received += await stream.receive()
    partition = entity_reader(FetchResponse)(received[4:], 5)[0].responses[0].partitions[0]
    assert partition.error_code.value == 0
    return partition.high_watermark, partition.records


async def _until_parked(gateway: KafkaGateway, parked: int) -> None:
    """Until ``parked`` of the gateway's connections wait in a Fetch (their waiter armed: a state
    with no event to wait on, looked at every 2 ms, within 30 s)."""
    core = gateway._core
    assert core is not None
    with anyio.fail_after(30):
        while sum(not c.fetches.waiter.fired for c in list(core.connections)) < parked:  # noqa: ASYNC110
            await anyio.sleep(0.002)


async def _waiting_connection(gateway: KafkaGateway, producer: adiskq.Producer) -> tuple[anyio.abc.ByteStream, int]:
    """A connection whose Fetch waited and was answered (its next Fetch arms before its first look),
    and the offset it reads next."""
    stream = await anyio.connect_tcp("127.0.0.1", gateway.port)
    await producer.push(b"first", key="k")
    await _send_fetch(stream, 1, max_wait_ms=60_000)
    await _until_parked(gateway, 1)
    await producer.push(b"second", key="k")
    with anyio.fail_after(20):
        assert (await _fetch_answer(stream))[0] == 2
    return stream, 2


async def test_a_waiting_fetch_short_of_min_bytes_waits_on_for_the_rest(
    tmp_path: pathlib.Path, anyio_backend: str
) -> None:
    """A Fetch waiting for min_bytes that one write does not bring goes on waiting after that
    write's wake-up, and is answered with both writes once the second lands."""
    path = os.path.join(tmp_path, "events")
    async with adiskq.Producer(path) as producer, KafkaGateway(tmp_path, port=0) as gateway:
        stream, offset = await _waiting_connection(gateway, producer)
        async with stream:
            # One 300-byte value makes a batch of about 380 bytes: short of min_bytes 500.
            await _send_fetch(stream, offset, max_wait_ms=60_000, min_bytes=500)
            await _until_parked(gateway, 1)
            await producer.push(b"a" * 300, key="k")
            await _until_parked(gateway, 1)  # that write's wake-up came, and the Fetch waits again
            await producer.push(b"b" * 300, key="k")
            with anyio.fail_after(20):
                high_watermark, records = await _fetch_answer(stream)
    assert high_watermark == 4
    assert b"a" * 300 in records
    assert b"b" * 300 in records


async def test_a_client_leaving_during_a_long_poll_is_let_go_at_the_next_write(
    tmp_path: pathlib.Path, anyio_backend: str
) -> None:
    """A client that closes its connection while its Fetch waits: the next write answers the Fetch
    (a half-closed client may still read it), the connection then ends with nothing left waiting,
    and the gateway goes on answering other clients' Fetches."""
    path = os.path.join(tmp_path, "events")
    async with adiskq.Producer(path) as producer, KafkaGateway(tmp_path, port=0) as gateway:
        stream, offset = await _waiting_connection(gateway, producer)
        await _send_fetch(stream, offset, max_wait_ms=60_000)
        await _until_parked(gateway, 1)
        await stream.aclose()
        await producer.push(b"after", key="k")
        core = gateway._core
        assert core is not None
        with anyio.fail_after(20):
            while core.connections:  # noqa: ASYNC110 (no event tells a connection's end)
                await anyio.sleep(0.002)
        async with await anyio.connect_tcp("127.0.0.1", gateway.port) as other:
            await _send_fetch(other, offset, max_wait_ms=60_000)
            with anyio.fail_after(20):
                high_watermark, records = await _fetch_answer(other)
    assert high_watermark == 3
    assert b"after" in records


async def test_closing_the_gateway_answers_a_waiting_fetch(tmp_path: pathlib.Path, anyio_backend: str) -> None:
    """Leaving the gateway's block while a Fetch waits in a 60 s long poll answers it at once, with
    what there is, before the connection closes."""
    path = os.path.join(tmp_path, "events")
    async with adiskq.Producer(path) as producer:
        async with KafkaGateway(tmp_path, port=0) as gateway:
            stream, offset = await _waiting_connection(gateway, producer)
            await _send_fetch(stream, offset, max_wait_ms=60_000)
            await _until_parked(gateway, 1)
            started = anyio.current_time()
        async with stream:
            with anyio.fail_after(20):
                high_watermark, records = await _fetch_answer(stream)
    assert anyio.current_time() - started < 20
    assert (high_watermark, records) == (2, b"")
