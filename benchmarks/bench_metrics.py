"""What OpenTelemetry metrics cost a producer and a consumer group, and that they cost nothing when unused.

    python benchmarks/bench_metrics.py            # 9 rounds of 50,000 messages per mode, asyncio
    python benchmarks/bench_metrics.py --quick    # 1 round of 2,000: for the test that keeps this working
    python benchmarks/bench_metrics.py --baseline /tmp/old   # also "before": adiskq as checked out there

Each mode runs in a process of its own (OpenTelemetry's providers are global to a process), the
modes taking turns in a shuffled order round after round, so every ratio compares runs of the same
machine state:

- missing: as if opentelemetry-api were not installed (``sys.modules["opentelemetry"] = None``): the
           baseline, adiskq's code paths as they are without metrics;
- unset:   installed, but no meter or tracer provider set (FastAPI installs the API, for one): nothing
           is wrapped, so this must be as fast as missing (ratio >= 0.97);
- off:     the SDK's meter provider set, but ADISKQ_METRICS=off: nothing is wrapped either;
- metrics: the SDK's meter provider with an in-memory reader: every push, push_many and flush is
           counted and timed, every delivery counted;
- traces:  metrics, and the SDK's tracer provider (sampling everything, no exporter): each push also
           starts a span and writes its traceparent header;
- before:  with ``--baseline PATH``, the adiskq package found in PATH (an older checkout, built) run as
           ``missing``: the ratios are then to it, so ``missing`` says whether this code, without
           metrics, is as fast as the code before them.

Per mode: single pushes (async flush, one key), then a named group reading them all (commit per batch).
Both are timed in CPU seconds of the event loop's thread (``time.thread_time``), where all of that
work runs (the flusher's fsync is another thread's): on a machine shared with other work, wall-clock
rates swing by tens of percent between identical runs, CPU time far less.
Figures are the best round of each mode (the one least disturbed by the rest of the machine), in
messages a second, with the ratio to ``missing``; the median is shown beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile

MODES = ("missing", "unset", "off", "metrics", "traces")

RUN = """
import json, os, sys, time
mode, path, count, backend = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if mode == "missing":
    sys.modules["opentelemetry"] = None
if mode in ("off", "metrics", "traces"):
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
if mode == "traces":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
import anyio, adiskq

async def main():
    async with adiskq.Producer(path) as producer:
        push = producer.push
        value = b"x" * 100
        started = time.thread_time()
        for _ in range(count):
            await push(value, key="k")
        pushed = time.thread_time() - started
    async with adiskq.ConsumerGroup(path, "bench", end="close") as group:
        started = time.thread_time()
        seen = 0
        async for batch in group.batches():
            seen += len(batch)
            group.commit(batch[-1])
        consumed = time.thread_time() - started
    assert seen == count, seen
    wrapped = "push" in vars(producer)
    print(json.dumps({"push": count / pushed, "consume": count / consumed, "wrapped": wrapped, "from": adiskq.__file__}))

anyio.run(main, backend=backend)
"""


def run(mode: str, folder: str, count: int, backend: str, baseline: str | None) -> dict[str, float]:
    path = os.path.join(folder, f"stream-{mode}")
    env = {**os.environ, "ADISKQ_METRICS": "off" if mode == "off" else "on"}
    if mode == "before":
        assert baseline is not None
        env["PYTHONPATH"] = baseline
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN, "missing" if mode == "before" else mode, path, str(count), backend],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            cwd=folder,  # not this checkout's folder, which python -c would put first on sys.path
        )
    finally:
        shutil.rmtree(path, ignore_errors=True)
    result: dict[str, float] = json.loads(done.stdout)
    if mode == "before":
        assert baseline is not None
        assert str(result.pop("from")).startswith(os.path.abspath(baseline)), "the baseline's adiskq did not run"
    else:
        result.pop("from")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 round of 2,000 messages")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    parser.add_argument("--dir", default=None, help="where the streams are made (default: a temporary folder)")
    parser.add_argument("--baseline", default=None, help="a folder holding an older, built adiskq package to run too")
    parser.add_argument("--modes", default=",".join(MODES), help="the modes to run, comma-separated (default: all)")
    args = parser.parse_args()
    rounds, count = (1, 2_000) if args.quick else (args.rounds, args.messages)
    if rounds < 1 or count < 1:
        parser.error("--rounds and --messages take 1 or more")
    folder = tempfile.mkdtemp(prefix="adiskq-bench-metrics-", dir=args.dir)
    chosen = tuple(args.modes.split(","))
    if not set(chosen) <= set(MODES) or "missing" not in chosen:
        parser.error(f"--modes takes some of {', '.join(MODES)}, missing among them")
    modes = chosen if args.baseline is None else ("before", *chosen)
    reference = "missing" if args.baseline is None else "before"
    figures: dict[str, dict[str, list[float]]] = {mode: {"push": [], "consume": []} for mode in modes}
    wrapped: dict[str, bool] = {}
    try:
        for _ in range(rounds):
            for mode in random.sample(modes, len(modes)):
                result = run(mode, folder, count, args.backend, args.baseline)
                figures[mode]["push"].append(result["push"])
                figures[mode]["consume"].append(result["consume"])
                wrapped[mode] = bool(result["wrapped"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"{count:,} messages of 100 bytes, {rounds} rounds, {args.backend}; "
        f"best round in messages per CPU second of the loop thread, its ratio to {reference}'s best (median ratio)"
    )
    base = {kind: max(figures[reference][kind]) for kind in ("push", "consume")}
    base_median = {kind: statistics.median(figures[reference][kind]) for kind in ("push", "consume")}
    for mode in modes:
        cells = []
        for kind in ("push", "consume"):
            rate = max(figures[mode][kind])
            median = statistics.median(figures[mode][kind]) / base_median[kind]
            cells.append(f"{kind} {rate:>10,.0f}/s {rate / base[kind]:5.2f}x ({median:4.2f}x)")
        print(f"{mode:<8} {'  '.join(cells)}  {'wrapped' if wrapped[mode] else 'not wrapped'}")


if __name__ == "__main__":
    main()
