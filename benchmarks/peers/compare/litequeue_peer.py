"""litequeue: a message queue on SQLite (WAL, ``synchronous=NORMAL`` as it ships), text messages.

A batch is a run of ``put`` calls inside ``queue.transaction()``. For the durable workload the
connection is switched to ``synchronous=FULL`` so that a commit is fsynced. Consuming is
``pop()`` (lock the oldest ready message) then ``done(message_id)``, its documented cycle.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from litequeue import LiteQueue  # type: ignore[import-untyped]

from .common import (
    BATCH_SIZE,
    CONCURRENCY,
    POLL_INTERVAL_S,
    VALUE_TEXTS,
    Outcome,
    latency_of_text,
    paced,
    stamped_text,
    texts,
    threads_timed,
)


def _queue(path: str, synchronous: str = "NORMAL") -> LiteQueue:
    queue = LiteQueue(os.path.join(path, "queue.db"), timeout=60)
    if synchronous != "NORMAL":
        queue.conn.execute(f"PRAGMA synchronous={synchronous}")
    return queue


def single(path: str, count: int) -> Outcome:
    queue = _queue(path)
    started = time.perf_counter()
    for text in texts(count):
        queue.put(text)
    seconds = time.perf_counter() - started
    queue.close()
    return Outcome(seconds)


def _put_batches(queue: LiteQueue, count: int) -> None:
    for _ in range(count // BATCH_SIZE):
        with queue.transaction():
            for text in VALUE_TEXTS:
                queue.put(text)


def batch(path: str, count: int) -> Outcome:
    queue = _queue(path)
    started = time.perf_counter()
    _put_batches(queue, count)
    seconds = time.perf_counter() - started
    queue.close()
    return Outcome(seconds)


def durable32(path: str, count: int) -> Outcome:
    """32 threads share one queue object (one connection: SQLite has one writer at a time), each
    ``put`` its own fsynced commit."""
    queue = _queue(path, synchronous="FULL")
    lock = threading.Lock()
    per_thread = count // CONCURRENCY

    def producer() -> None:
        for text in texts(per_thread):
            with lock:
                queue.put(text)

    seconds = threads_timed(producer)
    queue.close()
    return Outcome(seconds)


def read(path: str, count: int) -> Outcome:
    writer = _queue(path)
    _put_batches(writer, count)
    writer.close()
    queue = _queue(path)
    started = time.perf_counter()
    seen = 0
    while (message := queue.pop()) is not None:
        queue.done(message.message_id)
        seen += 1
    seconds = time.perf_counter() - started
    queue.close()
    assert seen == count // BATCH_SIZE * BATCH_SIZE, (seen, count)
    return Outcome(seconds)


def latency_prepare(path: str) -> None:
    _queue(path).close()


def latency_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    """``pop`` returns None when nothing is ready: poll."""
    queue = _queue(path)
    ready()
    latencies: list[int] = []
    while len(latencies) < count:
        message = queue.pop()
        if message is None:
            time.sleep(POLL_INTERVAL_S)
            continue
        latencies.append(latency_of_text(message.data))
        queue.done(message.message_id)
    queue.close()
    return Outcome(latencies_ns=latencies)


def latency_produce(path: str, count: int) -> None:
    queue = _queue(path)
    paced(count, lambda: queue.put(stamped_text()))
    queue.close()
