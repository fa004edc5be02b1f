"""Shared producers (``shared=True``) against an exclusive one, and four writer processes against
SQLite with four writer processes, in one run.

Workloads (100-byte values, a distinct key per message, 4 partitions, flush="async"):

* ``W1``: one task awaiting every ``push``;
* ``W2``: ``push_many`` of 1,000 records;
  each timed from opening the producer to closing it, for one exclusive and one shared producer,
  on asyncio and Trio, median of the runs;
* ``4 processes``: four writer processes (started together, each opened before the clock starts),
  each one task awaiting every ``push`` on its own shared producer: aggregate msg/s (messages over
  the time from the first start to the last finish) and the p50/p99 latency of a push; beside it one
  such process alone, and SQLite in WAL mode with four writer processes (``busy_timeout``, one INSERT
  per transaction, ``synchronous=NORMAL``: like flush="async", durable against a process crash).

    python benchmarks/bench_shared.py            # full run, medians of 3
    python benchmarks/bench_shared.py --quick    # a few thousand messages, for the test suite
"""

from __future__ import annotations

import argparse
import json
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

import adiskq

VALUE = b"v" * 100
PARTITIONS = 4


def keys(count: int, prefix: str = "") -> list[str]:
    """A distinct key per message."""
    return [f"{prefix}key-{i:09d}" for i in range(count)]


# -- one producer: W1 and W2 -----------------------------------------------------------------------


async def w1(path: str, count: int, shared: bool) -> float:
    names = keys(count)
    started = time.perf_counter()
    async with adiskq.Producer(path, partitions=PARTITIONS, shared=shared) as producer:
        push = producer.push
        for key in names:
            await push(VALUE, key=key)
    return count / (time.perf_counter() - started)


