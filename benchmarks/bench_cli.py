"""The command line's start-up time and read/check throughput, beside what bounds them, in one run.

Start-up (median wall and CPU time of whole processes):

* ``python -c pass``: the interpreter alone, the floor;
* ``adiskq --help``: the command line as shipped (rich imported only by commands that draw);
* ``adiskq --help``, rich eager: the same with rich's console, table and progress imported up front,
  what importing rich at start-up would cost.

Throughput (messages a second, median): ``adiskq read --format value`` and ``--format json`` to
/dev/null and ``adiskq check``, beside ``cat`` of a file holding the same values one per line (the
floor for moving those bytes through a process).

    python benchmarks/bench_cli.py            # full run: 20 start-ups, 200,000 messages, medians of 5
    python benchmarks/bench_cli.py --quick    # a few start-ups and 2,000 messages, for the test suite
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import anyio

import adiskq

EAGER_RICH = (
    "import rich.console, rich.table, rich.progress, rich.text; import sys; from adiskq.cli import main; "
    "sys.argv = ['adiskq', '--help']; main()"
)


# As a user runs it: bytecode is cached (a session with PYTHONDONTWRITEBYTECODE=1 would compile
# adiskq's sources on every start and measure the compiler instead).
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def wall(command: list[str], runs: int) -> float:
    """Median seconds of running ``command`` to completion (after one warm-up run), output discarded."""
    return statistics.median(_timed(command, runs)[0])


def cpu(command: list[str], runs: int) -> float:
    """Median CPU seconds (user + system) ``command`` takes: steadier than wall time on a busy machine."""
    return statistics.median(_timed(command, runs)[1])


def _timed(command: list[str], runs: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def make_stream(path: str, count: int) -> str:
    """A 3-partition stream of ``count`` 100-byte messages, and a text file of the same values."""
    values = [b"%099d" % i for i in range(count)]

    async def fill() -> None:
        async with adiskq.Producer(path, partitions=3) as producer:
            for start in range(0, count, 1000):
                await producer.push_many([adiskq.Record(v, key=b"k%d" % (i % 30)) for i, v in
                                          enumerate(values[start : start + 1000])])  # fmt: skip

    anyio.run(fill)
    text = path + ".txt"
    with open(text, "wb") as file:
        file.write(b"".join(v + b"\n" for v in values))
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the test suite")
    args = parser.parse_args()
    startups, count, repeats = (3, 2_000, 1) if args.quick else (20, 200_000, 5)
    adiskq_cli = [sys.executable, "-m", "adiskq"]

    print(f"start-up (median of {startups}; wall time, and CPU time, which a busy machine disturbs less):")
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("adiskq --help", [*adiskq_cli, "--help"]),
        ("adiskq --help, rich eager", [sys.executable, "-c", EAGER_RICH]),
    ]
    measured = {}
    for name, command in rows:
        walls, cpus = _timed(command, startups)
        measured[name] = statistics.median(cpus)
        print(f"  {name:27s} {statistics.median(walls) * 1000:7.1f} ms wall {measured[name] * 1000:7.1f} ms CPU")
    shipped, eager = measured["adiskq --help"], measured["adiskq --help, rich eager"]
    print(f"  rich eager costs {(eager - shipped) * 1000:+.1f} ms CPU (x{eager / shipped:.2f})")

    root = tempfile.mkdtemp(prefix="bench-cli-")
    try:
        path = os.path.join(root, "stream")
        text = make_stream(path, count)
        rates = {
            "cat (floor)": count / wall(["cat", text], repeats),
            "adiskq read --format value": count / wall([*adiskq_cli, "read", path, "--format", "value"], repeats),
            "adiskq read --format json": count / wall([*adiskq_cli, "read", path, "--format", "json"], repeats),
            "adiskq check": count / wall([*adiskq_cli, "check", path], repeats),
        }
    finally:
        shutil.rmtree(root)
    floor_rate = rates["cat (floor)"]
    print(f"throughput, {count:,} messages of 100 bytes (median of {repeats}, whole processes):")
    for name, rate in rates.items():
        print(f"  {name:28s} {rate:12,.0f} msg/s   (x{rate / floor_rate:.3f} of cat)")


if __name__ == "__main__":
    main()
