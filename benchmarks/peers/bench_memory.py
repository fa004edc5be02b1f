"""Peak memory of W1's process (target: "≤ SQLite + 3 MiB"), and where it goes.

Each figure is the peak resident memory (VmHWM) of a fresh process, medians of ``--runs``:

* W1 itself (one task, ``await push(value, key=k)`` for ``--count`` messages, opening and closing
  counted; ``compare/worker.py`` (beside this file), as ``bench_compare.py --keyed`` runs it): adiskq on asyncio and on
  Trio, SQLite WAL autocommit as a script runs it (no event loop), and the same SQLite workload in a
  process that has imported asyncio (or Trio) first, as the FastAPI, asyncio or Trio service adiskq is
  for has;
* imports alone: the interpreter, ``anyio`` (every worker has it), ``ssl`` (OpenSSL: asyncio, anyio's
  asyncio backend and Trio each import it), ``asyncio``, ``trio``, ``adiskq`` (the event loop comes
  with ``anyio.run``).

    python benchmarks/peers/bench_memory.py               # 192,000 messages, 5 runs
    python benchmarks/peers/bench_memory.py --quick       # seconds; tests/benchmarks/test_memory_bench.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_MIB = 3.0  # adiskq's W1 process at most this much above SQLite's
# name -> (peer in compare/worker.py, extra environment)
W1_PROCESSES: dict[str, tuple[str, dict[str, str]]] = {
    "adiskq (asyncio)": ("adiskq", {}),
    "adiskq (Trio)": ("adiskq", {"ADISKQ_BENCH_BACKEND": "trio"}),
    "SQLite WAL": ("sqlite-wal", {}),
    "SQLite WAL, asyncio imported": ("sqlite-wal", {"ADISKQ_BENCH_PRELOAD": "asyncio"}),
    "SQLite WAL, trio imported": ("sqlite-wal", {"ADISKQ_BENCH_PRELOAD": "trio"}),
}
# Each adiskq process beside SQLite in a plain script, and beside SQLite in a process that has
# imported the same event loop (what a service on that loop has loaded whatever it stores in).
BASELINES = {
    "adiskq (asyncio)": ("SQLite WAL", "SQLite WAL, asyncio imported"),
    "adiskq (Trio)": ("SQLite WAL", "SQLite WAL, trio imported"),
}
IMPORTS = {
    "python": "pass",
    "import anyio": "import anyio",
    "import ssl": "import ssl",  # asyncio, anyio's asyncio backend and Trio each import it
    "import asyncio": "import asyncio",
    "import asyncio, anyio": "import asyncio, anyio",
    "import trio": "import trio",
    "import adiskq": "import adiskq",
    "import adiskq, asyncio": "import adiskq, asyncio",
}
_PEAK = "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"


def mib(kib: float) -> float:
    return kib / 1024


def w1_peak(peer: str, extra: dict[str, str], count: int) -> float:
    """Peak RSS (MiB) of a worker process running W1 for ``peer``."""
    folder = tempfile.mkdtemp(prefix="adiskq-memory-")
    try:
        env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)
        done = subprocess.run(
            [sys.executable, "-m", "compare.worker", peer, "single_keyed", str(count), folder],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])["rss_peak_bytes"] / 2**20
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def import_peak(code: str) -> float:
    """Peak RSS (MiB) of a process that runs ``code`` and nothing else."""
    done = subprocess.run([sys.executable, "-c", f"{code}\n{_PEAK}"], capture_output=True, text=True, check=True)
    return mib(int(done.stdout.strip()))


def measure(count: int, runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in [*W1_PROCESSES, *IMPORTS]}
    for _ in range(runs):  # interleaved, so a change in the machine's state touches every column
        for name, (peer, extra) in W1_PROCESSES.items():
            samples[name].append(w1_peak(peer, extra, count))
        for name, code in IMPORTS.items():
            samples[name].append(import_peak(code))
    return {name: statistics.median(values) for name, values in samples.items()}


def report(figures: dict[str, float], count: int, runs: int) -> str:
    lines = [f"W1 ({count:,} pushes, each process fresh), peak RSS, medians of {runs}:"]
    lines.extend(f"  {name:32s} {figures[name]:6.1f} MiB" for name in W1_PROCESSES)
    for name, baselines in BASELINES.items():
        for baseline in baselines:
            over = figures[name] - figures[baseline]
            verdict = "met" if over <= TARGET_MIB else "missed"
            lines.append(f"  {name} − {baseline}: {over:+.1f} MiB (target ≤ +{TARGET_MIB:g}: {verdict})")
    lines.append("imports alone, peak RSS:")
    lines.extend(
        f"  {name:32s} {figures[name]:6.1f} MiB  ({figures[name] - figures['python']:+.1f})" for name in IMPORTS
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=192_000, help="W1's pushes (default 192,000, as bench_compare)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2,000 pushes, one run")
    parser.add_argument("--json", help="also write the medians here")
    args = parser.parse_args(argv)
    count, runs = (2_000, 1) if args.quick else (args.count, args.runs)
    figures = measure(count, runs)
    print(report(figures, count, runs))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"count": count, "runs": runs, "peak_rss_mib": figures}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
