"""SQLite in WAL mode (stdlib ``sqlite3``), a table used as a log: what many people reach for first.

``synchronous=NORMAL`` for the fast workloads (a commit survives a crash of the process, not of the
machine: the same promise as adiskq's ``flush="async"``), ``FULL`` for the durable one (every commit
fsyncs the WAL, like ``flush="sync"``). Calls are made directly, not through a thread, which is the
fastest way to drive SQLite; an async service would add a thread hop per call.
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
    POLL_INTERVAL_S,
    VALUES,
    Outcome,
    latency_of,
    paced,
    stamped_value,
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


def latency_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    """Poll for rows past the last offset seen, every POLL_INTERVAL_S while there are none."""
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
            time.sleep(POLL_INTERVAL_S)
    db.close()
    return Outcome(latencies_ns=latencies)


def latency_produce(path: str, count: int) -> None:
    db = _connect(path, "NORMAL")
    paced(count, lambda: db.execute(_INSERT, (time.time_ns(), stamped_value())))
    db.close()
