"""What the disk-usage check (``refuse_writes_above``) costs a producer: pushes with it and without.

Workloads as ``bench_producer.py`` (100-byte values, 12-byte keys, 4 partitions, flush="async"):
``single`` (one task awaiting every ``push``) and ``batch`` (``push_many`` of 1,000), each on
asyncio and Trio. In every round the producer with the check on (the default, 0.95) and the one
with it off (``refuse_writes_above=None``) run back to back, in alternating order; the figure is the
median of the rounds' paired ratios, so a machine that speeds up or slows down during the run
moves both sides alike.

    python benchmarks/bench_disk_guard.py              # 9 rounds
    python benchmarks/bench_disk_guard.py --quick      # a few thousand messages, for the test suite
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time

import anyio

import adiskq

VALUE = b"v" * 100
KEYS = [f"customer-{i:03d}" for i in range(1000)]  # 12 bytes each
LEVELS: dict[str, float | None] = {"on": 0.95, "off": None}


async def single(path: str, count: int, level: float | None) -> float:
    async with adiskq.Producer(path, partitions=4, refuse_writes_above=level) as producer:
        push = producer.push
        started = time.perf_counter()
        for i in range(count):
            await push(VALUE, key=KEYS[i % 1000])
        return count / (time.perf_counter() - started)


async def batch(path: str, count: int, level: float | None) -> float:
    records = [adiskq.Record(VALUE, key=KEYS[i % 1000]) for i in range(1000)]
    async with adiskq.Producer(path, partitions=4, refuse_writes_above=level) as producer:
        started = time.perf_counter()
        for _ in range(count // 1000):
            await producer.push_many(records)
        return (count // 1000 * 1000) / (time.perf_counter() - started)


WORKLOADS = {"single": single, "batch": batch}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts, two rounds: checks the script works")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", default=None, help="where to put the streams (default: a temp folder)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds: give at least 1")
    rounds = 2 if args.quick else args.rounds
    counts = {"single": 2_000, "batch": 10_000} if args.quick else {"single": 200_000, "batch": 1_000_000}
    mode = "quick" if args.quick else f"{rounds} rounds"
    print(f"adiskq disk-usage check cost ({mode}; Python {sys.version.split()[0]})")
    print(f"{'workload':8} {'backend':8} {'check on msg/s':>15} {'off msg/s':>12} {'on/off':>8}")
    for workload, run in WORKLOADS.items():
        for backend in ("asyncio", "trio"):
            rates: dict[str, list[float]] = {"on": [], "off": []}
            for number in range(rounds):
                order = ("on", "off") if number % 2 == 0 else ("off", "on")
                for side in order:
                    root = tempfile.mkdtemp(prefix="adiskq-guard-", dir=args.dir)
                    try:
                        rate = anyio.run(run, f"{root}/stream", counts[workload], LEVELS[side], backend=backend)
                    finally:
                        shutil.rmtree(root)
                    rates[side].append(rate)
            ratios = [on / off for on, off in zip(rates["on"], rates["off"], strict=True)]
            print(
                f"{workload:8} {backend:8} {statistics.median(rates['on']):>15,.0f} "
                f"{statistics.median(rates['off']):>12,.0f} {statistics.median(ratios):>8.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
