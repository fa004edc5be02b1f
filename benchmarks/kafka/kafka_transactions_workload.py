"""Kafka transactions of 100 records, for ``bench_kafka.py --only transactions``: one librdkafka
transactional producer writes COUNT transactions, each 100 records of 100 bytes to one partition then
``commit_transaction``, against the gateway and against Apache Kafka in the same run.

Figures, each side: the commit's latency (from ``commit_transaction`` called to returned: librdkafka
flushes the records still queued, sends EndTxn, and the broker writes its markers — the gateway
durably, Kafka through its page cache with its replication), p50 and p99; transactions and records a
second over the whole run (begin, produce, commit, back to back); and the broker's CPU time a
transaction. A warm-up of a tenth of COUNT transactions runs first, uncounted.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psutil
from confluent_kafka import Producer

RECORDS = 100
VALUE = b"v" * 100


def transactions(bootstrap: str, topic: str, count: int, broker: psutil.Process, name: str) -> dict[str, float]:
    """COUNT transactions of RECORDS records, committed one after another: the figures, each
    prefixed by ``name`` (``kafka_txn`` for the gateway, ``apache_kafka_txn`` for Kafka)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{topic}",
            "linger.ms": 5,
            "batch.num.messages": 10_000,
        }
    )
    producer.init_transactions(60)
    run_transactions(producer, topic, max(1, count // 10))  # connections, the coordinator, the caches
    before = broker.cpu_times()
    started = time.perf_counter()
    commits = run_transactions(producer, topic, count)
    elapsed = time.perf_counter() - started
    after = broker.cpu_times()
    cpu = (after.user - before.user) + (after.system - before.system)
    return {
        f"{name}_commit_p50_us": statistics.median(commits),
        f"{name}_commit_p99_us": statistics.quantiles(commits, n=100)[98] if len(commits) > 1 else commits[0],
        f"{name}_per_second": count / elapsed,
        f"{name}_records_per_second": count * RECORDS / elapsed,
        f"{name}_broker_cpu_us": cpu / count * 1e6,
    }


def run_transactions(producer: Producer, topic: str, count: int) -> list[float]:
    """COUNT transactions back to back; each commit's latency in µs."""
    commits = []
    for _ in range(count):
        producer.begin_transaction()
        for _record in range(RECORDS):
            producer.produce(topic, VALUE, partition=0)
        started = time.perf_counter()
        producer.commit_transaction(60)
        commits.append((time.perf_counter() - started) * 1e6)
    return commits


def print_beside(results: dict[str, float]) -> None:
    """The gateway's figures beside Kafka's; the ratio is the gateway's over Kafka's (and the
    ``before`` gateway's figures, when measured)."""
    rows = [
        ("commit p50 (µs)", "commit_p50_us", "≤ 1"),
        ("commit p99 (µs)", "commit_p99_us", "≤ 1"),
        (f"transactions of {RECORDS} records a second", "per_second", "≥ 1"),
        ("records a second, in transactions", "records_per_second", "≥ 1"),
        ("broker CPU a transaction (µs)", "broker_cpu_us", ""),
    ]
    print(f"{'':44} {'Kafka gateway':>14} {'Apache Kafka':>13} {'ratio':>7}  target (ratio)")
    for label, figure, target in rows:
        gateway, kafka = results[f"kafka_txn_{figure}"], results[f"apache_kafka_txn_{figure}"]
        print(f"{label:44} {gateway:>14,.1f} {kafka:>13,.1f} {gateway / kafka:>6.2f}x  {target}")
    if "before_kafka_txn_per_second" in results:
        print(f"{'the gateway before':44} {'before':>14} {'ratio to Kafka':>15}")
        for label, figure, _target in rows:
            before, kafka = results[f"before_kafka_txn_{figure}"], results[f"apache_kafka_txn_{figure}"]
            print(f"{label:44} {before:>14,.1f} {before / kafka:>14.2f}x")


GatewayStarter = Callable[[], tuple[str, psutil.Process, Callable[[], None]]]


def measure(
    gateway: GatewayStarter,
    kafka: Callable[[Callable[[str, psutil.Process], dict[str, float]]], dict[str, float]],
    count: int,
    *,
    before: GatewayStarter | None = None,
) -> dict[str, Any]:
    """Both sides' figures: ``gateway()`` starts a gateway (its address, process and stop), and
    ``kafka(work)`` runs ``work(bootstrap, jvm)`` against an Apache Kafka node; ``before()``, if
    given, starts another gateway (an earlier adiskq), measured first as ``before_kafka_txn``."""
    results: dict[str, Any] = {}
    sides = [("before_kafka_txn", before), ("kafka_txn", gateway)] if before is not None else [("kafka_txn", gateway)]
    for name, start in sides:
        bootstrap, process, stop = start()
        try:
            print(f"{time.strftime('%H:%M:%S')} measuring {name} ...", file=sys.stderr, flush=True)
            results.update(transactions(bootstrap, "txn", count, process, name))
        finally:
            stop()
    print(f"{time.strftime('%H:%M:%S')} measuring apache_kafka_txn ...", file=sys.stderr, flush=True)
    results.update(
        kafka(
            lambda bootstrap, jvm: transactions(bootstrap, f"txn-{time.monotonic_ns()}", count, jvm, "apache_kafka_txn")
        )
    )
    return results
