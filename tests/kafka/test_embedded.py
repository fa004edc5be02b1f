"""The gateway embedded in a service's own event loop (asyncio and Trio), beside library producers
and consumers of the same streams."""

from __future__ import annotations

import os
import pathlib

import anyio
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
