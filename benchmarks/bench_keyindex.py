"""The key index: what it costs the producer, and how fast ``adiskq.find`` looks a key up.

Ingest, index on vs off, in the same run (runs alternate, medians of ``--runs``):

* ``push_many``: ``Producer.push_many`` of 1,000 records, 100-byte values, 4 partitions, as
  bench_producer.py's ``batch``: 1,000 keys taking turns ("1k keys"), and keys drawn from 1,000,000
  ("1M keys", the lookup stream's keys; the producer's placement cache misses);
* ``push``: one task awaiting every ``Producer.push`` (1,000 keys);
* peer: SQLite (WAL, synchronous=NORMAL) ``executemany`` of 1,000 rows per transaction into a table
  with and without an index on the key.

Each figure is messages per second (wall clock) and CPU microseconds per message (the process's
CPU time, all threads: steadier than wall time on a busy machine). Rolls and seals are included:
each run writes several 32 MiB segments per partition.

Lookups: a stream of ``--messages`` (default 10,000,000) messages with 100-byte values and keys
drawn at random from ``--keys`` (default 1,000,000), in 4 partitions of 32 MiB segments, written
once through the storage layer (``PartitionWriter.append`` of encoded batches, as the producer
writes them). Then ``adiskq.find(path, key)`` of random keys from a warm page cache: a first pass
warms the cache (and checks each sealed key index's CRC once), a second is timed (p50, p99, max).
Peer: the same rows in SQLite with an index on the key, ``SELECT ... WHERE key = ? ORDER BY rowid``.

    python benchmarks/bench_keyindex.py                       # full run (builds a 10M-message stream)
    python benchmarks/bench_keyindex.py --dir /big --keep     # keep the built streams for the next run
    python benchmarks/bench_keyindex.py --messages 1000000    # a smaller lookup stream
    python benchmarks/bench_keyindex.py --quick               # seconds; tests/benchmarks/test_benchmarks_quick.py
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

import adiskq
from adiskq._sansio import keyindex as keyindex_format
from adiskq._sansio.codec import encode_batch
from adiskq._sansio.naming import partition_for_key
from adiskq._storage import keyindex
from adiskq._storage.stream import StreamWriter

VALUE = b"v" * 100
PARTITIONS = 4
SEGMENT_BYTES = 32 * 2**20
LOOKUP_TARGET_MS = 2.0
INGEST_TARGET = 0.85  # index on / off, push_many


def _fresh(root: str, name: str) -> str:
    return os.path.join(tempfile.mkdtemp(prefix=f"{name}-", dir=root), "stream")


# -- ingest ----------------------------------------------------------------------------------------


def measured(run: Callable[[], int]) -> tuple[float, float]:
    """(messages per second, CPU µs per message) of ``run``, which returns its message count."""
    cpu, wall = time.process_time(), time.perf_counter()
    count = run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return count / wall, cpu / count * 1e6


def producer_run(coroutine: Callable[[], Coroutine[Any, Any, int]]) -> Callable[[], int]:
    return lambda: anyio.run(coroutine)


def push_many_1k(path: str, count: int, key_index: bool) -> Callable[[], Coroutine[Any, Any, int]]:
    keys = [f"customer-{i:03d}" for i in range(1000)]
    records = [adiskq.Record(VALUE, key=keys[i]) for i in range(1000)]

    async def run() -> int:
        async with adiskq.Producer(path, partitions=PARTITIONS, key_index=key_index) as producer:
            for _ in range(count // 1000):
                await producer.push_many(records)
        return count // 1000 * 1000

    return run


def push_many_1m(path: str, count: int, key_index: bool) -> Callable[[], Coroutine[Any, Any, int]]:
    rng = random.Random(11)
    batches = [
        [adiskq.Record(VALUE, key=f"key-{rng.randrange(1_000_000):07d}") for _ in range(1000)]
        for _ in range(count // 1000)
    ]

    async def run() -> int:
        async with adiskq.Producer(path, partitions=PARTITIONS, key_index=key_index) as producer:
            for batch in batches:
                await producer.push_many(batch)
        return count // 1000 * 1000

    return run


def push_single(path: str, count: int, key_index: bool) -> Callable[[], Coroutine[Any, Any, int]]:
    keys = [f"customer-{i:03d}" for i in range(1000)]

    async def run() -> int:
        async with adiskq.Producer(path, partitions=PARTITIONS, key_index=key_index) as producer:
            push = producer.push
            for i in range(count):
                await push(VALUE, key=keys[i % 1000])
        return count

    return run


def sqlite_ingest(path: str, count: int, indexed: bool) -> int:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    db = sqlite3.connect(path + ".db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE log (ts INTEGER, key BLOB, value BLOB)")
    if indexed:
        db.execute("CREATE INDEX log_key ON log (key)")
    rows = [(0, f"customer-{i:03d}".encode(), VALUE) for i in range(1000)]
    for _ in range(count // 1000):
        db.execute("BEGIN")
        db.executemany("INSERT INTO log (ts, key, value) VALUES (?, ?, ?)", rows)
        db.execute("COMMIT")
    db.close()
    return count // 1000 * 1000


def ingest(root: str, runs: int, counts: dict[str, int]) -> dict[str, list[tuple[float, float]]]:
    """Every ingest workload, index on and off, runs interleaved; samples of (msg/s, CPU µs/msg)."""
    samples: dict[str, list[tuple[float, float]]] = {}
    workloads = {"push_many 1k keys": push_many_1k, "push_many 1M keys": push_many_1m, "push": push_single}
    for _ in range(runs):
        for name, workload in workloads.items():
            count = counts["push" if name == "push" else "push_many"]
            for key_index in (True, False):
                path = _fresh(root, "ingest")
                label = f"{name}, index {'on' if key_index else 'off'}"
                samples.setdefault(label, []).append(measured(producer_run(workload(path, count, key_index))))
                shutil.rmtree(os.path.dirname(path))
        for indexed in (True, False):
            path = _fresh(root, "sqlite")
            label = f"sqlite executemany, key index {'on' if indexed else 'off'}"
            samples.setdefault(label, []).append(
                measured(lambda path=path, indexed=indexed: sqlite_ingest(path, counts["push_many"], indexed))  # type: ignore[misc]
            )
            shutil.rmtree(os.path.dirname(path))
    return samples


# -- the lookup stream -----------------------------------------------------------------------------


def key_name(number: int) -> bytes:
    return b"key-%07d" % number


def message_keys(messages: int, keys: int) -> list[int]:
    """Which key each message gets (seeded, so a kept stream and a new one agree)."""
    rng = random.Random(2024)
    return [rng.randrange(keys) for _ in range(messages)]


def build_stream(path: str, messages: int, keys: int) -> float:
    """Write the lookup stream through the storage layer; returns the seconds it took."""
    started = time.perf_counter()
    placement = [partition_for_key(key_name(k), PARTITIONS) for k in range(keys)]
    hashes = [keyindex_format.key_hash(key_name(k)) for k in range(keys)]
    base_ns = 1_700_000_000 * 10**9
    writer = StreamWriter.open(path, partitions=PARTITIONS, segment_size_bytes=SEGMENT_BYTES)
    try:
        pending: list[tuple[list[bytes], list[bytes], list[int], list[int]]] = [
            ([], [], [], []) for _ in range(PARTITIONS)
        ]
        for number, k in enumerate(message_keys(messages, keys)):
            values, key_list, stamps, key_hashes = pending[placement[k]]
            values.append(b"%012d" % number + VALUE[:88])
            key_list.append(key_name(k))
            stamps.append(base_ns + number * 1000)
            key_hashes.append(hashes[k])
            if len(values) == 1000:
                _flush(writer, pending, placement[k])
        for partition in range(PARTITIONS):
            _flush(writer, pending, partition)
    finally:
        writer.close()
    return time.perf_counter() - started


def _flush(
    writer: StreamWriter, pending: list[tuple[list[bytes], list[bytes], list[int], list[int]]], partition: int
) -> None:
    values, key_list, stamps, key_hashes = pending[partition]
    if values:
        writer.partitions[partition].append(encode_batch(values, key_list, stamps), stamps, key_hashes)
        pending[partition] = ([], [], [], [])


def build_sqlite(path: str, messages: int, keys: int) -> float:
    started = time.perf_counter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE log (ts INTEGER, key BLOB, value BLOB)")
    db.execute("CREATE INDEX log_key ON log (key)")
    base_ns = 1_700_000_000 * 10**9
    assigned = message_keys(messages, keys)
    for start in range(0, messages, 10_000):
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO log (ts, key, value) VALUES (?, ?, ?)",
            (
                (base_ns + n * 1000, key_name(assigned[n]), b"%012d" % n + VALUE[:88])
                for n in range(start, min(messages, start + 10_000))
            ),
        )
        db.execute("COMMIT")
    db.close()
    return time.perf_counter() - started


def prepared(root: str, messages: int, keys: int, keep: bool) -> tuple[str, str, dict[str, float]]:
    """The lookup stream and its SQLite twin, each built now or found from an earlier ``--keep``
    run (delete one of them, or its ``.json`` beside it, to have it built again)."""
    tag = f"{messages}-{keys}"
    built: dict[str, float] = {}
    paths = {}
    for name, suffix, build in (("adiskq", "", build_stream), ("sqlite", ".db", build_sqlite)):
        path = os.path.join(root, f"lookup-{tag}{suffix}")
        marker = os.path.join(root, f"lookup-{tag}.{name}.json")
        paths[name] = path
        if keep and os.path.exists(marker) and os.path.exists(path):
            with open(marker) as file:
                built[f"{name} build s"] = json.load(file)["seconds"]
            built[f"{name} reused"] = 1.0
            continue
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.unlink(path)
        built[f"{name} build s"] = build(path, messages, keys)
        with open(marker, "w") as file:
            json.dump({"seconds": built[f"{name} build s"]}, file)
    return paths["adiskq"], paths["sqlite"], built


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def lookups(path: str, db_path: str, keys: int, count: int) -> dict[str, list[float]]:
    """Timed lookups (ms) of random keys, after a warm-up pass over the same keys."""
    rng = random.Random(7)
    wanted = [key_name(rng.randrange(keys)) for _ in range(count)]
    db = sqlite3.connect(db_path)
    query = "SELECT rowid, ts, key, value FROM log WHERE key = ? ORDER BY rowid"
    found_counts = []
    keyindex._cache.clear()  # the first lookup of each partition then maps and checks its key indexes
    first_started = time.perf_counter()
    adiskq.find(path, wanted[0])
    first_ms = (time.perf_counter() - first_started) * 1000
    for key in wanted:  # warm-up: page cache, CRC checks, SQLite's cache
        adiskq.find(path, key)
        db.execute(query, (key,)).fetchall()
    times: dict[str, list[float]] = {
        "adiskq find": [],
        "adiskq find, CPU time": [],
        "sqlite select": [],
        "sqlite select, CPU time": [],
        "first find (maps, CRCs)": [first_ms],
    }
    for key in wanted:
        started, cpu = time.perf_counter(), time.thread_time()
        found = adiskq.find(path, key)
        times["adiskq find"].append((time.perf_counter() - started) * 1000)
        times["adiskq find, CPU time"].append((time.thread_time() - cpu) * 1000)
        started, cpu = time.perf_counter(), time.thread_time()
        rows = db.execute(query, (key,)).fetchall()
        times["sqlite select"].append((time.perf_counter() - started) * 1000)
        times["sqlite select, CPU time"].append((time.thread_time() - cpu) * 1000)
        assert len(rows) == len(found), (key, len(rows), len(found))
        found_counts.append(len(found))
    times["messages per key"] = [float(c) for c in found_counts]
    db.close()
    return times


# -- driver ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts, one run: checks the script works")
    parser.add_argument("--runs", type=int, default=None, help="ingest runs to take medians of (default 5, quick 1)")
    parser.add_argument("--messages", type=int, default=None, help="messages in the lookup stream (default 10,000,000)")
    parser.add_argument("--keys", type=int, default=None, help="distinct keys in it (default 1,000,000)")
    parser.add_argument("--lookups", type=int, default=None, help="timed lookups (default 2,000)")
    parser.add_argument("--dir", default=None, help="where to put the streams (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the lookup stream in --dir and reuse it next time")
    parser.add_argument("--skip-ingest", action="store_true", help="only the lookups")
    args = parser.parse_args(argv)
    for name in ("runs", "messages", "keys", "lookups"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.keep and args.dir is None:
        parser.error("--keep needs --dir (a temporary folder is deleted at the end)")
    runs = args.runs or (1 if args.quick else 5)
    messages = args.messages or (20_000 if args.quick else 10_000_000)
    keys = args.keys or (2_000 if args.quick else 1_000_000)
    lookup_count = args.lookups or (100 if args.quick else 2_000)
    counts = {"push_many": 4_000 if args.quick else 1_000_000, "push": 1_000 if args.quick else 100_000}

    root = args.dir if args.keep else tempfile.mkdtemp(prefix="adiskq-bench-keyindex-", dir=args.dir)
    os.makedirs(root, exist_ok=True)
    try:
        samples = {} if args.skip_ingest else ingest(root, runs, counts)
        path, db_path, built = prepared(root, messages, keys, args.keep)
        times = lookups(path, db_path, keys, lookup_count)
        stats = adiskq.stats(path)
    finally:
        if not args.keep:
            shutil.rmtree(root)

    print(f"key index benchmark ({'quick' if args.quick else f'medians of {runs}'}; Python {sys.version.split()[0]})")
    if samples:
        print(f"\ningest: push_many {counts['push_many']:,} messages a run, push {counts['push']:,}")
        print(f"{'workload':44s} {'msg/s':>11s} {'CPU µs/msg':>11s}  on/off (median of paired runs)")
        medians = {
            name: (statistics.median(s[0] for s in runs_), statistics.median(s[1] for s in runs_))
            for name, runs_ in samples.items()
        }
        for name, (rate, cpu) in medians.items():
            ratio = ""
            if name.endswith(" on"):
                # Each run measured on and off back to back: the median of those paired ratios is
                # steadier than a ratio of medians when the machine's load drifts.
                on, off = samples[name], samples[name[: -len("on")] + "off"]
                rates = statistics.median(a[0] / b[0] for a, b in zip(on, off, strict=True))
                cpus = statistics.median(a[1] / b[1] for a, b in zip(on, off, strict=True))
                ratio = f"{rates:.3f}x msg/s, {cpus:.3f}x CPU"
                if name.startswith("push_many"):
                    ratio += f" (target >= {INGEST_TARGET:.2f}x msg/s)"
            print(f"{name:44s} {rate:>11,.0f} {cpu:>11.2f}  {ratio}")
    segments = sum(p.segments for p in stats.partitions)
    size = sum(p.size_bytes for p in stats.partitions)
    reused = [name for name in ("adiskq", "sqlite") if built.get(f"{name} reused")]
    print(
        f"\nlookups: {messages:,} messages, {keys:,} keys, {PARTITIONS} partitions, {segments} segments, "
        f"{size / 2**20:,.0f} MiB; built in {built['adiskq build s']:.1f} s (SQLite {built['sqlite build s']:.1f} s)"
        + (f"; {' and '.join(reused)} reused from an earlier --keep run" if reused else "")
    )
    per_key = times.pop("messages per key")
    print(f"{lookup_count:,} lookups of random keys, warm cache; {statistics.mean(per_key):.1f} messages per key found")
    print(f"{'lookup':26s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}")
    for name, values in times.items():
        print(f"{name:26s} {percentile(values, 0.5):>8.3f} {percentile(values, 0.99):>8.3f} {max(values):>8.3f}")
    for clock in ("", ", CPU time"):
        p99 = percentile(times[f"adiskq find{clock}"], 0.99)
        sqlite_p99 = percentile(times[f"sqlite select{clock}"], 0.99)
        print(
            f"adiskq find p99{clock or ', wall clock'} {p99:.3f} ms (target <= {LOOKUP_TARGET_MS} ms); "
            f"{p99 / sqlite_p99:.2f}x SQLite's"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
