"""Redis Streams through redis-py's asyncio client, against a redis-server started here on 127.0.0.1.

Each workload starts its own ``redis-server`` (Debian's package) with its data folder in the
workload's folder: append-only file with ``appendfsync everysec`` for the fast workloads and
``always`` (fsync before the reply; the clients of one event-loop turn share it) for the durable one,
and no RDB snapshots. The server's peak memory counts toward Redis's figure: it holds the whole
stream in memory.

The ``*_keyed`` workloads add each message's 12-byte key as a second field (``XADD log * k KEY v
VALUE``), build each message's key and value in the timed loop, and count connecting and closing the
client in the timed span (not starting the server: a service is already running). Reading back
500,000 (``read_keyed_long``) is left out: writing them takes Redis longer than the rest of its runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, cast

import anyio
import redis.asyncio as aioredis

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

STREAM = "log"
Entries: TypeAlias = list[tuple[bytes, dict[bytes, bytes]]]
_PORT_FILE = "redis.port"


class RedisServer:
    """A redis-server child process on 127.0.0.1 and a free port, its files in ``folder``."""

    def __init__(self, folder: str, appendfsync: str) -> None:
        self.folder = folder
        with socket.socket() as probe:  # a free port (the kernel's pick), released just before use
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--dir", folder,
                "--appendonly", "yes",
                "--appendfsync", appendfsync,
                "--save", "",
                "--daemonize", "no",
                "--logfile", os.path.join(folder, "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        self._wait_until_ready()

    def _wait_until_ready(self, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}; see {self.folder}/redis.log")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(64).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"redis-server did not answer on 127.0.0.1:{self.port} within {timeout_s} s")
            time.sleep(0.01)

    def peak_rss_bytes(self) -> int:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        """SIGTERM: redis fsyncs its append-only file and exits."""
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)


@contextlib.contextmanager
def redis_server(folder: str, appendfsync: str = "everysec") -> Iterator[RedisServer]:
    server = RedisServer(folder, appendfsync)
    try:
        yield server
    finally:
        server.stop()


def _client(port: int, **options: Any) -> aioredis.Redis:
    return aioredis.Redis(host="127.0.0.1", port=port, **options)


async def single(path: str, count: int) -> Outcome:
    with redis_server(path) as server:
        client = _client(server.port)
        started = time.perf_counter()
        for value in values(count):
            await client.xadd(STREAM, {"v": value})
        seconds = time.perf_counter() - started
        await client.aclose()
        return Outcome(seconds, extra_rss_bytes=server.peak_rss_bytes())


async def _add_batches(client: aioredis.Redis, count: int) -> None:
    for _ in range(count // BATCH_SIZE):
        pipe = client.pipeline(transaction=False)
        for value in VALUES:
            pipe.xadd(STREAM, {"v": value})
        await pipe.execute()


async def batch(path: str, count: int) -> Outcome:
    with redis_server(path) as server:
        client = _client(server.port)
        started = time.perf_counter()
        await _add_batches(client, count)
        seconds = time.perf_counter() - started
        await client.aclose()
        return Outcome(seconds, extra_rss_bytes=server.peak_rss_bytes())


async def durable32(path: str, count: int) -> Outcome:
    per_task = count // CONCURRENCY
    with redis_server(path, appendfsync="always") as server:
        client = _client(server.port, max_connections=CONCURRENCY)

        async def pusher() -> None:
            for value in values(per_task):
                await client.xadd(STREAM, {"v": value})

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(CONCURRENCY):
                group.start_soon(pusher)
        seconds = time.perf_counter() - started
        await client.aclose()
        return Outcome(seconds, extra_rss_bytes=server.peak_rss_bytes())


async def read(path: str, count: int) -> Outcome:
    """XRANGE a page at a time from just past the last id seen."""
    with redis_server(path) as server:
        client = _client(server.port)
        await _add_batches(client, count)
        started = time.perf_counter()
        seen, low = 0, "-"
        while True:
            entries = cast(Entries, await client.xrange(STREAM, min=low, max="+", count=BATCH_SIZE))
            if not entries:
                break
            seen += len(entries)
            low = "(" + entries[-1][0].decode()
        seconds = time.perf_counter() - started
        await client.aclose()
        assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
        return Outcome(seconds, extra_rss_bytes=server.peak_rss_bytes())


_latency_server: RedisServer | None = None


def _read_port(path: str) -> int:
    with open(os.path.join(path, _PORT_FILE)) as file:
        return int(file.read())


def latency_prepare(path: str) -> None:
    """Start the server the consumer and the producer child share; the child finds its port in a file."""
    global _latency_server
    _latency_server = RedisServer(path, "everysec")
    with open(os.path.join(path, _PORT_FILE), "w") as file:
        file.write(str(_latency_server.port))


async def latency_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    """XREAD BLOCK: the server pushes new entries to the waiting client."""
    server = _latency_server
    assert server is not None
    try:
        client = _client(server.port)
        latencies: list[int] = []
        last = "0-0"
        ready()
        while len(latencies) < count:
            reply = cast(list[tuple[bytes, Entries]], await client.xread({STREAM: last}, count=BATCH_SIZE, block=0))
            for _, entries in reply:
                for entry_id, fields in entries:
                    latencies.append(latency_of(fields[b"v"]))
                    last = entry_id.decode()
        await client.aclose()
        return Outcome(latencies_ns=latencies, extra_rss_bytes=server.peak_rss_bytes())
    finally:
        server.stop()


async def latency_produce(path: str, count: int) -> None:
    client = _client(_read_port(path))
    started = time.monotonic()
    for i in range(count):
        delay = started + i * LATENCY_INTERVAL_S - time.monotonic()
        if delay > 0:
            await anyio.sleep(delay)
        await client.xadd(STREAM, {"v": stamped_value()})
    await client.aclose()


# The distinct-key workloads: every message's key and value built in the timed loop, the client's
# connecting and closing inside the timed span.


async def single_keyed(path: str, count: int) -> Outcome:
    with redis_server(path) as server:
        started = time.perf_counter()
        client = _client(server.port)
        for number in range(count):
            await client.xadd(STREAM, {"k": key(number), "v": message_value(number)})
        await client.aclose()
        return Outcome(time.perf_counter() - started, extra_rss_bytes=server.peak_rss_bytes())


async def _add_keyed_batches(client: aioredis.Redis, count: int) -> None:
    for first in range(0, count // BATCH_SIZE * BATCH_SIZE, BATCH_SIZE):
        pipe = client.pipeline(transaction=False)
        for number in range(first, first + BATCH_SIZE):
            pipe.xadd(STREAM, {"k": key(number), "v": message_value(number)})
        await pipe.execute()


async def batch_keyed(path: str, count: int) -> Outcome:
    with redis_server(path) as server:
        started = time.perf_counter()
        client = _client(server.port)
        await _add_keyed_batches(client, count)
        await client.aclose()
        return Outcome(time.perf_counter() - started, extra_rss_bytes=server.peak_rss_bytes())


async def durable32_keyed(path: str, count: int) -> Outcome:
    with redis_server(path, appendfsync="always") as server:

        async def pusher(numbers: range) -> None:
            for number in numbers:
                await client.xadd(STREAM, {"k": key(number), "v": message_value(number)})

        started = time.perf_counter()
        client = _client(server.port, max_connections=CONCURRENCY)
        async with anyio.create_task_group() as group:
            for numbers in task_numbers(count):
                group.start_soon(pusher, numbers)
        await client.aclose()
        return Outcome(time.perf_counter() - started, extra_rss_bytes=server.peak_rss_bytes())


async def read_keyed(path: str, count: int) -> Outcome:
    """XRANGE a page of 1,000 at a time (Redis has no cursor that streams a whole stream)."""
    with redis_server(path) as server:
        client = _client(server.port)
        await _add_keyed_batches(client, count)
        await client.aclose()
        started = time.perf_counter()
        client = _client(server.port)
        seen, low = 0, "-"
        while True:
            entries = cast(Entries, await client.xrange(STREAM, min=low, max="+", count=BATCH_SIZE))
            if not entries:
                break
            seen += len(entries)
            low = "(" + entries[-1][0].decode()
        await client.aclose()
        seconds = time.perf_counter() - started
        assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
        return Outcome(seconds, extra_rss_bytes=server.peak_rss_bytes())


latency_keyed_prepare = latency_prepare
latency_keyed_consume = latency_consume


async def latency_keyed_produce(path: str, count: int) -> None:
    client = _client(_read_port(path))
    started = time.monotonic()
    for i in range(count):
        delay = started + i * KEYED_LATENCY_INTERVAL_S - time.monotonic()
        if delay > 0:
            await anyio.sleep(delay)
        await client.xadd(STREAM, {"k": key(i), "v": stamped_value()})
    await client.aclose()
