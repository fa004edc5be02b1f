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

Each round measures every peer back to back (exclusive and shared in alternating order; one writer,
four writers and SQLite's four), and the ratios printed are the medians of each round's own ratios,
so load that changes between rounds on a shared machine moves them less. ``--baseline DIR`` adds
four writer processes running the adiskq package found in ``DIR`` (e.g. an earlier commit's, from
``git archive COMMIT adiskq | tar -x -C DIR``, with the compiled core copied in) to every round.

    python benchmarks/bench_shared.py                  # full run, medians of 5 rounds
    python benchmarks/bench_shared.py --quick          # a few thousand messages, for the test suite
    python benchmarks/bench_shared.py --baseline /tmp/before
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


def run_processes(
    kind: str, path: str, processes: int, count: int, backend: str, package: str | None = None
) -> dict[str, float]:
    """Start the writers (importing adiskq from ``package`` if given), let them all go at once, and
    gather aggregate msg/s and latencies."""
    environment = None
    if package is not None:
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join([package, os.environ.get("PYTHONPATH", "")])}
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--child", kind, path, str(count), f"p{n}-", backend],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
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


def median(values: list[float]) -> float:
    return statistics.median(values)


# -- the run ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts, one round: checks the script works")
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--dir", help="where the streams go (default: a temporary folder)")
    parser.add_argument("--baseline", help="a folder holding another adiskq package: its 4 writers join each round")
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
    baseline = os.path.abspath(args.baseline) if args.baseline else None
    if baseline is not None and not os.path.isfile(os.path.join(baseline, "adiskq", "__init__.py")):
        parser.error(f"--baseline {args.baseline}: no adiskq package there (adiskq/__init__.py)")
    runs = 1 if args.quick else args.runs
    single = 2_000 if args.quick else 100_000
    batched = 2_000 if args.quick else 300_000
    per_process = 1_000 if args.quick else 50_000
    root = tempfile.mkdtemp(prefix="adiskq-bench-shared-", dir=args.dir)

    def fresh(name: str) -> str:
        return tempfile.mkdtemp(prefix=f"{name}-", dir=root)

    def stream(name: str) -> str:
        return os.path.join(fresh(name), "stream")

    def sqlite_run() -> dict[str, float]:
        path = fresh("sqlite")
        prepare_sqlite(path)
        return run_processes("sqlite", path, 4, per_process, "-")

    rates: dict[str, list[float]] = {}  # W1/W2 figures of each round
    ratios: dict[str, list[float]] = {}  # each round's own ratios
    processes: dict[str, list[dict[str, float]]] = {}
    try:
        for round_number in range(runs):
            for backend in ("asyncio", "trio"):
                for workload, count, measure in (("W1", single, w1), ("W2", batched, w2)):
                    modes = ("exclusive", "shared") if round_number % 2 == 0 else ("shared", "exclusive")
                    got = {}
                    for mode in modes:
                        got[mode] = anyio.run(measure, stream("w"), count, mode == "shared", backend=backend)
                        rates.setdefault(f"{workload} {backend} {mode}", []).append(got[mode])
                    ratios.setdefault(f"{workload} {backend}", []).append(got["shared"] / got["exclusive"])
            sqlite = sqlite_run()
            processes.setdefault("sqlite 4", []).append(sqlite)
            for backend in ("asyncio", "trio"):
                peers = [("adiskq", None, 1), ("adiskq", None, 4)]
                if baseline is not None:
                    peers.append(("baseline", baseline, 4))
                got_rates = {}
                for name, package, writers in peers:
                    report = run_processes("adiskq", stream("p"), writers, per_process, backend, package)
                    processes.setdefault(f"{name} {backend} {writers}", []).append(report)
                    got_rates[f"{name} {writers}"] = report["rate"]
                ratios.setdefault(f"4/1 {backend}", []).append(got_rates["adiskq 4"] / got_rates["adiskq 1"])
                for name, rate in got_rates.items():
                    ratios.setdefault(f"{name} {backend}/sqlite", []).append(rate / sqlite["rate"])
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"adiskq shared-producer benchmark ({'quick' if args.quick else f'medians of {runs} rounds'}; "
        f"Python {sys.version.split()[0]}; load {os.getloadavg()[0]:.1f})"
    )
    print(f"{'workload':<24} {'exclusive msg/s':>16} {'shared msg/s':>14} {'shared/exclusive':>17}  target")
    for workload in ("W1", "W2"):
        for backend in ("asyncio", "trio"):
            exclusive = median(rates[f"{workload} {backend} exclusive"])
            shared = median(rates[f"{workload} {backend} shared"])
            ratio = median(ratios[f"{workload} {backend}"])
            verdict = "met" if ratio >= 0.85 else "MISSED"
            print(
                f"{workload + ' ' + backend:<24} {exclusive:>16,.0f} {shared:>14,.0f} {ratio:>16.2f}x"
                f"  >= 0.85x: {verdict}"
            )
    print(f"{'writer processes':<24} {'msg/s':>16} {'p50 µs':>10} {'p99 µs':>10} {'vs sqlite 4':>12}")
    for name, reports in processes.items():
        versus = 1.0 if name == "sqlite 4" else median(ratios[_ratio_key(name)])
        figures = {field: median([r[field] for r in reports]) for field in ("rate", "p50_us", "p99_us")}
        print(
            f"{name:<24} {figures['rate']:>16,.0f} {figures['p50_us']:>10.1f} {figures['p99_us']:>10.1f} "
            f"{versus:>11.2f}x"
        )
    for backend in ("asyncio", "trio"):
        versus_sqlite = median(ratios[f"adiskq 4 {backend}/sqlite"])
        versus_one = median(ratios[f"4/1 {backend}"])
        print(
            f"4 shared writers, {backend}: {versus_sqlite:.2f}x sqlite 4 (target >= 3x: "
            f"{'met' if versus_sqlite >= 3 else 'MISSED'}); {versus_one:.2f}x one writer "
            f"(target >= 1x: {'met' if versus_one >= 1 else 'MISSED'})"
        )
    return 0


def _ratio_key(name: str) -> str:
    """``adiskq asyncio 4`` -> ``adiskq 4 asyncio/sqlite``, the key of its ratios to SQLite."""
    peer, backend, writers = name.split()
    return f"{peer} {writers} {backend}/sqlite"


if __name__ == "__main__":
    sys.exit(main())
