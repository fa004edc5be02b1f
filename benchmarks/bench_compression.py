"""compression="zstd" against the same stream uncompressed, and SQLite's bytes on disk, in one run.

The messages are JSON order events of about 260 bytes (the README's kind), each with its own key.
Default settings otherwise: the compressed stream trains its dictionary from its first 2,000 values
(written uncompressed), and those, the dictionary file and every index count in its bytes on disk.

* ``push``: one task awaiting ``push(value, key=k)`` for each message (opening and closing counted);
* ``push_many``: ``push_many`` of 1,000 records at a time (opening and closing counted);
* ``read``: ``async for`` over the whole stream with a ``Consumer(end="close")`` (opening counted);
* ``disk``: bytes on disk per message after ``push_many`` (allocated blocks), beside SQLite (WAL,
  one table of offset, timestamp, key and value, ``executemany`` of 1,000, checkpointed at close).

Each figure is a median over runs, on the compiled core and (in a child process with
``ADISKQ_NO_EXTENSIONS=1``) the pure-Python core, on asyncio.

Then, in the same run, what libzstd alone allows: its own time a message on the same values (a
dictionary trained from the first 2,000, as the stream's), added to the uncompressed stream's time
a message. A frame per value, as the stream stores them, and a frame per 1,000 values, the most a
format of frames over whole batches could share (reading included: a value is read by decompressing
its frame). A single ``push`` cannot share a frame (it is acknowledged alone), so its bound is the
per-value one. Those ratios are what no code around the codec could exceed.

    python benchmarks/bench_compression.py            # 100,000 messages, medians of 3
    python benchmarks/bench_compression.py --quick    # 4,000 messages once, for the test suite
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import anyio

import adiskq
from adiskq._sansio.core import CORE_DESCRIPTION

BATCH = 1000


def order_events(count: int, seed: int = 7) -> list[bytes]:
    """``count`` JSON order events of about 260 bytes."""
    rng = random.Random(seed)
    events = []
    for number in range(count):
        items = [
            {
                "sku": f"SKU-{rng.randrange(5000):05d}",
                "qty": rng.randrange(1, 5),
                "price": rng.randrange(100, 20000) / 100,
            }
            for _ in range(rng.randrange(1, 3))
        ]
        event = {
            "order_id": f"ord-{number:010d}",
            "customer_id": f"cust-{rng.randrange(100_000):06d}",
            "placed_at": f"2026-11-27T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z",
            "status": rng.choice(["created", "paid", "packed", "shipped", "delivered"]),
            "items": items,
            "shipping": {
                "method": rng.choice(["standard", "express", "pickup"]),
                "country": rng.choice(["FR", "DE", "NL"]),
            },
            "currency": "EUR",
            "total": rng.randrange(100, 90000) / 100,
        }
        events.append(json.dumps(event, separators=(",", ":")).encode())
    return events


def keys(count: int) -> list[str]:
    return [f"order-{number:010d}" for number in range(count)]


def disk_bytes(path: str) -> int:
    """Bytes the folder takes on disk (allocated blocks)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def compression_of(compressed: bool) -> dict[str, object]:
    return {"compression": "zstd"} if compressed else {}


async def push_single(path: str, values: list[bytes], names: list[str], compressed: bool) -> float:
    started = time.perf_counter()
    async with adiskq.Producer(path, **compression_of(compressed)) as producer:  # type: ignore[arg-type]
        push = producer.push
        for value, key in zip(values, names, strict=True):
            await push(value, key=key)
    return time.perf_counter() - started


async def push_batches(path: str, values: list[bytes], names: list[str], compressed: bool) -> float:
    records = [adiskq.Record(value, key=key) for value, key in zip(values, names, strict=True)]
    started = time.perf_counter()
    async with adiskq.Producer(path, **compression_of(compressed)) as producer:  # type: ignore[arg-type]
        for first in range(0, len(records), BATCH):
            await producer.push_many(records[first : first + BATCH])
    return time.perf_counter() - started


async def read_all(path: str, count: int) -> float:
    started = time.perf_counter()
    seen = 0
    async with adiskq.Consumer(path, start="oldest", end="close") as consumer:
        async for _ in consumer:
            seen += 1
    elapsed = time.perf_counter() - started
    if seen != count:
        raise SystemExit(f"read {seen} messages of {count}")
    return elapsed


def sqlite_bytes(root: str, values: list[bytes], names: list[str]) -> int:
    folder = tempfile.mkdtemp(prefix="sqlite-", dir=root)
    db = sqlite3.connect(os.path.join(folder, "log.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE log (offset INTEGER PRIMARY KEY, ts INTEGER NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL)"
    )
    for first in range(0, len(values), BATCH):
        now = time.time_ns()
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO log (ts, key, value) VALUES (?, ?, ?)",
            [(now, names[i].encode(), values[i]) for i in range(first, min(first + BATCH, len(values)))],
        )
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = disk_bytes(folder)
    shutil.rmtree(folder)
    return size


