"""Where a cross-process wake-up's time goes: bench_wakeup.py's adiskq run, with timestamps on the way.

The producer process logs when each ``os.write`` returns (the ``.data`` write, then the ``.index``
entry: the commit); the consumer process logs when the wait for the inotify descriptor returns, when
the events are read, and the reading of the index, the data and the decoding; then each message's
latency is cut into stages, on CLOCK_MONOTONIC like the stamp in the message:

    stamp → .index written     producer: push() to its writer, the .data and .index writes
    → woken                   kernel: inotify event, epoll, and the event loop calling the reading code
    → events read             reading and parsing the inotify events, waking the waiter (on Trio, a task
                              waiting alone takes its wake-up at once and reads them after: ~0)
    → read starts             the waiting task resumes, leaves the wait (its timer or deadline), reads
    → data read               the index entries and the data they cover (two pread)
    → decoded                 decoding and checking the records
    → delivered               back to ``async for``

The probes wrap functions from outside (nothing in adiskq knows), so they add a little time of their
own (~1 µs a probe). Messages that no inotify wake-up brought (found on the second look) are left out.

    python benchmarks/wakeup_breakdown.py [--backend asyncio|trio] [--producer-backend asyncio|trio] [--count 2000]
                                          [--cpus apart|same]

``--cpus`` pins the two processes as ``bench_wakeup.py --cpus`` does (apart: consumer on CPU 0,
producer on CPU 1; same: both on CPU 1): whether the woken consumer waits for the producer's CPU.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_wakeup  # noqa: E402
from compare.common import now_ns  # noqa: E402

INDEX_ENTRY_BYTES = 24  # the .index entry, written alone per push

STAGES = ("index written", "woken", "events read", "read starts", "data read", "decoded", "delivered")


def _logged(log: list[tuple[str, int]], name: str, function: Callable[..., Any], *, before: bool = False) -> Any:
    def probe(*args: Any, **kwargs: Any) -> Any:
        if before:
            log.append((name, now_ns()))
        result = function(*args, **kwargs)
        if not before:
            log.append((name, now_ns()))
        return result

    return probe


def produce(folder: str, count: int, backend: str) -> None:
    index_times: list[int] = []
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        written = real_write(fd, data)
        if len(data) == INDEX_ENTRY_BYTES:  # records are longer, buffered time-index writes too
            index_times.append(now_ns())
        return written

    os.write = write
    bench_wakeup.produce(f"adiskq-{backend}", folder, count)
    os.write = real_write
    with open(os.path.join(folder, "producer.json"), "w") as file:
        json.dump(index_times, file)


def consume(folder: str, count: int, backend: str) -> None:
    from adiskq._async import notify, wakeup
    from adiskq._storage import segment

    log: list[tuple[str, int]] = []
    dispatch = notify.Notifier.dispatch
    notify.Notifier.dispatch = _logged(log, "events read", _logged(log, "woken", dispatch, before=True))  # type: ignore[method-assign]
    # On Trio the only waiting task takes its wake-up and reads the events later, off the way
    take_wakeup = wakeup.Waiter.take_wakeup
    wakeup.Waiter.take_wakeup = _logged(log, "events read", _logged(log, "woken", take_wakeup, before=True))  # type: ignore[method-assign]
    segment.SegmentReader.read_index = _logged(log, "read starts", segment.SegmentReader.read_index, before=True)  # type: ignore[method-assign]
    segment.SegmentReader.read_span = _logged(log, "data read", segment.SegmentReader.read_span)  # type: ignore[method-assign]
    segment.decode_messages = _logged(log, "decoded", segment.decode_messages)
    real_latency_of = bench_wakeup.latency_of

    def latency_of(value: bytes) -> int:
        log.append(("delivered", now_ns()))
        log.append(("stamp", int.from_bytes(value[:8], "little", signed=True)))
        return real_latency_of(value)

    bench_wakeup.latency_of = latency_of
    bench_wakeup.consume(f"adiskq-{backend}", folder, count)
    with open(os.path.join(folder, "consumer.json"), "w") as file:
        json.dump(log, file)


def stages(index_times: list[int], log: list[tuple[str, int]]) -> list[list[int]]:
    """Per message brought by a wake-up: the ns spent in each stage."""
    rows = []
    current: dict[str, int] = {}
    delivered = 0
    for name, t in log:
        if name == "stamp":
            n = delivered
            delivered += 1
            if n < len(index_times) and all(s in current for s in STAGES[1:]):
                marks = [t, index_times[n], *(current[s] for s in STAGES[1:])]
                if marks == sorted(marks):
                    rows.append([b - a for a, b in itertools.pairwise(marks)])
            current = {}
        elif name == "woken":
            current = {name: t}  # what happened before the wake-up was the look before sleeping
        elif name == "read starts":
            current.setdefault(name, t)  # the first read after the wake
        else:
            current[name] = t
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    parser.add_argument(
        "--producer-backend",
        choices=("asyncio", "trio"),
        help="the producer process's event loop, when not --backend's (which side's loop costs what)",
    )
    parser.add_argument("--count", type=int, default=2_000)
    parser.add_argument("--cpus", choices=sorted(bench_wakeup.PLACEMENTS), help="pin the consumer and the producer")
    parser.add_argument("--role", nargs=2, metavar=("ROLE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        role, folder = args.role
        if args.cpus is not None:
            consumer_cpu, producer_cpu = bench_wakeup.PLACEMENTS[args.cpus]
            os.sched_setaffinity(0, {consumer_cpu if role == "consume" else producer_cpu})
        (produce if role == "produce" else consume)(folder, args.count, args.backend)
        return 0
    folder = tempfile.mkdtemp(prefix="adiskq-breakdown-")
    try:
        bench_wakeup.prepare("adiskq-" + args.backend, folder)
        me = os.path.abspath(__file__)
        pinned = [] if args.cpus is None else ["--cpus", args.cpus]
        common = ["--backend", args.backend, "--count", str(args.count), *pinned]
        consumer = subprocess.Popen([sys.executable, me, *common, "--role", "consume", folder])
        producing = ["--backend", args.producer_backend or args.backend, "--count", str(args.count), *pinned]
        producer = subprocess.Popen([sys.executable, me, *producing, "--role", "produce", folder])
        try:
            if consumer.wait(timeout=120) != 0 or producer.wait(timeout=60) != 0:
                raise RuntimeError("the producer or the consumer process failed")
        finally:
            for child in (consumer, producer):  # a run that failed or hung leaves no process behind
                if child.poll() is None:
                    child.kill()
                    child.wait()
        with open(os.path.join(folder, "producer.json")) as file:
            index_times: list[int] = json.load(file)
        with open(os.path.join(folder, "consumer.json")) as file:
            log = [tuple(entry) for entry in json.load(file)]
        rows = stages(index_times, log)[bench_wakeup.WARMUP :]  # type: ignore[arg-type]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    producing = f" (producer on {args.producer_backend})" if args.producer_backend else ""
    print(f"adiskq {args.backend}{producing}: {len(rows)} of {args.count} messages came by an inotify wake-up; µs:")
    if not rows:
        return 1
    print(f"  {'stage':<16} {'p50':>7} {'p90':>7}")
    totals = [sum(row) for row in rows]
    for i, name in enumerate(STAGES):
        column = sorted(row[i] for row in rows)
        print(f"  {'→ ' + name:<16} {statistics.median(column) / 1e3:7.1f} {column[int(len(column) * 0.9)] / 1e3:7.1f}")
    totals.sort()
    print(f"  {'total':<16} {statistics.median(totals) / 1e3:7.1f} {totals[int(len(totals) * 0.9)] / 1e3:7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
