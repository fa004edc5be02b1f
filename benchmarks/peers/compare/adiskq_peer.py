"""adiskq through its public API, on asyncio: one partition, so the log is one total order like the peers'.

The original workloads push without a key, as a user with one partition would; the ``*_keyed`` ones
give every message its own 12-byte key, as order ids and user ids are, build each message (and for
``push_many`` each ``Record``) in the timed loop, and count opening and closing the producer or
consumer in the timed span. ``flush="async"`` for the fast workloads,
``flush="sync"`` (fsync before the push returns, concurrent pushes sharing one fsync) for the durable
ones. The peer named ``adiskq-py`` runs this same module with ``ADISKQ_NO_EXTENSIONS=1`` in its
environment (set by bench_compare.py), which selects the pure-Python core.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import anyio

import adiskq

# The async classes load on first use (adiskq/__init__.py). They are loaded here, with this module, as
# sqlite_peer loads sqlite3 with its own: a service imports what it uses before it serves, so no
# workload's timed span holds an import (which compiles adiskq's modules from source where
# PYTHONDONTWRITEBYTECODE is set).
from adiskq import Consumer, Producer

from .common import (
    BATCH_SIZE,
    CONCURRENCY,
    KEYED_LATENCY_INTERVAL_S,
    LATENCY_INTERVAL_S,
    VALUES,
    Outcome,
    key,
    latency_of,
    message_value,
    stamped_value,
    task_numbers,
    values,
)


def _producer(path: str, flush: Literal["async", "sync"] = "async") -> Producer:
    return Producer(path, partitions=1, flush=flush)


async def single(path: str, count: int) -> Outcome:
    async with _producer(path) as producer:
        push = producer.push
        started = time.perf_counter()
        for value in values(count):
            await push(value)
        return Outcome(time.perf_counter() - started)


async def _push_batches(producer: Producer, count: int) -> None:
    records = [adiskq.Record(value) for value in VALUES]
    for _ in range(count // BATCH_SIZE):
        await producer.push_many(records)


async def batch(path: str, count: int) -> Outcome:
    async with _producer(path) as producer:
        started = time.perf_counter()
        await _push_batches(producer, count)
        return Outcome(time.perf_counter() - started)


async def durable32(path: str, count: int) -> Outcome:
    per_task = count // CONCURRENCY
    async with _producer(path, flush="sync") as producer:

        async def pusher() -> None:
            for value in values(per_task):
                await producer.push(value)

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(CONCURRENCY):
                group.start_soon(pusher)
        return Outcome(time.perf_counter() - started)


async def _read_batches(path: str, count: int) -> Outcome:
    """Read the whole log back with ``batches()`` of up to 1,000, the consumer's opening counted."""
    seen = 0
    started = time.perf_counter()
    async with Consumer(path, partition=0, start="oldest", end="close") as consumer:
        async for messages in consumer.batches(max_messages=BATCH_SIZE):
            seen += len(messages)
    seconds = time.perf_counter() - started
    assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
    return Outcome(seconds)


async def read(path: str, count: int) -> Outcome:
    async with _producer(path) as producer:
        await _push_batches(producer, count)
    return await _read_batches(path, count)


async def latency_prepare(path: str) -> None:
    async with _producer(path):
        pass  # creates the stream, so the consumer can open it before the producer starts


async def latency_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    latencies: list[int] = []
    async with Consumer(path, partition=0, start="oldest", end="wait") as consumer:
        ready()
        async for message in consumer:
            latencies.append(latency_of(message.value))
            if len(latencies) == count:
                break
    return Outcome(latencies_ns=latencies)


async def latency_produce(path: str, count: int) -> None:
    async with _producer(path) as producer:
        started = time.monotonic()
        for i in range(count):
            delay = started + i * LATENCY_INTERVAL_S - time.monotonic()
            if delay > 0:
                await anyio.sleep(delay)
            await producer.push(stamped_value())


# The distinct-key workloads: every message's key and value built in the timed loop, opening and
# closing inside the timed span.


async def single_keyed(path: str, count: int) -> Outcome:
    started = time.perf_counter()
    async with _producer(path) as producer:
        push = producer.push
        for number in range(count):
            await push(message_value(number), key=key(number))
    return Outcome(time.perf_counter() - started)


async def _push_keyed_batches(producer: Producer, count: int) -> None:
    """``push_many`` of 1,000 ``Record``s at a time, each Record, key and value built for its batch."""
    record = adiskq.Record
    for first in range(0, count // BATCH_SIZE * BATCH_SIZE, BATCH_SIZE):
        await producer.push_many([record(message_value(n), key(n)) for n in range(first, first + BATCH_SIZE)])


async def batch_keyed(path: str, count: int) -> Outcome:
    started = time.perf_counter()
    async with _producer(path) as producer:
        await _push_keyed_batches(producer, count)
    return Outcome(time.perf_counter() - started)


async def durable32_keyed(path: str, count: int) -> Outcome:
    async def pusher(producer: Producer, numbers: range) -> None:
        for number in numbers:
            await producer.push(message_value(number), key=key(number))

    started = time.perf_counter()
    async with _producer(path, flush="sync") as producer, anyio.create_task_group() as group:
        for numbers in task_numbers(count):
            group.start_soon(pusher, producer, numbers)
    return Outcome(time.perf_counter() - started)


async def _write_keyed(path: str, count: int) -> None:
    async with _producer(path) as producer:
        await _push_keyed_batches(producer, count)


async def read_keyed(path: str, count: int) -> Outcome:
    """``async for message in consumer``: one message at a time, as most consumers are written."""
    await _write_keyed(path, count)
    seen = 0
    started = time.perf_counter()
    async with Consumer(path, partition=0, start="oldest", end="close") as consumer:
        async for _ in consumer:
            seen += 1
    seconds = time.perf_counter() - started
    assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
    return Outcome(seconds)


read_keyed_long = read_keyed  # the same reading of a log ten times longer (bench_compare.py's counts)


async def read_keyed_batches(path: str, count: int) -> Outcome:
    """``batches()`` of up to 1,000 over the same keyed log."""
    await _write_keyed(path, count)
    return await _read_batches(path, count)


latency_keyed_prepare = latency_prepare
latency_keyed_consume = latency_consume


async def latency_keyed_produce(path: str, count: int) -> None:
    async with _producer(path) as producer:
        started = time.monotonic()
        for i in range(count):
            delay = started + i * KEYED_LATENCY_INTERVAL_S - time.monotonic()
            if delay > 0:
                await anyio.sleep(delay)
            await producer.push(stamped_value(), key=key(i))
