"""Storage layer alone: append and sequential read in messages/s, beside SQLite in the same run.

Workload: 100-byte values, 12-byte keys, batches of 1,000 messages, one partition.

* ``append``: ``PartitionWriter.append`` of already-encoded records (the storage write path: data,
  then time index, then index, one write each), and ``encode+append`` with ``encode_batch`` timed too.
* ``read``: ``PartitionCursor.read(1000)`` from offset 0 to the end: index entries, one ``pread`` of
  the data, every record's size, magic and CRC-32C checked, decoded into ``Message`` tuples.
* peers: SQLite in WAL mode with ``synchronous=NORMAL``, ``executemany`` of 1,000 rows per
  transaction; and a full scan of that table (``SELECT`` of every row, ``fetchmany(1000)``).

Neither side fsyncs in the timed part (adiskq's default flush="async" leaves it to a background
flusher; SQLite WAL with synchronous=NORMAL syncs only at checkpoints), and both read from the page
cache. Figures are medians of several runs; ratios are adiskq / SQLite.

    python benchmarks/bench_storage.py            # full run
    python benchmarks/bench_storage.py --quick    # seconds; what tests/benchmarks/test_benchmarks_quick.py runs
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from adiskq._sansio.codec import encode_batch, encode_record
from adiskq._sansio.keyindex import key_hash
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.partition_writer import PartitionWriter
from adiskq._storage.stream import StreamWriter

BATCH = 1000
VALUE_BYTES = 100
KEY_BYTES = 12
TARGETS = {"append": 1_500_000, "read": 2_000_000}


def make_batches(batch_count: int, *, variable: bool = False) -> list[list[tuple[bytes, bytes, int]]]:
    """``batch_count`` batches of (value, key, timestamp_ns); values of 100 bytes, or 50-150 if variable."""
    rng = random.Random(42)
    base_ns = 1_700_000_000 * 10**9
    batches = []
    for b in range(batch_count):
        batch = []
        for i in range(BATCH):
            n = b * BATCH + i
            size = rng.randint(50, 150) if variable else VALUE_BYTES
            value = rng.randbytes(size)
            key = f"key-{n % 100_000:08d}".encode()
            assert len(key) == KEY_BYTES
            batch.append((value, key, base_ns + n * 1000))
        batches.append(batch)
    return batches


def encode_batches(batches: list[list[tuple[bytes, bytes, int]]]) -> list[tuple[list[bytes], list[int]]]:
    """The records and timestamps as PartitionWriter.append takes them."""
    return [([encode_record(v, k, t) for v, k, t in batch], [t for _, _, t in batch]) for batch in batches]


def timed(action: Callable[[], int]) -> float:
    """Messages per second of ``action`` (which returns how many messages it handled)."""
    started = time.perf_counter()
    count = action()
    return count / (time.perf_counter() - started)


def adiskq_append(
    directory: str, encoded: list[tuple[list[bytes], list[int]]], *, key_hashes: list[list[int]] | None = None
) -> float:
    """Append pre-encoded batches. Without ``key_hashes`` the key index is off (the storage layer as
    first specified); with them it is on, fed the hashes the producer computes once per key."""
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=32 * 2**20, key_index=key_hashes is not None)

    def run() -> int:
        if key_hashes is None:
            for records, stamps in encoded:
                writer.append(records, stamps)
        else:
            for (records, stamps), hashes in zip(encoded, key_hashes, strict=True):
                writer.append(records, stamps, hashes)
        return len(encoded) * BATCH

    try:
        return timed(run)
    finally:
        writer.close()


def adiskq_encode_append(directory: str, batches: list[list[tuple[bytes, bytes, int]]]) -> float:
    """Encode and append with the key index on, as a producer's push_many does."""
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=32 * 2**20)

    columns = [([v for v, _, _ in batch], [k for _, k, _ in batch], [t for _, _, t in batch]) for batch in batches]

    def run() -> int:
        for values, keys, stamps in columns:
            writer.append(encode_batch(values, keys, stamps), stamps, list(map(key_hash, keys)))
        return len(columns) * BATCH

    try:
        return timed(run)
    finally:
        writer.close()


def adiskq_read(directory: str, expected: int) -> float:
    reader = PartitionReader(directory, 0)

    def run() -> int:
        count = 0
        with reader.cursor(0) as cursor:
            while messages := cursor.read(BATCH):
                count += len(messages)
        assert count == expected, (count, expected)
        return count

    return timed(run)