async def w2(path: str, count: int, shared: bool) -> float:
    batches = [[adiskq.Record(VALUE, key=key) for key in keys(1000, f"b{b}-")] for b in range(count // 1000)]
    started = time.perf_counter()
    async with adiskq.Producer(path, partitions=PARTITIONS, shared=shared) as producer:
        for batch in batches:
            await producer.push_many(batch)
    return len(batches) * 1000 / (time.perf_counter() - started)


def median_of(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs))


# -- writer processes ------------------------------------------------------------------------------


def child_adiskq(path: str, count: int, name: str, backend: str) -> None:
    """One writer process: open, say ready, wait for go, push ``count`` messages, report."""
    names = keys(count, name)

    async def run() -> dict[str, object]:
        async with adiskq.Producer(path, partitions=PARTITIONS, shared=True) as producer:
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            latencies = []
            clock = time.perf_counter_ns
            started = time.time()
            for key in names:
                before = clock()
                await producer.push(VALUE, key=key)
                latencies.append(clock() - before)
            finished = time.time()
        return {"started": started, "finished": finished, "latencies_ns": latencies}

    print(json.dumps(anyio.run(run, backend=backend)), flush=True)


def child_sqlite(path: str, count: int, name: str) -> None:
    """One SQLite writer process: one INSERT per transaction (autocommit), WAL, busy_timeout."""
    db = sqlite3.connect(os.path.join(path, "log.db"), isolation_level=None, timeout=60)
    db.execute("PRAGMA busy_timeout=60000")
    db.execute("PRAGMA synchronous=NORMAL")
    names = keys(count, name)
    print("ready", flush=True)
    sys.stdin.readline()
    latencies = []
    clock = time.perf_counter_ns
    started = time.time()
    for key in names:
        before = clock()
        db.execute("INSERT INTO log (key, value) VALUES (?, ?)", (key, VALUE))
        latencies.append(clock() - before)
    finished = time.time()
    db.close()
    print(json.dumps({"started": started, "finished": finished, "latencies_ns": latencies}), flush=True)


def prepare_sqlite(path: str) -> None:
    db = sqlite3.connect(os.path.join(path, "log.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, key TEXT, value BLOB)")
    db.close()


def run_processes(kind: str, path: str, processes: int, count: int, backend: str) -> dict[str, float]:
    """Start the writers, let them all go at once, and gather aggregate msg/s and latencies."""
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", kind, path, str(count), f"p{n}-", backend],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    reports = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        assert child.returncode == 0
        reports.append(json.loads(out))
    latencies = sorted(ns for report in reports for ns in report["latencies_ns"])
    elapsed = max(r["finished"] for r in reports) - min(r["started"] for r in reports)
    return {
        "rate": len(latencies) / elapsed,
        "p50_us": latencies[len(latencies) // 2] / 1000,
        "p99_us": latencies[int(len(latencies) * 0.99)] / 1000,
    }


def median_report(runs: int, measure: Callable[[], dict[str, float]]) -> dict[str, float]:
    reports = [measure() for _ in range(runs)]
    return {name: statistics.median(r[name] for r in reports) for name in reports[0]}


# -- the run ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts, one run: checks the script works")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", help="where the streams go (default: a temporary folder)")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, path, count, name, backend = args.child
        if kind == "adiskq":
            child_adiskq(path, int(count), name, backend)
        else:
            child_sqlite(path, int(count), name)
        return 0
    if args.runs < 1:
        parser.error("--runs takes 1 or more")
    runs = 1 if args.quick else args.runs
    single = 2_000 if args.quick else 100_000
    batched = 2_000 if args.quick else 300_000
    per_process = 1_000 if args.quick else 50_000
    root = tempfile.mkdtemp(prefix="adiskq-bench-shared-", dir=args.dir)

    def fresh(name: str) -> str:
        return tempfile.mkdtemp(prefix=f"{name}-", dir=root)

    def stream(name: str) -> str:
        return os.path.join(fresh(name), "stream")

    results: dict[str, float] = {}
    processes: dict[str, dict[str, float]] = {}
    try:
        for backend in ("asyncio", "trio"):
            for workload, count, measure in (("W1", single, w1), ("W2", batched, w2)):
                for mode in ("exclusive", "shared"):
                    results[f"{workload} {backend} {mode}"] = median_of(
                        runs,
                        lambda measure=measure, count=count, mode=mode, backend=backend: anyio.run(
                            measure, stream("w"), count, mode == "shared", backend=backend
                        ),
                    )
        for backend in ("asyncio", "trio"):
            for writers in (1, 4):
                processes[f"adiskq {backend} {writers}"] = median_report(
                    runs,
                    lambda writers=writers, backend=backend: run_processes(
                        "adiskq", stream("p"), writers, per_process, backend
                    ),
                )

        def sqlite_run() -> dict[str, float]:
            path = fresh("sqlite")
            prepare_sqlite(path)
            return run_processes("sqlite", path, 4, per_process, "-")

        processes["sqlite 4"] = median_report(runs, sqlite_run)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"adiskq shared-producer benchmark ({'quick' if args.quick else f'median of {runs}'}; "
        f"Python {sys.version.split()[0]}; load {os.getloadavg()[0]:.1f})"
    )
    print(f"{'workload':<24} {'exclusive msg/s':>16} {'shared msg/s':>14} {'shared/exclusive':>17}  target")
    for workload in ("W1", "W2"):
        for backend in ("asyncio", "trio"):
            exclusive = results[f"{workload} {backend} exclusive"]
            shared = results[f"{workload} {backend} shared"]
            ratio = shared / exclusive
            verdict = "met" if ratio >= 0.85 else "MISSED"
            print(
                f"{workload + ' ' + backend:<24} {exclusive:>16,.0f} {shared:>14,.0f} {ratio:>16.2f}x"
                f"  >= 0.85x: {verdict}"
            )
    sqlite = processes["sqlite 4"]
    print(f"{'writer processes':<24} {'msg/s':>16} {'p50 µs':>10} {'p99 µs':>10} {'vs sqlite 4':>12}")
    for name, report in processes.items():
        print(
            f"{name:<24} {report['rate']:>16,.0f} {report['p50_us']:>10.1f} {report['p99_us']:>10.1f} "
            f"{report['rate'] / sqlite['rate']:>11.2f}x"
        )
    for backend in ("asyncio", "trio"):
        four = processes[f"adiskq {backend} 4"]["rate"]
        one = processes[f"adiskq {backend} 1"]["rate"]
        print(
            f"4 shared writers, {backend}: {four / sqlite['rate']:.2f}x sqlite 4 (target >= 3x: "
            f"{'met' if four >= 3 * sqlite['rate'] else 'MISSED'}); {four / one:.2f}x one writer "
            f"(target >= 1x: {'met' if four >= one else 'MISSED'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
