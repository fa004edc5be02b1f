"""Producer throughput and event-loop lag, beside SQLite doing the same work, in one run.

Workloads (100-byte values, 12-byte keys), each on asyncio and Trio:

* ``single``: one task awaiting every ``push`` (flush="async");
* ``batch``: ``push_many`` of 1,000 records (flush="async");
* ``sync32``: 32 tasks pushing concurrently with flush="sync" (group commit);
* ``lag``: the p99 gap another task sees while one task pushes at full speed.

Peers in the same run: SQLite in WAL mode (synchronous=NORMAL: one INSERT per commit for ``single``,
``executemany`` of 1,000 for ``batch``; synchronous=FULL with one commit per message for ``sync32``).

    python benchmarks/bench_producer.py            # full run, medians of 5
    python benchmarks/bench_producer.py --quick    # a few thousand messages, for the test suite
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import anyio

import adiskq

VALUE = b"v" * 100
KEYS = [f"customer-{i:03d}" for i in range(1000)]  # 12 bytes each


def _fresh(root: str, name: str) -> str:
    return tempfile.mkdtemp(prefix=f"{name}-", dir=root)


# -- adiskq ----------------------------------------------------------------------------------------


async def adiskq_single(path: str, count: int) -> float:
    async with adiskq.Producer(path, partitions=4) as producer:
        push = producer.push
        started = time.perf_counter()
        for i in range(count):
            await push(VALUE, key=KEYS[i % 1000])
        return count / (time.perf_counter() - started)


async def adiskq_batch(path: str, count: int) -> float:
    records = [adiskq.Record(VALUE, key=KEYS[i % 1000]) for i in range(1000)]
    async with adiskq.Producer(path, partitions=4) as producer:
        started = time.perf_counter()
        for _ in range(count // 1000):
            await producer.push_many(records)
        return (count // 1000 * 1000) / (time.perf_counter() - started)


async def adiskq_sync32(path: str, count: int) -> float:
    per_task = count // 32
    async with adiskq.Producer(path, partitions=4, flush="sync") as producer:

        async def pusher(task: int) -> None:
            for i in range(per_task):
                await producer.push(VALUE, key=KEYS[(task * per_task + i) % 1000])

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            for task in range(32):
                group.start_soon(pusher, task)
        return per_task * 32 / (time.perf_counter() - started)


async def adiskq_lag(path: str, count: int) -> float:
    """p99 of the gaps (ms) a ticker task sees between its turns while another task pushes."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await anyio.lowlevel.checkpoint()
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with (
        adiskq.Producer(path, partitions=4, segment_size_bytes=4 * 2**20) as producer,
        anyio.create_task_group() as group,
    ):
        group.start_soon(ticker)
        for i in range(count):
            await producer.push(VALUE, key=KEYS[i % 1000])
        for _ in range(count // 1000):
            await producer.push_many([adiskq.Record(VALUE, key=KEYS[j]) for j in range(1000)])
        done = True
    gaps.sort()
    return gaps[int(len(gaps) * 0.99)] * 1000


# -- SQLite ----------------------------------------------------------------------------------------


def _sqlite(path: str, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(path, "log.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, ts INTEGER, key BLOB, value BLOB)")
    return db


def sqlite_single(path: str, count: int) -> float:
    db = _sqlite(path, "NORMAL")
    started = time.perf_counter()
    for i in range(count):
        db.execute(
            "INSERT INTO log (ts, key, value) VALUES (?, ?, ?)", (time.time_ns(), KEYS[i % 1000].encode(), VALUE)
        )
    rate = count / (time.perf_counter() - started)
    db.close()
    return rate


def sqlite_batch(path: str, count: int) -> float:
    db = _sqlite(path, "NORMAL")
    rows = [(0, KEYS[i % 1000].encode(), VALUE) for i in range(1000)]
    started = time.perf_counter()
    for _ in range(count // 1000):
        db.execute("BEGIN")
        db.executemany("INSERT INTO log (ts, key, value) VALUES (?, ?, ?)", rows)
        db.execute("COMMIT")
    rate = (count // 1000 * 1000) / (time.perf_counter() - started)
    db.close()
    return rate


def sqlite_sync(path: str, count: int) -> float:
    db = _sqlite(path, "FULL")
    started = time.perf_counter()
    for i in range(count):
        db.execute(
            "INSERT INTO log (ts, key, value) VALUES (?, ?, ?)", (time.time_ns(), KEYS[i % 1000].encode(), VALUE)
        )
    rate = count / (time.perf_counter() - started)
    db.close()
    return rate


# -- driver ----------------------------------------------------------------------------------------


def median_of(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts, one run: checks the script works")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to put the streams (default: a temp folder)")
    args = parser.parse_args(argv)
    runs = 1 if args.quick else args.runs
    scale = 0.02 if args.quick else 1.0
    counts = {"single": int(200_000 * scale), "batch": int(1_000_000 * scale), "sync32": int(20_000 * scale)}

    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        results: dict[str, dict[str, float]] = {}
        for backend in ("asyncio", "trio"):
            for name, workload, count in (
                ("single", adiskq_single, counts["single"]),
                ("batch", adiskq_batch, counts["batch"]),
                ("sync32", adiskq_sync32, counts["sync32"]),
                ("lag", adiskq_lag, counts["single"] // 2),
            ):
                results.setdefault(name, {})[f"adiskq/{backend}"] = median_of(
                    runs,
                    lambda workload=workload, count=count, name=name, backend=backend: anyio.run(  # type: ignore[misc]
                        workload, _fresh(root, name), count, backend=backend
                    ),
                )
        sqlite_counts = {
            "single": counts["single"] // 2,
            "batch": counts["batch"],
            "sync32": max(200, counts["sync32"] // 10),
        }
        for name, peer in (("single", sqlite_single), ("batch", sqlite_batch), ("sync32", sqlite_sync)):
            results[name]["sqlite-wal"] = median_of(
                runs, lambda peer=peer, name=name: peer(_fresh(root, name), sqlite_counts[name])
            )  # type: ignore[misc]

    targets = {"single": 200_000, "batch": 1_000_000, "sync32": 50_000}
    print(
        f"adiskq producer benchmark ({'quick' if args.quick else f'median of {runs}'}; Python {sys.version.split()[0]})"
    )
    print(f"{'workload':<8} {'peer':<16} {'msg/s':>12} {'vs sqlite':>10} {'target':>10}")
    for name in ("single", "batch", "sync32"):
        sqlite_rate = results[name]["sqlite-wal"]
        for peer, rate in results[name].items():
            ratio = rate / sqlite_rate if sqlite_rate else float("nan")
            target = f"{targets[name]:,}" if peer.startswith("adiskq") else ""
            print(f"{name:<8} {peer:<16} {rate:>12,.0f} {ratio:>9.2f}x {target:>10}")
    for peer, lag_ms in results["lag"].items():
        print(f"{'lag':<8} {peer:<16} p99 gap {lag_ms:.3f} ms (target < 1 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
