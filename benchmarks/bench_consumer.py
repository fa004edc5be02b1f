"""Consumer benchmarks: read throughput (batches, async for) beside SQLite, and push -> consumer latency.

    python benchmarks/bench_consumer.py            # 1,000,000 messages, 4,000 latency samples
    python benchmarks/bench_consumer.py --quick    # small sizes, for the test that keeps this working

Values are 100 bytes. Throughput is the median of several runs on each backend (asyncio, Trio), next to
a full scan of the same rows in SQLite (WAL) run in the same process. Latency is measured from just
before ``push`` to the consumer holding the message, on the monotonic clock (shared by processes),
with one message every 0.5 ms: from a producer in another process (next to inotify alone: a writer
process appending to a file and a reader woken by a raw inotify watch), and in the same event loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import anyio
import anyio.lowlevel

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamReader, StreamWriter

VALUE = b"v" * 100
BACKENDS = ("asyncio", "trio")
INTERVAL_SECONDS = 0.0005

PRODUCER = """
import sys, time, anyio, adiskq
path, count, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
async def main():
    took = []
    async with adiskq.Producer(path) as producer:
        print("ready", flush=True)
        sys.stdin.readline()
        for _ in range(count):
            stamp = time.monotonic_ns()
            await producer.push(stamp.to_bytes(8, "little") + b"v" * 92, key="k")
            took.append(time.monotonic_ns() - stamp)
            await anyio.sleep(interval)
    print("push_p50_ns", sorted(took)[len(took) // 2], flush=True)
anyio.run(main, backend=sys.argv[4])
"""

RAW_WRITER = """
import os, sys, time
path, count, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
print("ready", flush=True)
sys.stdin.readline()
for _ in range(count):
    os.write(fd, time.monotonic_ns().to_bytes(8, "little"))
    time.sleep(interval)
os.close(fd)
"""


def write_stream(path: str, count: int) -> None:
    writer = StreamWriter.open(path, partitions=1)
    try:
        stamp = time.time_ns()
        record = encode_record(VALUE, b"key-0001", stamp)
        chunk = 10_000
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            writer.partitions[0].append([record] * size, [stamp] * size)
    finally:
        writer.close()


def write_sqlite(path: str, count: int) -> None:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)")
    stamp = time.time_ns()
    connection.executemany(
        "INSERT INTO log VALUES (?, ?, ?, ?)", ((i, stamp, b"key-0001", VALUE) for i in range(count))
    )
    connection.commit()
    connection.close()


def sqlite_scan(path: str, count: int) -> float:
    connection = sqlite3.connect(path)
    started = time.perf_counter()
    seen = 0
    for _ in connection.execute("SELECT offset, ts, key, value FROM log"):
        seen += 1
    elapsed = time.perf_counter() - started
    connection.close()
    assert seen == count
    return count / elapsed


def cursor_scan(path: str, count: int) -> float:
    """The storage layer's own cursor, no event loop: what the consumer adds on top of it."""
    reader = StreamReader.open(path).partition(0)
    started = time.perf_counter()
    seen = 0
    with reader.cursor(0) as cursor:
        while batch := cursor.read(1000):
            seen += len(batch)
    elapsed = time.perf_counter() - started
    assert seen == count
    return count / elapsed


BATCH_SECONDS: list[float] = []  # how long each batch of 1,000 held the event loop


async def read_batches(path: str, count: int) -> float:
    started = time.perf_counter()
    seen = 0
    async with adiskq.Consumer(path, end="close") as consumer:
        batches = consumer.batches(max_messages=1000)
        while True:
            began = time.perf_counter()
            try:
                batch = await batches.__anext__()
            except StopAsyncIteration:
                break
            BATCH_SECONDS.append(time.perf_counter() - began)
            seen += len(batch)
    elapsed = time.perf_counter() - started
    assert seen == count
    return count / elapsed


async def read_each(path: str, count: int) -> float:
    started = time.perf_counter()
    seen = 0
    async with adiskq.Consumer(path, end="close") as consumer:
        async for _ in consumer:
            seen += 1
    elapsed = time.perf_counter() - started
    assert seen == count
    return count / elapsed


def median_rate(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def percentiles(samples_ns: list[int]) -> tuple[float, float]:
    """p50 and p99 in microseconds."""
    ordered = sorted(samples_ns)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return p50 / 1000, p99 / 1000


async def latency_other_process(path: str, count: int, backend: str) -> tuple[list[int], int]:
    """Push in another process, consume here: monotonic ns from push to message in hand, and push() itself."""
    async with adiskq.Producer(path):
        pass
    process = await anyio.open_process(
        [sys.executable, "-c", PRODUCER, path, str(count), str(INTERVAL_SECONDS), backend],
        stdin=subprocess.PIPE,
    )
    samples: list[int] = []
    try:
        assert process.stdout is not None
        assert process.stdin is not None
        assert (await process.stdout.receive()).startswith(b"ready")
        async with adiskq.Consumer(path, start="newest") as consumer:
            await process.stdin.send(b"go\n")
            async for message in consumer:
                samples.append(time.monotonic_ns() - int.from_bytes(message.value[:8], "little"))
                if len(samples) == count:
                    break
        tail = b""
        async for chunk in process.stdout:
            tail += chunk
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()
    push_ns = int(tail.split(b"push_p50_ns")[1].split()[0])
    return samples[len(samples) // 20 :], push_ns  # drop the warm-up


async def latency_inotify_alone(folder: str, count: int) -> list[int]:
    """A writer process appends 8-byte stamps to a file; a raw inotify watch wakes the reader here."""
    import asyncinotify

    path = os.path.join(folder, "raw")
    open(path, "wb").close()  # noqa: ASYNC230 - set-up
    inotify = asyncinotify.Inotify()
    os.set_blocking(inotify.fd, False)
    inotify.add_watch(path, asyncinotify.Mask.MODIFY)
    fd = os.open(path, os.O_RDONLY)
    process = await anyio.open_process(
        [sys.executable, "-c", RAW_WRITER, path, str(count), str(INTERVAL_SECONDS)], stdin=subprocess.PIPE
    )
    samples: list[int] = []
    position = 0
    try:
        assert process.stdout is not None
        assert process.stdin is not None
        assert (await process.stdout.receive()).startswith(b"ready")
        await process.stdin.send(b"go\n")
        while len(samples) < count:
            await anyio.wait_readable(inotify.fd)
            while True:
                try:
                    inotify.sync_get()
                except BlockingIOError:
                    break
            data = os.pread(fd, 1 << 16, position)
            now = time.monotonic_ns()
            samples.extend(
                now - int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data) - len(data) % 8, 8)
            )
            position += len(data) - len(data) % 8
        await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()
        os.close(fd)
        inotify.close()
    return samples[len(samples) // 20 :]


async def latency_same_process(path: str, count: int) -> tuple[list[int], int]:
    """Producer and consumer in one event loop; also how long push() itself takes."""
    samples: list[int] = []
    took: list[int] = []
    async with adiskq.Producer(path) as producer, adiskq.Consumer(path, start="newest") as consumer:

        async def produce() -> None:
            for _ in range(count):
                stamp = time.monotonic_ns()
                await producer.push(stamp.to_bytes(8, "little") + b"v" * 92, key="k")
                took.append(time.monotonic_ns() - stamp)
                await anyio.sleep(INTERVAL_SECONDS)

        async with anyio.create_task_group() as tg:
            tg.start_soon(produce)
            async for message in consumer:
                samples.append(time.monotonic_ns() - int.from_bytes(message.value[:8], "little"))
                if len(samples) == count:
                    break
    return samples[len(samples) // 20 :], sorted(took)[len(took) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (for the test suite)")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    count = args.messages or (20_000 if args.quick else 1_000_000)
    samples = args.samples or (200 if args.quick else 4_000)
    runs = args.runs or (1 if args.quick else 5)

    folder = tempfile.mkdtemp(prefix="adiskq-bench-")
    try:
        stream = os.path.join(folder, "stream")
        database = os.path.join(folder, "log.sqlite")
        write_stream(stream, count)
        write_sqlite(database, count)
        print(f"read {count:,} messages of 100 bytes (median of {runs} runs), msg/s:")
        sqlite_rate = median_rate(runs, lambda: sqlite_scan(database, count))
        print(f"  sqlite WAL full scan         {sqlite_rate:>12,.0f}")
        cursor_rate = median_rate(runs, lambda: cursor_scan(stream, count))
        print(f"  storage cursor (sync)        {cursor_rate:>12,.0f}   x{cursor_rate / sqlite_rate:.2f} sqlite")
        for backend in BACKENDS:
            rate = median_rate(runs, lambda b=backend: anyio.run(read_batches, stream, count, backend=b))
            print(
                f"  batches()      {backend:<8}      {rate:>12,.0f}   x{rate / sqlite_rate:.2f} sqlite, "
                f"x{rate / 2_000_000:.2f} target 2,000,000"
            )
        stall = statistics.median(BATCH_SECONDS) * 1000
        print(f"  (a batch of 1,000 holds the event loop {stall:.2f} ms, median: decoding and CRC checks)")
        for backend in BACKENDS:
            rate = median_rate(runs, lambda b=backend: anyio.run(read_each, stream, count, backend=b))
            print(
                f"  async for msg  {backend:<8}      {rate:>12,.0f}   x{rate / sqlite_rate:.2f} sqlite, "
                f"x{rate / 1_000_000:.2f} target 1,000,000"
            )

        print(f"push -> consumer latency, one message every {INTERVAL_SECONDS * 1000:g} ms, {samples:,} samples, µs:")
        for backend in BACKENDS:
            raw = anyio.run(latency_inotify_alone, folder, samples, backend=backend)
            p50, p99 = percentiles(raw)
            print(f"  inotify alone, other process  {backend:<8} p50 {p50:8.1f}  p99 {p99:8.1f}")
            lat, push_ns = anyio.run(
                latency_other_process, os.path.join(folder, f"other-{backend}"), samples, backend, backend=backend
            )
            q50, q99 = percentiles(lat)
            print(
                f"  adiskq, other process         {backend:<8} p50 {q50:8.1f}  p99 {q99:8.1f}   "
                f"(targets p50 <= 50, p99 <= 500; x{q50 / p50:.2f} inotify alone; push() itself p50 {push_ns / 1000:.1f})"
            )
        for backend in BACKENDS:
            lat, push_ns = anyio.run(
                latency_same_process, os.path.join(folder, f"same-{backend}"), samples, backend=backend
            )
            q50, q99 = percentiles(lat)
            print(
                f"  adiskq, same process          {backend:<8} p50 {q50:8.1f}  p99 {q99:8.1f}   "
                f"(target p50 <= 20; push() itself p50 {push_ns / 1000:.1f})"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
