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
                                          [--cpus apart|same] [--calls]

``--cpus`` pins the two processes as ``bench_wakeup.py --cpus`` does (apart: consumer on CPU 0,
producer on CPU 1; same: both on CPU 1): whether the woken consumer waits for the producer's CPU.

``--calls`` times nothing: it counts the consumer's function calls (Python and built-in, under
``sys.setprofile``) from the return of the event loop's ``epoll`` wait that follows the waiter's
arming to the message's delivery, per message, by whose code they are: adiskq's, the event loop's
(asyncio, Trio, anyio, selectors), built-ins. Unlike the times, the counts do not move with the
machine's load: a change to the wake-up's way shows in them on a busy machine too.
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
from peers.compare.common import now_ns  # noqa: E402

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
    from adiskq._storage import segment_reader

    log: list[tuple[str, int]] = []
    dispatch = notify.Notifier.dispatch
    notify.Notifier.dispatch = _logged(log, "events read", _logged(log, "woken", dispatch, before=True))  # type: ignore[method-assign]
    # On Trio the only waiting task takes its wake-up and reads the events later, off the way
    take_wakeup = wakeup.Waiter.take_wakeup
    wakeup.Waiter.take_wakeup = _logged(log, "events read", _logged(log, "woken", take_wakeup, before=True))  # type: ignore[method-assign]
    segment_reader.SegmentReader.read_index = _logged(
        log, "read starts", segment_reader.SegmentReader.read_index, before=True
    )  # type: ignore[method-assign]
    segment_reader.SegmentReader.read_span = _logged(log, "data read", segment_reader.SegmentReader.read_span)  # type: ignore[method-assign]
    segment_reader.decode_messages = _logged(log, "decoded", segment_reader.decode_messages)
    real_latency_of = bench_wakeup.latency_of

    def latency_of(value: bytes) -> int:
        log.append(("delivered", now_ns()))
        log.append(("stamp", int.from_bytes(value[:8], "little", signed=True)))
        return real_latency_of(value)

    bench_wakeup.latency_of = latency_of
    bench_wakeup.consume(f"adiskq-{backend}", folder, count)
    with open(os.path.join(folder, "consumer.json"), "w") as file:
        json.dump(log, file)


CALL_GROUPS = ("adiskq", "event-loop", "built-in", "total")


def _group_of(filename: str) -> str:
    return "adiskq" if f"{os.sep}adiskq{os.sep}" in filename else "event-loop"


def count_calls(folder: str, count: int, backend: str) -> None:
    """The consumer, counting its calls from the epoll return after each arming to each delivery."""
    from adiskq._async import wakeup

    arm_code = wakeup.Waiter.arm.__code__
    delivered_code = bench_wakeup.latency_of.__code__
    armed = counting = False
    current = dict.fromkeys(CALL_GROUPS, 0)
    per_message: list[dict[str, int]] = []
    delivered = 0  # messages handed over so far: the first WARMUP are left out, woken or not

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal armed, counting, current, delivered
        if event == "call":
            code = frame.f_code
            if code is arm_code:
                armed, counting = True, False
            elif code is delivered_code:
                if counting and delivered >= bench_wakeup.WARMUP:
                    per_message.append(current)
                delivered += 1
                armed = counting = False
            elif counting:
                current[_group_of(code.co_filename)] += 1
                current["total"] += 1
        elif event == "c_call" and counting:
            current["built-in"] += 1
            current["total"] += 1
        elif event == "c_return" and armed and getattr(arg, "__name__", "") == "poll":  # the loop's epoll wait
            armed, counting = False, True
            current = dict.fromkeys(CALL_GROUPS, 0)

    sys.setprofile(profile)
    try:
        bench_wakeup.consume(f"adiskq-{backend}", folder, count)
    finally:
        sys.setprofile(None)
    with open(os.path.join(folder, "calls.json"), "w") as file:
        json.dump(per_message, file)


def print_calls(backend: str, per_message: list[dict[str, int]]) -> int:
    print(f"adiskq {backend}: calls from the epoll return to the message, {len(per_message)} messages woken:")
    if not per_message:
        return 1
    print(f"  {'by':<12} {'median':>7} {'min':>5}")
    for group in CALL_GROUPS:
        column = [calls[group] for calls in per_message]
        print(f"  {group:<12} {statistics.median(column):7.0f} {min(column):5d}")
    return 0


def stages(index_times: list[int], log: list[tuple[str, int]], warmup: int = 0) -> list[list[int]]:
    """Per message brought by a wake-up, from message ``warmup`` on: the ns spent in each stage.

    The warm-up is counted in messages, not in wake-ups: on a busy machine most messages are found
    by the look before sleeping, and the first ``warmup`` wake-ups may come from anywhere in the run.
    """
    rows = []
    current: dict[str, int] = {}
    delivered = 0
    for name, t in log:
        if name == "stamp":
            n = delivered
            delivered += 1
            if warmup <= n < len(index_times) and all(s in current for s in STAGES[1:]):
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
    parser.add_argument("--calls", action="store_true", help="count the consumer's calls on the way instead of timing")
    parser.add_argument("--role", nargs=2, metavar=("ROLE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        role, folder = args.role
        if args.cpus is not None:
            consumer_cpu, producer_cpu = bench_wakeup.PLACEMENTS[args.cpus]
            os.sched_setaffinity(0, {consumer_cpu if role == "consume" else producer_cpu})
        if role == "produce":
            produce(folder, args.count, args.backend)
        else:
            (count_calls if args.calls else consume)(folder, args.count, args.backend)
        return 0
    folder = tempfile.mkdtemp(prefix="adiskq-breakdown-")
    try:
        bench_wakeup.prepare("adiskq-" + args.backend, folder)
        me = os.path.abspath(__file__)
        pinned = [] if args.cpus is None else ["--cpus", args.cpus]
        common = ["--backend", args.backend, "--count", str(args.count), *pinned, *(["--calls"] if args.calls else [])]
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
        if args.calls:
            with open(os.path.join(folder, "calls.json")) as file:
                per_message: list[dict[str, int]] = json.load(file)
            return print_calls(args.backend, per_message)
        with open(os.path.join(folder, "producer.json")) as file:
            index_times: list[int] = json.load(file)
        with open(os.path.join(folder, "consumer.json")) as file:
            log = [tuple(entry) for entry in json.load(file)]
        rows = stages(index_times, log, bench_wakeup.WARMUP)  # type: ignore[arg-type]
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
