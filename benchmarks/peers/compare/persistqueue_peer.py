"""persist-queue's ``SQLiteQueue``: the package's queue that several processes can share.

As shipped it opens SQLite in WAL mode with SQLite's default ``synchronous=FULL`` and commits every
``put``: each message is fsynced, in every workload (there is no public switch for a cheaper mode,
and no batch put). Reading is destructive, as in any queue: ``get`` selects and deletes; with
``auto_commit=False`` a reader acknowledges a page at a time with ``task_done()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import persistqueue
from persistqueue.exceptions import Empty

from .common import (
    BATCH_SIZE,
    CONCURRENCY,
    POLL_INTERVAL_S,
    Outcome,
    latency_of,
    paced,
    stamped_value,
    threads_timed,
    values,
)


def _queue(path: str, *, auto_commit: bool = True, multithreading: bool = False) -> persistqueue.SQLiteQueue:
    return persistqueue.SQLiteQueue(path, auto_commit=auto_commit, multithreading=multithreading)


def single(path: str, count: int) -> Outcome:
    queue = _queue(path, auto_commit=True)
    started = time.perf_counter()
    for value in values(count):
        queue.put(value)
    seconds = time.perf_counter() - started
    queue.close()
    return Outcome(seconds)


def batch(path: str, count: int) -> Outcome:
    """No batch put exists: the same loop of ``put`` calls, over the same count of messages."""
    count = count // BATCH_SIZE * BATCH_SIZE
    return single(path, count)


def durable32(path: str, count: int) -> Outcome:
    """32 threads share one queue opened with ``multithreading=True``, its documented thread-safe mode."""
    queue = _queue(path, auto_commit=True, multithreading=True)
    per_thread = count // CONCURRENCY

    def producer() -> None:
        for value in values(per_thread):
            queue.put(value)

    seconds = threads_timed(producer)
    queue.close()
    return Outcome(seconds)


def read(path: str, count: int) -> Outcome:
    count = count // BATCH_SIZE * BATCH_SIZE
    writer = _queue(path, auto_commit=True)
    for value in values(count):
        writer.put(value)
    writer.close()
    queue = _queue(path, auto_commit=False)
    started = time.perf_counter()
    seen = 0
    while True:
        try:
            queue.get(block=False)
        except Empty:
            break
        seen += 1
        if seen % BATCH_SIZE == 0:
            queue.task_done()
    queue.task_done()
    seconds = time.perf_counter() - started
    queue.close()
    assert seen == count, (seen, count)
    return Outcome(seconds)


def latency_prepare(path: str) -> None:
    _queue(path).close()


def latency_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    """``get(block=True)`` only wakes for puts made in its own process: across processes, poll."""
    queue = _queue(path, auto_commit=True)
    ready()
    latencies: list[int] = []
    while len(latencies) < count:
        try:
            value = queue.get(block=False)
        except Empty:
            time.sleep(POLL_INTERVAL_S)
            continue
        latencies.append(latency_of(value))
    queue.close()
    return Outcome(latencies_ns=latencies)


def latency_produce(path: str, count: int) -> None:
    queue = _queue(path, auto_commit=True)
    paced(count, lambda: queue.put(stamped_value()))
    queue.close()
