"""Tags: a tag-filtered consumer against an unfiltered one that checks ``msg.tag`` in
Python, and what tags cost the producer. Both cores in the same run (the compiled one, then the
pure-Python reference with ``ADISKQ_NO_EXTENSIONS=1``, each in its own process).

Streams (built once per core, 100-byte values, 8-byte keys, one partition, 32 MiB segments):

* ``5%``: 20 tags taking turns; the consumer wants one (5% of the messages);
* ``1%``: 100 tags taking turns; the consumer wants one (1%);
* ``100%``: every message has the tag the consumer wants.

Reads: ``Consumer(end="close")`` from the first offset to the end, from a warm page cache;
``filtered`` is ``Consumer(tags={wanted})``, ``unfiltered`` iterates every message and counts
those with ``msg.tag == wanted``. Runs alternate; the figures are medians of ``--runs``, in
messages of the stream per second (so the two are compared on the same work to do).

Pushes: ``push_many`` of 1,000 records (with a tag each, or none) and single ``push`` (awaited one
at a time), runs alternating, medians; messages per second.

    python benchmarks/bench_tags.py                  # 1,000,000 messages a stream, 5 runs
    python benchmarks/bench_tags.py --quick          # seconds; tests/benchmarks/test_tags_bench.py
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import anyio

import adiskq

VALUE = b"v" * 100
TARGET_1PCT = 15.0  # filtered / unfiltered at 1%
TARGET_100PCT = 0.90  # filtered / unfiltered at 100%
TARGET_PUSH = 0.95  # with tags / without


def build(path: str, count: int, tag_of: Callable[[int], str]) -> None:
    async def run() -> None:
        async with adiskq.Producer(path) as producer:
            for start in range(0, count, 1000):
                await producer.push_many(
                    [
                        adiskq.Record(VALUE, key=b"k%07d" % (i % 100), tag=tag_of(i))
                        for i in range(start, min(count, start + 1000))
                    ]
                )

    anyio.run(run)


def read_filtered(path: str, wanted: str) -> int:
    async def run() -> int:
        seen = 0
        async with adiskq.Consumer(path, end="close", tags={wanted}) as consumer:
            async for _ in consumer:
                seen += 1
        return seen

    return anyio.run(run)


def read_unfiltered(path: str, wanted: str) -> int:
    async def run() -> int:
        seen = 0
        async with adiskq.Consumer(path, end="close") as consumer:
            async for message in consumer:
                if message.tag == wanted:
                    seen += 1
        return seen

    return anyio.run(run)


def timed(call: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def push_rate(path: str, count: int, *, tagged: bool, single: bool) -> float:
    tag = "order-created" if tagged else None

    async def run() -> None:
        async with adiskq.Producer(path) as producer:
            if single:
                for _ in range(count):
                    await producer.push(VALUE, key=b"k", tag=tag)
            else:
                batch = [adiskq.Record(VALUE, key=b"k", tag=tag) for _ in range(1000)]
                for _ in range(count // 1000):
                    await producer.push_many(batch)

    started = time.perf_counter()
    anyio.run(run)
    return count / (time.perf_counter() - started)


def worker(root: str, messages: int, runs: int) -> dict[str, object]:
    """The figures of one core (this process's)."""
    streams = {
        "5%": (lambda i: f"tag-{i % 20:02d}", "tag-03"),
        "1%": (lambda i: f"tag-{i % 100:03d}", "tag-042"),
        "100%": (lambda i: "tag-all", "tag-all"),
    }
    out: dict[str, object] = {"core": "compiled" if adiskq.compiled else "reference"}
    for name, (tag_of, wanted) in streams.items():
        path = os.path.join(root, f"stream-{name.rstrip('%')}")
        build(path, messages, tag_of)
        read_unfiltered(path, wanted)  # warm the page cache
        filtered, unfiltered = [], []
        for _ in range(runs):
            seconds, found = timed(functools.partial(read_filtered, path, wanted))
            filtered.append(messages / seconds)
            seconds, expected = timed(functools.partial(read_unfiltered, path, wanted))
            unfiltered.append(messages / seconds)
            assert found == expected, (found, expected)
        out[name] = {
            "filtered": statistics.median(filtered),
            "unfiltered": statistics.median(unfiltered),
            "matches": found,
        }
        shutil.rmtree(path)
    push_count = max(1000, messages // 10)
    for kind, single in (("push_many", False), ("push", True)):
        count = push_count // 10 if single else push_count
        rates: dict[bool, list[float]] = {True: [], False: []}
        for run in range(runs):
            for tagged in (run % 2 == 0, run % 2 == 1):
                path = os.path.join(root, f"push-{kind}-{tagged}-{run}")
                rates[tagged].append(push_rate(path, count, tagged=tagged, single=single))
                shutil.rmtree(path)
        out[kind] = {"tagged": statistics.median(rates[True]), "untagged": statistics.median(rates[False])}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a few seconds: 20,000 messages, 1 run")
    parser.add_argument("--dir", help="where to build the streams (default: a temporary folder)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.messages, args.runs = 20_000, 1
    root = tempfile.mkdtemp(prefix="bench-tags-", dir=args.dir)
    try:
        if args.worker:
            print(json.dumps(worker(root, args.messages, args.runs)))
            return
        results = []
        for disabled in ("", "1"):
            env = dict(os.environ, ADISKQ_NO_EXTENSIONS=disabled)
            command = [
                sys.executable,
                __file__,
                "--worker",
                "--messages",
                str(args.messages),
                "--runs",
                str(args.runs),
                "--dir",
                root,
            ]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{args.messages:,} messages a stream, medians of {args.runs} run(s); msg/s of the stream read")
    for result in results:
        print(f"\n{result['core']} core")
        print(f"  {'selectivity':<12}{'filtered':>14}{'unfiltered':>14}{'ratio':>9}  target")
        for name, target in (("5%", None), ("1%", TARGET_1PCT), ("100%", TARGET_100PCT)):
            row = result[name]
            ratio = row["filtered"] / row["unfiltered"]
            goal = "" if target is None else (f">= {target}x: " + ("met" if ratio >= target else "MISSED"))
            print(f"  {name:<12}{row['filtered']:>14,.0f}{row['unfiltered']:>14,.0f}{ratio:>8.2f}x  {goal}")
        for kind in ("push_many", "push"):
            row = result[kind]
            ratio = row["tagged"] / row["untagged"]
            verdict = "met" if ratio >= TARGET_PUSH else "MISSED"
            print(
                f"  {kind:<12}tagged {row['tagged']:>12,.0f}  untagged {row['untagged']:>12,.0f}  "
                f"{ratio:.3f}x  target >= {TARGET_PUSH}x: {verdict}"
            )


if __name__ == "__main__":
    main()