def measure_core(count: int, runs: int, root: str) -> dict[str, float]:
    """Every adiskq figure of this process's core: rates in messages/s, bytes per message."""
    values, names = order_events(count), keys(count)
    figures: dict[str, list[float]] = {}

    def record(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    for _ in range(runs):
        for compressed in (False, True):
            label = "zstd" if compressed else "plain"
            for workload, push in (("push", push_single), ("push_many", push_batches)):
                path = os.path.join(tempfile.mkdtemp(dir=root), "stream")
                elapsed = anyio.run(push, path, values, names, compressed)
                record(f"{workload} {label}", count / elapsed)
                if workload == "push_many":
                    record(f"disk {label}", disk_bytes(path) / count)
                    record(f"read {label}", count / anyio.run(read_all, path, count))
                shutil.rmtree(os.path.dirname(path))
    return {name: statistics.median(samples) for name, samples in figures.items()}


def child_figures(count: int, runs: int, root: str) -> dict[str, float]:
    """``measure_core`` in a child process on the pure-Python core."""
    environment = {**os.environ, "ADISKQ_NO_EXTENSIONS": "1"}
    result = subprocess.run(
        [sys.executable, __file__, "--child", f"--count={count}", f"--runs={runs}", f"--dir={root}"],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    figures: dict[str, float] = json.loads(result.stdout)
    return figures


def report(core: str, figures: dict[str, float], sqlite_per_message: float) -> None:
    def ratio(name: str) -> float:
        return figures[f"{name} zstd"] / figures[f"{name} plain"]

    print(f"{core}:")
    for name in ("push", "push_many", "read"):
        print(
            f"  {name:10} zstd {figures[f'{name} zstd']:>12,.0f} msg/s   uncompressed {figures[f'{name} plain']:>12,.0f} "
            f"msg/s   {ratio(name):.2f}x; target 0.8x"
        )
    zstd_bytes = figures["disk zstd"]
    print(
        f"  {'disk':10} zstd {zstd_bytes:>12.1f} B/msg   uncompressed {figures['disk plain']:>12.1f} B/msg   "
        f"{zstd_bytes / sqlite_per_message:.2f}x sqlite's {sqlite_per_message:.1f} B/msg; target 0.4x"
    )


def codec_seconds(values: list[bytes], runs: int) -> dict[str, float] | None:
    """libzstd's own seconds a message on ``values`` (medians over runs), or None without zstandard.

    A frame a value is compressed through the compiled core's own call (libzstd and a few hundred
    instructions around it; the zstandard binding's call costs more than that); frames of 1,000
    values through the binding, whose call is then nothing beside the codec's work."""
    try:
        import zstandard  # the zstd extra, needed for this part only
    except ImportError:
        return None
    from adiskq._sansio.compression import DEFAULT_LEVEL, with_dictionary_id
    from adiskq._sansio.native import NATIVE

    training, measured = values[:2000], values[2000:] or values
    trained = zstandard.train_dictionary(16384, training).as_bytes()
    dictionary = zstandard.ZstdCompressionDict(trained)
    compressor = zstandard.ZstdCompressor(level=DEFAULT_LEVEL, dict_data=dictionary, write_checksum=False)
    decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)
    prepared = None if NATIVE is None else NATIVE.zstd_prepare(with_dictionary_id(trained, 1), DEFAULT_LEVEL)
    compress_one = compressor.compress if prepared is None else functools.partial(NATIVE.zstd_compress, prepared)
    batches = [b"".join(measured[first : first + BATCH]) for first in range(0, len(measured), BATCH)]
    batch_frames = [compressor.compress(batch) for batch in batches]
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, work in (
            ("compress a value", lambda: [compress_one(value) for value in measured]),
            ("compress 1,000", lambda: [compressor.compress(batch) for batch in batches]),
            ("decompress 1,000", lambda: [decompressor.decompress(frame) for frame in batch_frames]),
        ):
            started = time.perf_counter()
            work()
            samples.setdefault(name, []).append((time.perf_counter() - started) / len(measured))
    return {name: statistics.median(times) for name, times in samples.items()}


def report_codec(codec: dict[str, float] | None, figures: dict[str, float]) -> None:
    if codec is None:
        print("libzstd alone: not measured (pip install 'adiskq[zstd]' for the zstandard binding)")
        return
    print(
        f"libzstd alone, µs a message: compress {codec['compress a value'] * 1e6:.2f} a value, "
        f"{codec['compress 1,000'] * 1e6:.2f} in frames of 1,000; decompress {codec['decompress 1,000'] * 1e6:.2f} "
        "in frames of 1,000"
    )
    for name, per_value, per_batch in (
        ("push", "compress a value", None),
        ("push_many", "compress a value", "compress 1,000"),
        ("read", None, "decompress 1,000"),
    ):
        plain = 1 / figures[f"{name} plain"]
        bounds = [
            f"{plain / (plain + codec[cost]):.2f}x with {shape}"
            for cost, shape in ((per_value, "a frame a value"), (per_batch, "frames of 1,000"))
            if cost is not None
        ]
        print(f"  {name:10} the most the codec allows (uncompressed time + libzstd's): {', '.join(bounds)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="4,000 messages once (for the test suite)")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the streams go (a temporary folder by default)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    count, runs = (4000, 1) if arguments.quick else (arguments.count, arguments.runs)
    if count < 1 or runs < 1:
        parser.error("--count and --runs take at least 1")
    root = tempfile.mkdtemp(prefix="bench-compression-", dir=arguments.dir)
    try:
        if arguments.child:
            print(json.dumps(measure_core(count, runs, root)))
            return
        values, names = order_events(count), keys(count)
        print(
            f"{count:,} JSON order events of {sum(map(len, values)) / count:.0f} bytes on average, distinct keys; "
            f"medians of {runs}; {CORE_DESCRIPTION}"
        )
        sqlite_per_message = sqlite_bytes(root, values, names) / count
        compiled = measure_core(count, runs, root)
        report("compiled core", compiled, sqlite_per_message)
        report_codec(codec_seconds(values, runs), compiled)
        report("pure-Python core", child_figures(count, runs, root), sqlite_per_message)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