def sqlite_connect(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute(
        "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, key BLOB, value BLOB NOT NULL)"
    )
    return connection


def sqlite_append(path: str, batches: list[list[tuple[bytes, bytes, int]]]) -> float:
    connection = sqlite_connect(path)
    rows = [[(t, k, v) for v, k, t in batch] for batch in batches]

    def run() -> int:
        for batch in rows:
            connection.execute("BEGIN")
            connection.executemany("INSERT INTO log (ts, key, value) VALUES (?, ?, ?)", batch)
            connection.execute("COMMIT")
        return len(rows) * BATCH

    try:
        return timed(run)
    finally:
        connection.close()


def sqlite_scan(path: str, expected: int) -> float:
    connection = sqlite_connect(path)

    def run() -> int:
        count = 0
        cursor = connection.execute("SELECT id, ts, key, value FROM log ORDER BY id")
        while rows := cursor.fetchmany(BATCH):
            count += len(rows)
        assert count == expected, (count, expected)
        return count

    try:
        return timed(run)
    finally:
        connection.close()


def one_run(root: str, batch_count: int) -> dict[str, float]:
    """Every measurement once, in fresh folders.

    The inputs are built here and dropped before the reads: a heap holding hundreds of thousands of
    input tuples makes every full garbage collection during a read slower (for both sides alike).
    """
    total = batch_count * BATCH
    batches = make_batches(batch_count)
    encoded = encode_batches(batches)
    variable = encode_batches(make_batches(batch_count, variable=True))
    results: dict[str, float] = {}
    hashes = [[key_hash(k) for _, k, _ in batch] for batch in batches]
    results["adiskq append"] = adiskq_append(os.path.join(root, "a"), encoded)
    results["adiskq append, key index on"] = adiskq_append(os.path.join(root, "k"), encoded, key_hashes=hashes)
    results["adiskq encode+append"] = adiskq_encode_append(os.path.join(root, "b"), batches)
    results["sqlite append"] = sqlite_append(os.path.join(root, "s.db"), batches)
    adiskq_append(os.path.join(root, "v"), variable)
    del batches, encoded, variable, hashes
    gc.collect()
    results["adiskq read"] = adiskq_read(os.path.join(root, "a"), total)
    results["sqlite scan"] = sqlite_scan(os.path.join(root, "s.db"), total)
    results["adiskq read, values 50-150 B"] = adiskq_read(os.path.join(root, "v"), total)
    gc.disable()
    try:
        results["adiskq read, gc paused (diagnostic)"] = adiskq_read(os.path.join(root, "a"), total)
    finally:
        gc.enable()
    return results


def open_times(root: str, partitions: int, segment_mib: int) -> dict[str, float]:
    """Seconds for a producer to open a stream whose partitions each hold a full active segment.

    After a clean close the fast path trusts the files as the close left them; after a crash
    (here: a close without fsync, which leaves no clean-close record) every record is checked.
    """
    path = os.path.join(root, "open")
    records = [encode_record(random.randbytes(VALUE_BYTES), b"key-%08d" % i, i) for i in range(BATCH)]
    stamps = list(range(BATCH))
    batches = segment_mib * 2**20 // sum(map(len, records))
    writer = StreamWriter.open(path, partitions=partitions, segment_size_bytes=2**30)
    for partition in writer.partitions:
        for _ in range(batches):
            partition.append(records, stamps)
    writer.close()

    def reopen(sync: bool) -> float:
        started = time.perf_counter()
        writer = StreamWriter.open(path)
        elapsed = time.perf_counter() - started
        writer.close(sync=sync)
        return elapsed

    clean = reopen(sync=False)  # the first open after the clean close above; leaves no record behind
    crash = reopen(sync=True)  # after a "crash": every partition's active segment is checked
    return {
        f"producer open, clean close ({partitions}x{segment_mib} MiB)": clean,
        f"producer open, after a crash ({partitions}x{segment_mib} MiB)": crash,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few small runs (seconds), to keep the script working")
    parser.add_argument("--runs", type=int, default=None, help="runs to take the median of (default 5, quick 1)")
    parser.add_argument("--batches", type=int, default=None, help="batches of 1,000 per run (default 300, quick 5)")
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args(argv)
    for name in ("runs", "batches"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    runs = args.runs or (1 if args.quick else 5)
    batch_count = args.batches or (5 if args.quick else 300)

    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="adiskq-bench-", dir=args.dir)
        try:
            for name, value in one_run(root, batch_count).items():
                samples.setdefault(name, []).append(value)
        finally:
            shutil.rmtree(root)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    open_samples: dict[str, list[float]] = {}
    for _ in range(runs):
        root = tempfile.mkdtemp(prefix="adiskq-bench-", dir=args.dir)
        try:
            for name, value in open_times(root, 2 if args.quick else 4, 1 if args.quick else 32).items():
                open_samples.setdefault(name, []).append(value)
        finally:
            shutil.rmtree(root)

    print(
        f"storage layer, {batch_count} batches of {BATCH:,} messages, {VALUE_BYTES}-byte values, "
        f"{KEY_BYTES}-byte keys; median of {runs} run(s); Python {sys.version.split()[0]}"
    )
    print(f"{'measurement':36s} {'msg/s':>12s}  notes")
    peers = {
        "adiskq append": "sqlite append",
        "adiskq append, key index on": "sqlite append",
        "adiskq encode+append": "sqlite append",
        "adiskq read": "sqlite scan",
    }
    for name, value in medians.items():
        notes = []
        if name in peers:
            notes.append(f"{value / medians[peers[name]]:.2f}x {peers[name]}")
        target = TARGETS.get(name.removeprefix("adiskq ")) if name in ("adiskq append", "adiskq read") else None
        if target:
            notes.append(f"target {target:,}: {'met' if value >= target else 'MISSED'}")
        print(f"{name:36s} {value:12,.0f}  {'; '.join(notes)}")
    for name, values in open_samples.items():
        medians[name] = statistics.median(values)
        print(f"{name:48s} {medians[name] * 1000:8.1f} ms")
    return medians


if __name__ == "__main__":
    main()
