"""SQLite in WAL mode (stdlib ``sqlite3``), a table used as a log: what many people reach for first.

``synchronous=NORMAL`` for the fast workloads (a commit survives a crash of the process, not of the
machine: the same promise as adiskq's ``flush="async"``), ``FULL`` for the durable one (every commit
fsyncs the WAL, like ``flush="sync"``). Calls are made directly, not through a thread, which is the
fastest way to drive SQLite; an async service would add a thread hop per call.

The ``*_keyed`` workloads use a table with a key column, ``(offset INTEGER PRIMARY KEY, ts, key,
value)``, give every row its own 12-byte key, build each row's key and value in the timed loop, and
count connecting and closing in the timed span.
The key column has no index (a plain table, as the target's peer is).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable

from .common import (
    BATCH_SIZE,
    CONCURRENCY,
    FAST_POLL_INTERVAL_S,
    KEYED_LATENCY_INTERVAL_S,
    POLL_INTERVAL_S,
    VALUES,
    Outcome,
    key,
    latency_of,
    message_value,
    paced,
    stamped_value,
    task_numbers,
    threads_timed,
    values,
)

_INSERT = "INSERT INTO log (ts, value) VALUES (?, ?)"


def _connect(path: str, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(path, "log.db"), isolation_level=None, timeout=60, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, ts INTEGER NOT NULL, value BLOB NOT NULL)")
    return db


def single(path: str, count: int) -> Outcome:
    db = _connect(path, "NORMAL")
    started = time.perf_counter()
    for value in values(count):
        db.execute(_INSERT, (time.time_ns(), value))
    seconds = time.perf_counter() - started
    db.close()
    return Outcome(seconds)


def _insert_batches(db: sqlite3.Connection, count: int) -> None:
    for _ in range(count // BATCH_SIZE):
        now = time.time_ns()
        db.execute("BEGIN")
        db.executemany(_INSERT, [(now, value) for value in VALUES])
        db.execute("COMMIT")


def batch(path: str, count: int) -> Outcome:
    db = _connect(path, "NORMAL")
    started = time.perf_counter()
    _insert_batches(db, count)
    seconds = time.perf_counter() - started
    db.close()
    return Outcome(seconds)


def durable32(path: str, count: int) -> Outcome:
    """32 threads share one connection (SQLite has one writer at a time; separate connections would
    only add lock retries), each INSERT its own fsynced commit."""
    db = _connect(path, "FULL")
    lock = threading.Lock()
    per_thread = count // CONCURRENCY

    def producer() -> None:
        for value in values(per_thread):
            with lock:
                db.execute(_INSERT, (time.time_ns(), value))

    seconds = threads_timed(producer)
    db.close()
    return Outcome(seconds)


def read(path: str, count: int) -> Outcome:
    """Page through the log by offset, a page at a time, as a resumable consumer does."""
    db = _connect(path, "NORMAL")
    _insert_batches(db, count)
    db.close()
    db = _connect(path, "NORMAL")
    started = time.perf_counter()
    seen, last = 0, 0
    while True:
        rows = db.execute(
            "SELECT offset, ts, value FROM log WHERE offset > ? ORDER BY offset LIMIT ?", (last, BATCH_SIZE)
        ).fetchall()
        if not rows:
            break
        seen += len(rows)
        last = rows[-1][0]
    seconds = time.perf_counter() - started
    db.close()
    assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
    return Outcome(seconds)


def latency_prepare(path: str) -> None:
    _connect(path, "NORMAL").close()


def latency_consume(
    path: str, count: int, ready: Callable[[], None], poll_interval_s: float = POLL_INTERVAL_S
) -> Outcome:
    """Poll for rows past the last offset seen, every ``poll_interval_s`` while there are none."""
    db = _connect(path, "NORMAL")
    ready()
    latencies: list[int] = []
    last = 0
    while len(latencies) < count:
        rows = db.execute("SELECT offset, value FROM log WHERE offset > ? ORDER BY offset LIMIT ?", (last, BATCH_SIZE))
        got = False
        for offset, value in rows:
            latencies.append(latency_of(value))
            last = offset
            got = True
        if not got:
            time.sleep(poll_interval_s)
    db.close()
    return Outcome(latencies_ns=latencies)


def latency_produce(path: str, count: int) -> None:
    db = _connect(path, "NORMAL")
    paced(count, lambda: db.execute(_INSERT, (time.time_ns(), stamped_value())))
    db.close()


# The distinct-key workloads: every message's key and value built in the timed loop, connecting and
# closing inside the timed span.

_INSERT_KEYED = "INSERT INTO log (ts, key, value) VALUES (?, ?, ?)"


def _connect_keyed(path: str, synchronous: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(path, "log.db"), isolation_level=None, timeout=60, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute(
        "CREATE TABLE IF NOT EXISTS log "
        "(offset INTEGER PRIMARY KEY, ts INTEGER NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL)"
    )
    return db


def single_keyed(path: str, count: int) -> Outcome:
    """Autocommit: each INSERT is its own transaction."""
    started = time.perf_counter()
    db = _connect_keyed(path, "NORMAL")
    execute = db.execute
    for number in range(count):
        execute(_INSERT_KEYED, (time.time_ns(), key(number), message_value(number)))
    db.close()
    return Outcome(time.perf_counter() - started)


def _insert_keyed_batches(db: sqlite3.Connection, count: int) -> None:
    """``executemany`` of 1,000 rows in one transaction, each row's key and value built for its batch."""
    for first in range(0, count // BATCH_SIZE * BATCH_SIZE, BATCH_SIZE):
        now = time.time_ns()
        db.execute("BEGIN")
        db.executemany(_INSERT_KEYED, [(now, key(n), message_value(n)) for n in range(first, first + BATCH_SIZE)])
        db.execute("COMMIT")


def batch_keyed(path: str, count: int) -> Outcome:
    started = time.perf_counter()
    db = _connect_keyed(path, "NORMAL")
    _insert_keyed_batches(db, count)
    db.close()
    return Outcome(time.perf_counter() - started)


def durable32_keyed(path: str, count: int) -> Outcome:
    """As ``durable32``: 32 threads share one connection, each INSERT its own fsynced commit."""
    lock = threading.Lock()
    shares = iter(task_numbers(count))
    started = time.perf_counter()
    db = _connect_keyed(path, "FULL")

    def producer() -> None:
        with lock:
            numbers = next(shares)
        for number in numbers:
            with lock:
                db.execute(_INSERT_KEYED, (time.time_ns(), key(number), message_value(number)))

    threads_timed(producer)
    db.close()
    return Outcome(time.perf_counter() - started)


def _write_keyed(path: str, count: int) -> None:
    db = _connect_keyed(path, "NORMAL")
    _insert_keyed_batches(db, count)
    db.close()


def read_keyed(path: str, count: int) -> Outcome:
    """Iterate one cursor over the whole table in order: SQLite's fastest way to read it all."""
    _write_keyed(path, count)
    seen = 0
    started = time.perf_counter()
    db = _connect_keyed(path, "NORMAL")
    for _ in db.execute("SELECT offset, ts, key, value FROM log ORDER BY offset"):
        seen += 1
    db.close()
    seconds = time.perf_counter() - started
    assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
    return Outcome(seconds)


read_keyed_long = read_keyed  # the same reading of a table ten times longer (bench_compare.py's counts)


def latency_keyed_prepare(path: str) -> None:
    _connect_keyed(path, "NORMAL").close()


def latency_keyed_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    """As ``latency_consume``, polling every 100 µs: a tenth of the keyless workload's interval."""
    return latency_consume(path, count, ready, poll_interval_s=FAST_POLL_INTERVAL_S)


def latency_keyed_produce(path: str, count: int) -> None:
    db = _connect_keyed(path, "NORMAL")
    numbers = iter(range(count))
    paced(
        count,
        lambda: db.execute(_INSERT_KEYED, (time.time_ns(), key(next(numbers)), stamped_value())),
        KEYED_LATENCY_INTERVAL_S,
    )
    db.close()
