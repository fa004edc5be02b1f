"""adiskq beside SQLite (WAL), Redis Streams, persist-queue and litequeue, in one run on one machine.

Workloads, 100-byte values, each (peer, workload, run) in a fresh process (``compare/worker.py``):

* ``single``: one producer awaiting each message (fast settings: adiskq ``flush="async"``, SQLite
  ``synchronous=NORMAL``, Redis ``appendfsync everysec``);
* ``batch``: batches of 1,000 (``push_many``, ``executemany`` in one transaction, a Redis pipeline);
* ``durable32``: 32 concurrent producers, each message acknowledged only after fsync (adiskq
  ``flush="sync"``, SQLite ``synchronous=FULL``, Redis ``appendfsync always``);
* ``read``: everything read back in order, a page of 1,000 at a time where the peer has pages;
* ``latency``: push → consumer latency across two processes, one message a millisecond;
* plus the peak memory (RSS; Redis adds its server's) and the bytes on disk per message, both of the
  ``batch`` workload.

Prints a table of medians with each peer's ratio to adiskq, writes ``compare.json`` and the chart
``compare.png`` beside this file and rewrites the comparison section of ``benchmarks/RESULTS.md``
between its markers; with --out, all three go to that folder instead.

and the distinct-key workloads, every message with its own 12-byte key and its key and value (and
for ``push_many`` its ``Record``) built inside the timed loop, opening and closing of the producer or
consumer counted in the timed span (adiskq, SQLite WAL and Redis Streams only), at the counts below:

* ``single_keyed`` (W1, 50,000): one task, ``await push(value, key=k)`` each, against SQLite
  autocommit INSERTs and Redis XADDs with the key as a field;
* ``batch_keyed`` (W2, 200,000): ``push_many`` of 1,000 Records, against ``executemany`` in one
  transaction and a Redis pipeline;
* ``durable32_keyed`` (W3, 10,000): 32 tasks, ``flush="sync"``, against SQLite ``FULL`` and Redis
  ``always``;
* ``read_keyed`` (W4, 50,000) and ``read_keyed_long`` (500,000; not Redis): ``async for message in
  consumer``, one message at a time, against one SQLite cursor over the table;
  ``read_keyed_batches`` (50,000): adiskq's ``batches()`` over the same log;
* ``latency_keyed`` (W5): as ``latency`` at 2,000 messages a second, SQLite polling every 100 µs;
* the peak memory of W1's process and the bytes on disk per message of W2's log.

The keyed table shows each adiskq core's ratio to the best peer and whether it meets its target.
``adiskq-trio`` is the compiled core on Trio, ``adiskq-py`` adiskq run with ``ADISKQ_NO_EXTENSIONS=1``
(the pure-Python core).

go-diskq (github.com/wcharczuk/go-diskq, the Go library adiskq's layout comes from) runs W1, W4 and
W5 (``single_keyed``, ``read_keyed``, ``read_keyed_long``, ``latency_keyed``) through our small Go
program ``compare/godiskq/main.go``, which the script builds into .cache/ with ``go`` from a checkout
of go-diskq named by ``--go-diskq-src PATH`` (or ADISKQ_GO_DISKQ_SRC). Go's module proxy refuses the
module (403, "not available"), so neither CI nor a plain run can fetch it: without a checkout the
script says which workloads it left go-diskq out of, and runs the rest. With it, a third table gives
each adiskq core's ratio to go-diskq, run by run: its median and its spread.

    python benchmarks/peers/bench_compare.py                  # everything: medians of 5 (keyless), 3 (keyed)
    python benchmarks/peers/bench_compare.py --keyed          # the distinct-key table alone, medians of 3
    git clone https://github.com/wcharczuk/go-diskq /tmp/go-diskq
    python benchmarks/peers/bench_compare.py --keyed --go-diskq-src /tmp/go-diskq   # with go-diskq
    python benchmarks/peers/bench_compare.py --quick --out /tmp/cmp   # seconds: checks that it all works
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from compare.godiskq_peer import BINARY_VARIABLE as GO_DISKQ_BINARY_VARIABLE  # noqa: E402
from compare.worker import KEYED_WORKLOADS, KEYLESS_WORKLOADS, PEER_ENVIRONMENT, PEERS, WORKLOADS, runs_workload  # noqa: E402

# Messages per run. The slow peers get fewer so that a run takes seconds, not minutes; rates are per
# second, so counts differ without skewing them. Counts are multiples of 1,000 and of 32.
COUNTS: dict[str, dict[str, int]] = {
    "single": {"*": 96_000, "adiskq": 192_000, "redis-streams": 32_000, "persist-queue": 2_000},
    "batch": {"*": 512_000, "persist-queue": 2_000},
    "durable32": {"*": 6_400, "adiskq": 64_000, "redis-streams": 9_600, "persist-queue": 3_200},
    "read": {"*": 512_000, "redis-streams": 128_000, "persist-queue": 5_000, "litequeue": 10_000},
    "latency": {"*": 2_000},
    # The keyed workloads: the same count for every peer (the table's rows name them), opening and
    # closing included, so a count is part of what a row measures.
    "single_keyed": {"*": 50_000},
    "batch_keyed": {"*": 200_000},
    "durable32_keyed": {"*": 10_000},
    "read_keyed": {"*": 50_000},
    "read_keyed_long": {"*": 500_000},
    "read_keyed_batches": {"*": 50_000},
    "latency_keyed": {"*": 4_000},  # two seconds at 2,000 messages a second
}
QUICK_COUNTS: dict[str, dict[str, int]] = {
    "single": {"*": 2_000, "persist-queue": 200},
    "batch": {"*": 10_000, "persist-queue": 1_000},
    "durable32": {"*": 640, "adiskq": 3_200},
    "read": {"*": 10_000, "persist-queue": 1_000, "litequeue": 2_000},
    "latency": {"*": 100},
    "single_keyed": {"*": 2_000},
    "batch_keyed": {"*": 10_000},
    "durable32_keyed": {"*": 640, "adiskq": 3_200, "adiskq-trio": 3_200, "adiskq-py": 3_200},
    "read_keyed": {"*": 10_000},
    "read_keyed_long": {"*": 20_000},
    "read_keyed_batches": {"*": 10_000},
    "latency_keyed": {"*": 100},
}
KEYED_RUNS = 3  # default runs of the keyed workloads (the keyless ones: --runs, default 5)
KEYED_PEERS = ("adiskq", "adiskq-trio", "adiskq-py", "sqlite-wal", "redis-streams", "go-diskq")
GO_DISKQ = "go-diskq"
GO_DISKQ_SRC_VARIABLE = "ADISKQ_GO_DISKQ_SRC"
GO_DISKQ_PROGRAM = os.path.join(HERE, "compare", "godiskq")  # our Go program on go-diskq's API
GO_DISKQ_BUILD = os.path.join(os.path.dirname(BENCHMARKS), ".cache", "go-diskq-peer")
GO_DISKQ_MODULE = "github.com/wcharczuk/go-diskq"
GO_DISKQ_URL = "https://github.com/wcharczuk/go-diskq"
# The keyed rows go-diskq has a figure for: its table of adiskq ÷ go-diskq.
GO_DISKQ_METRICS = (
    "single_keyed",
    "read_keyed",
    "read_keyed_long",
    "latency_keyed_p50_us",
    "latency_keyed_p99_us",
    "rss_single_keyed_mib",
)
ADISKQ_CORES = ("adiskq", "adiskq-trio", "adiskq-py")  # adiskq-trio: the compiled core on Trio

# (key, label, higher is better)
METRICS: list[tuple[str, str, bool]] = [
    ("single", "single producer, msg/s", True),
    ("batch", "batch produce, msg/s", True),
    ("durable32", "32 producers, fsync each, msg/s", True),
    ("read", "read back in order, msg/s", True),
    ("latency_p50_us", "push → consumer p50, µs", False),
    ("latency_p90_us", "push → consumer p90, µs", False),
    ("latency_p99_us", "push → consumer p99, µs", False),
    ("rss_peak_mib", "peak memory (batch), MiB", False),
    ("disk_bytes_per_message", "disk per message (batch), bytes", False),
]


@dataclasses.dataclass(frozen=True)
class Target:
    """The goal for one keyed metric: adiskq's figure against ``peer``'s.

    ``kind`` "≥" and "≤" bound the ratio adiskq / peer; "+≤" bounds the difference adiskq − peer.
    """

    peer: str
    kind: str
    bound: float
    peer_metric: str | None = None  # the peer's metric when it is not the row's own

    def describe(self) -> str:
        if self.kind == "+≤":
            return f"≤ {self.peer} + {self.bound:g}"
        return f"{self.kind} {self.bound:g}× {self.peer}"


@dataclasses.dataclass(frozen=True)
class KeyedMetric:
    """One row of the distinct-key table.

    ``label`` may name ``{count}``, the messages of ``workload`` (the same for every peer); the peers'
    cells show their ``peer_metric`` (the row's own ``key`` unless named).
    """

    key: str
    label: str
    higher: bool
    workload: str
    target: Target | None
    peer_metric: str = ""

    @property
    def peers_key(self) -> str:
        return self.peer_metric or self.key

    def title(self, counts: dict[str, dict[str, int]]) -> str:
        count = max(counts.get(self.workload, {}).values(), default=0)
        return self.label.format(count=f"{count:,}")


KEYED_METRICS: list[KeyedMetric] = [
    KeyedMetric(
        "single_keyed",
        "W1 one producer, await each push ({count}), msg/s",
        True,
        "single_keyed",
        Target("sqlite-wal", "≥", 4.3),
    ),
    KeyedMetric(
        "batch_keyed",
        "W2 push_many of 1,000 ({count}), msg/s",
        True,
        "batch_keyed",
        Target("sqlite-wal", "≥", 3),
    ),
    KeyedMetric(
        "durable32_keyed",
        'W3 32 tasks, flush="sync" ({count}), msg/s',
        True,
        "durable32_keyed",
        Target("redis-streams", "≥", 2.5),
    ),
    KeyedMetric(
        "read_keyed",
        "W4 read back {count} in order, async for, msg/s",
        True,
        "read_keyed",
        Target("sqlite-wal", "≥", 2),
    ),
    KeyedMetric(
        "read_keyed_long",
        "W4 read back {count} in order, async for, msg/s",
        True,
        "read_keyed_long",
        Target("sqlite-wal", "≥", 2.5),
    ),
    KeyedMetric(
        "read_keyed_batches",
        "W4 read back {count}, batches() (peers: as async for), msg/s",
        True,
        "read_keyed_batches",
        Target("sqlite-wal", "≥", 4, peer_metric="read_keyed"),
        peer_metric="read_keyed",
    ),
    KeyedMetric(
        "latency_keyed_p50_us",
        "W5 cross-process p50 at 2,000 msg/s, µs (SQLite polls every 100 µs)",
        False,
        "latency_keyed",
        Target("sqlite-wal", "≤", 0.65),
    ),
    KeyedMetric(
        "latency_keyed_p99_us",
        "W5 cross-process p99 at 2,000 msg/s, µs",
        False,
        "latency_keyed",
        Target("sqlite-wal", "≤", 1),
    ),
    KeyedMetric(
        "rss_single_keyed_mib",
        "peak memory of W1's process, MiB",
        False,
        "single_keyed",
        Target("sqlite-wal", "+≤", 3),
    ),
    KeyedMetric("disk_keyed_bytes_per_message", "bytes on disk per message (W2's log)", False, "batch_keyed", None),
]
BEGIN = "<!-- bench_compare:begin (generated by benchmarks/peers/bench_compare.py; edit the script, not this) -->"
END = "<!-- bench_compare:end -->"
KEYED_BEGIN = (
    "<!-- bench_compare_keyed:begin (generated by benchmarks/peers/bench_compare.py; edit the script, not this) -->"
)
KEYED_END = "<!-- bench_compare_keyed:end -->"
GO_BEGIN = (
    "<!-- bench_compare_go_diskq:begin (generated by benchmarks/peers/bench_compare.py; edit the script, not this) -->"
)
GO_END = "<!-- bench_compare_go_diskq:end -->"


def count_for(counts: dict[str, dict[str, int]], workload: str, peer: str) -> int:
    return counts[workload].get(peer, counts[workload]["*"])


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


def quantiles(samples: list[float], points: int = 1000) -> list[float]:
    """The distribution of all runs' samples, kept as ``points + 1`` evenly spaced quantiles (for the chart)."""
    if not samples:
        return []
    ordered = sorted(samples)
    return [round(ordered[i * (len(ordered) - 1) // points], 1) for i in range(points + 1)]


def compile_bytecode() -> None:
    """Compile adiskq's modules to bytecode once, as installing a wheel does, before any worker runs.

    In a source checkout worked on with ``PYTHONDONTWRITEBYTECODE=1`` there is none, and every
    worker would compile the modules a consumer imports on its first use inside its timed span
    (~40 million instructions, about as much as reading 30,000 messages), while the peers' modules
    (the standard library's ``sqlite3``, redis-py) come compiled.
    """
    import compileall

    import adiskq

    compileall.compile_dir(os.path.dirname(adiskq.__file__), quiet=1)


def build_go_diskq_peer(source: str) -> str:
    """Build compare/godiskq/main.go against the go-diskq checkout at ``source`` into .cache/ and return
    the program's path. The checkout replaces the module (Go's module proxy refuses it); the
    program's other modules (fsnotify, x/sys) come from the proxy, pinned by its go.sum."""
    source = os.path.abspath(source)
    go_mod = os.path.join(source, "go.mod")
    try:
        with open(go_mod) as file:
            module_line = file.readline().split()
    except OSError as error:
        raise SystemExit(
            f"--go-diskq-src {source}: no go.mod there ({error.strerror}); pass a clone of {GO_DISKQ_URL}"
        ) from None
    if module_line[-1:] != [GO_DISKQ_MODULE]:
        raise SystemExit(
            f"--go-diskq-src {source}: its go.mod declares {' '.join(module_line)!r}, not {GO_DISKQ_MODULE}"
        )
    go = shutil.which("go")
    if go is None:
        raise SystemExit(
            "go-diskq needs Go to build its peer program: install Go (https://go.dev/dl/) or leave out --go-diskq-src"
        )
    build = os.path.join(GO_DISKQ_BUILD, "src")
    shutil.rmtree(build, ignore_errors=True)
    os.makedirs(build)
    for name in ("main.go", "go.mod", "go.sum"):
        shutil.copy(os.path.join(GO_DISKQ_PROGRAM, name), build)
    binary = os.path.join(GO_DISKQ_BUILD, "godiskq")
    for step in (
        [go, "mod", "edit", f"-replace={GO_DISKQ_MODULE}={source}"],
        [go, "build", "-o", binary, "."],
    ):
        done = subprocess.run(step, cwd=build, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise SystemExit(f"building go-diskq's peer program failed at `{shlex.join(step)}`:\n{done.stderr[-3000:]}")
    return binary


def go_diskq_facts(source: str) -> dict[str, str]:
    """The Go toolchain and the go-diskq commit measured (for the results' machine line)."""
    go = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", source, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {"go": go or "?", "go_diskq_commit": commit or "?"}


def run_worker(
    peer: str, workload: str, count: int, root: str, timeout_s: float, extra_env: dict[str, str] | None = None
) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix=f"{peer}-{workload}-", dir=root)
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(PEER_ENVIRONMENT.get(peer, {}))
    env.update(extra_env or {})
    try:
        done = subprocess.run(
            [sys.executable, "-m", "compare.worker", peer, workload, str(count), folder],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{peer} {workload} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def summarize(raw: list[dict[str, Any]], peers: list[str]) -> dict[str, dict[str, float]]:
    """Medians over runs: rates per workload, latency percentiles, and the batch run's memory and disk."""
    summary: dict[str, dict[str, float]] = {}
    for peer in peers:
        mine = [r for r in raw if r["peer"] == peer]
        figures: dict[str, float] = {}
        for workload in WORKLOADS:
            if workload in ("latency", "latency_keyed"):
                continue
            rates = [r["count"] / r["seconds"] for r in mine if r["workload"] == workload]
            if rates:
                figures[workload] = statistics.median(rates)
        for workload in ("latency", "latency_keyed"):
            latency_runs = [sorted(r["latencies_ns"]) for r in mine if r["workload"] == workload]
            for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
                if latency_runs:
                    figures[f"{workload}_{name}_us"] = statistics.median(
                        percentile(s, fraction) / 1e3 for s in latency_runs
                    )
        batches = [r for r in mine if r["workload"] == "batch"]
        if batches:
            figures["rss_peak_mib"] = statistics.median(r["rss_peak_bytes"] / 2**20 for r in batches)
            figures["disk_bytes_per_message"] = statistics.median(r["disk_bytes"] / r["count"] for r in batches)
        singles = [r for r in mine if r["workload"] == "single_keyed"]
        if singles:
            figures["rss_single_keyed_mib"] = statistics.median(r["rss_peak_bytes"] / 2**20 for r in singles)
        keyed_batches = [r for r in mine if r["workload"] == "batch_keyed"]
        if keyed_batches:
            figures["disk_keyed_bytes_per_message"] = statistics.median(
                r["disk_bytes"] / r["count"] for r in keyed_batches
            )
        summary[peer] = figures
    return summary


def _figure(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _ratio(ratio: float) -> str:
    if ratio >= 10:
        return f"{ratio:,.0f}×"
    return f"{ratio:.2f}×" if ratio >= 0.1 else f"{ratio:.2g}×"


def table_rows(summary: dict[str, dict[str, float]], peers: list[str]) -> list[list[str]]:
    """Header, then one row per metric: each peer's median and its ratio to adiskq's."""
    rows = [["", "better", *peers]]
    base = summary.get("adiskq", {})
    for key, label, higher in METRICS:
        if not any(key in summary[peer] for peer in peers):
            continue
        row = [label, "higher" if higher else "lower"]
        for peer in peers:
            value = summary[peer].get(key)
            if value is None:
                row.append("—")
            elif peer == "adiskq" or not base.get(key):
                row.append(_figure(value))
            else:
                row.append(f"{_figure(value)} ({_ratio(value / base[key])})")
        rows.append(row)
    return rows


def _standing(target: Target, mine: float | None, theirs: float | None) -> float | None:
    """adiskq's figure against the target's peer: a ratio, or for "+≤" a difference."""
    if mine is None or not theirs:
        return None
    return mine - theirs if target.kind == "+≤" else mine / theirs


def _target_cell(target: Target | None, standing: float | None) -> str:
    """The standing as shown, then "met" or "missed"."""
    if target is None or standing is None:
        return "—"
    if target.kind == "+≤":
        return f"{standing:+.1f} MiB {'met' if standing <= target.bound else 'missed'}"
    met = standing >= target.bound if target.kind == "≥" else standing <= target.bound
    return f"{_ratio(standing)} {'met' if met else 'missed'}"


def _best(figures: dict[str, dict[str, float]], metric: str, higher: bool) -> tuple[float, str] | None:
    """The best figure for ``metric`` among the peers that are not adiskq, and whose it is."""
    measured = [(f[metric], peer) for peer, f in figures.items() if peer not in ADISKQ_CORES and metric in f]
    if not measured:
        return None
    return max(measured) if higher else min(measured)


def paired_standings(raw: list[dict[str, Any]], peers: list[str]) -> dict[str, dict[str, float]]:
    """Per adiskq core and keyed metric, medians over runs of that run's own figures: its ratio to the
    run's best peer (``"<metric> ÷ best"``) and its standing against the target's peer (``"<metric>"``).
    A run measures every peer back to back, so a ratio within it is less exposed than a ratio of
    medians to the machine's load changing between runs (this machine is shared)."""
    per_run = [summarize([r for r in raw if r.get("run", 0) == run], peers) for run in {r.get("run", 0) for r in raw}]
    standings: dict[str, dict[str, float]] = {}
    for core in (peer for peer in peers if peer in ADISKQ_CORES):
        for metric in KEYED_METRICS:
            key, target = metric.key, metric.target
            against_target: list[float] = []
            against_best: list[float] = []
            for run in per_run:
                mine = run.get(core, {}).get(key)
                if target is not None:
                    theirs = run.get(target.peer, {}).get(target.peer_metric or key)
                    standing = _standing(target, mine, theirs)
                    if standing is not None:
                        against_target.append(standing)
                best = _best(run, metric.peers_key, metric.higher)
                if mine is not None and best is not None and best[0]:
                    against_best.append(mine / best[0])
            if against_target:
                standings.setdefault(core, {})[key] = statistics.median(against_target)
            if against_best:
                standings.setdefault(core, {})[f"{key} ÷ best"] = statistics.median(against_best)
    return standings


def keyed_rows(
    summary: dict[str, dict[str, float]],
    peers: list[str],
    counts: dict[str, dict[str, int]],
    standings: dict[str, dict[str, float]] | None = None,
) -> list[list[str]]:
    """The distinct-key table: each peer's median, the best non-adiskq peer, each adiskq core's ratio
    to it, and its standing against the row's target (those two from ``standings`` where given, else
    from the medians)."""
    cores = [peer for peer in peers if peer in ADISKQ_CORES]
    others = [peer for peer in peers if peer not in ADISKQ_CORES]
    rows = [
        [
            "",
            "better",
            *peers,
            "best peer",
            *(f"{core} ÷ best" for core in cores),
            "target",
            *(f"{core} vs target" for core in cores),
        ]
    ]
    for metric in KEYED_METRICS:
        key, higher, peer_metric, target = metric.key, metric.higher, metric.peers_key, metric.target
        if counts and metric.workload not in counts:
            continue  # not run (a --workloads subset): the peers' figure it borrows would stand alone
        if not any(key in summary.get(core, {}) for core in cores) and not any(
            peer_metric in summary.get(peer, {}) for peer in others
        ):
            continue
        row = [metric.title(counts), "higher" if higher else "lower"]
        for peer in peers:
            value = summary.get(peer, {}).get(key if peer in ADISKQ_CORES else peer_metric)
            row.append("—" if value is None else _figure(value))
        best = _best({peer: summary.get(peer, {}) for peer in others}, peer_metric, higher)
        row.append("—" if best is None else f"{best[1]} {_figure(best[0])}")
        for core in cores:
            mine = summary.get(core, {}).get(key)
            ratio = None if mine is None or best is None or not best[0] else mine / best[0]
            if standings is not None:
                ratio = standings.get(core, {}).get(f"{key} ÷ best")
            row.append("—" if ratio is None else _ratio(ratio))
        row.append("—" if target is None else target.describe())
        for core in cores:
            standing = None
            if target is None:
                pass
            elif standings is not None:
                standing = standings.get(core, {}).get(key)
            else:
                theirs = summary.get(target.peer, {}).get(target.peer_metric or key)
                standing = _standing(target, summary.get(core, {}).get(key), theirs)
            row.append(_target_cell(target, standing))
        rows.append(row)
    return rows


def go_diskq_ratios(raw: list[dict[str, Any]], peers: list[str]) -> dict[str, dict[str, list[float]]]:
    """Per adiskq core and metric of GO_DISKQ_METRICS, each run's own ratio adiskq ÷ go-diskq (a run
    measures every peer back to back), in run order."""
    per_run = [
        summarize([r for r in raw if r.get("run", 0) == run], peers) for run in sorted({r.get("run", 0) for r in raw})
    ]
    ratios: dict[str, dict[str, list[float]]] = {}
    for core in (peer for peer in peers if peer in ADISKQ_CORES):
        for key in GO_DISKQ_METRICS:
            for run in per_run:
                mine, theirs = run.get(core, {}).get(key), run.get(GO_DISKQ, {}).get(key)
                if mine is not None and theirs:
                    ratios.setdefault(core, {}).setdefault(key, []).append(mine / theirs)
    return ratios


def go_diskq_rows(
    summary: dict[str, dict[str, float]], ratios: dict[str, dict[str, list[float]]], counts: dict[str, dict[str, int]]
) -> list[list[str]]:
    """go-diskq's median per metric, and each adiskq core's: its figure, then the median of its runs'
    ratios to go-diskq with their lowest and highest in brackets."""
    cores = [core for core in ADISKQ_CORES if core in ratios]
    rows = [["", "better", GO_DISKQ, *(f"{core} (÷ {GO_DISKQ}: median, lowest–highest)" for core in cores)]]
    for metric in KEYED_METRICS:
        theirs = summary.get(GO_DISKQ, {}).get(metric.key)
        if metric.key not in GO_DISKQ_METRICS or theirs is None:
            continue
        row = [metric.title(counts), "higher" if metric.higher else "lower", _figure(theirs)]
        for core in cores:
            mine, runs = summary.get(core, {}).get(metric.key), ratios[core].get(metric.key, [])
            if mine is None or not runs:
                row.append("—")
                continue
            spread = f"{_ratio(min(runs))}–{_ratio(max(runs))}"
            row.append(f"{_figure(mine)} ({_ratio(statistics.median(runs))}, {spread})")
        rows.append(row)
    return rows


def plain_table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


def markdown_table(rows: list[list[str]]) -> str:
    header, *body = rows
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["--:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def machine_facts() -> dict[str, Any]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), "?")
    except OSError:
        pass
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=False).stdout.split()
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "redis_server": next((word[2:] for word in redis if word.startswith("v=")), "?"),
        "packages": {name: _version(name) for name in ("adiskq", "redis", "hiredis", "persist-queue", "litequeue")},
    }


def results_section(report: dict[str, Any], rows: list[list[str]], chart_name: str) -> str:
    meta = report["meta"]
    facts = meta["machine"]
    packages = ", ".join(f"{name} {version}" for name, version in facts["packages"].items())
    load = "load average {:.1f} before, {:.1f} after".format(*meta["load_average"])
    return "\n".join(
        [
            BEGIN,
            f"Made by `{meta['command']}` on {meta['date']} ({meta['mode']}; {meta['elapsed_s']:.0f} s).",
            f"Machine: {facts['cpus']} × {facts['cpu']}, Linux {facts['kernel']}, {load}; Python {facts['python']}, "
            f"SQLite {facts['sqlite']}, redis-server {facts['redis_server']}; {packages}.",
            "",
            "Each cell is the median over runs; in brackets, the peer's figure divided by adiskq's "
            "(for msg/s below 1× means slower than adiskq; for latency, memory and disk above 1× means more).",
            "",
            markdown_table(rows),
            "",
            f"![throughput, latency, memory and disk of adiskq and its peers]({chart_name})",
            END,
        ]
    )


def keyed_results_section(report: dict[str, Any], rows: list[list[str]]) -> str:
    meta = report["meta"]
    facts = meta["machine"]
    load = "load average {:.1f} before, {:.1f} after".format(*meta["load_average"])
    cores = ", ".join(f"{peer} ran the {core} core" for peer, core in sorted(meta.get("cores", {}).items()))
    return "\n".join(
        [
            KEYED_BEGIN,
            f"Made by `{meta['command']}` on {meta['date']} ({meta['keyed_mode']}; {meta['elapsed_s']:.0f} s).",
            f"Machine: {facts['cpus']} × {facts['cpu']}, Linux {facts['kernel']}, {load}; Python {facts['python']}, "
            f"SQLite {facts['sqlite']}, redis-server {facts['redis_server']}; {cores or 'no adiskq core ran'}.",
            "",
            "100-byte values, a distinct 12-byte key per message, each message (and for push_many each Record) "
            "built in the caller's timed loop, one partition, opening and closing counted; each figure is the "
            "median over runs. The best peer is the best of the peers that are not adiskq (by those medians); each target "
            "is against the peer it names. The ratio columns are medians "
            "of each run's own ratio (or difference), each run measuring every peer back to back, so that "
            "load changing between runs on this shared machine moves them less.",
            "",
            markdown_table(rows),
            KEYED_END,
        ]
    )


def go_diskq_results_section(report: dict[str, Any], rows: list[list[str]]) -> str:
    meta = report["meta"]
    facts = meta["machine"]
    go = meta.get("go_diskq", {})
    load = "load average {:.1f} before, {:.1f} after".format(*meta["load_average"])
    runs = len(next(iter(next(iter(report["go_diskq_ratios"].values())).values())))
    return "\n".join(
        [
            GO_BEGIN,
            f"Made by `{meta['command']}` on {meta['date']} ({runs} runs; {meta['elapsed_s']:.0f} s), in the same "
            "run as that command's distinct-key table, every peer measured back to back in each run.",
            f"Machine: {facts['cpus']} × {facts['cpu']}, Linux {facts['kernel']}, {load}; Python {facts['python']}, "
            f"{go.get('go', '?')}, go-diskq at commit {go.get('go_diskq_commit', '?')} (a clone given by "
            f"--go-diskq-src or ${GO_DISKQ_SRC_VARIABLE}; one partition, its other settings at their defaults).",
            "",
            "The workloads of the distinct-key table that go-diskq has (it pushes one message at a time and never "
            "fsyncs, so it sits out W2 and W3), measured the same way: each figure the median over runs; "
            "in brackets the median of each run's own ratio adiskq ÷ go-diskq, then the lowest and highest "
            "of those ratios (for msg/s above 1× means adiskq faster; for latency and memory below 1× "
            "means adiskq lower).",
            "",
            markdown_table(rows),
            GO_END,
        ]
    )


def update_results(path: str, section: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the text between the markers in RESULTS.md (or add it at the end), leaving the rest alone."""
    text = ""
    if os.path.exists(path):
        with open(path) as file:
            text = file.read()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        text = head + section + tail
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "# Benchmark results\n\n") + section + "\n"
    with open(path, "w") as file:
        file.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny counts, one run: checks that everything works")
    parser.add_argument(
        "--runs", type=int, default=None, help=f"runs per peer and workload (default 5, keyed {KEYED_RUNS}); medians"
    )
    parser.add_argument("--peers", default=None, help="comma-separated subset of: " + ", ".join(PEERS))
    parser.add_argument("--workloads", default=None, help="subset of: " + ", ".join(WORKLOADS))
    parser.add_argument(
        "--keyed",
        action="store_true",
        help="the distinct-key workloads alone (peers: " + ", ".join(KEYED_PEERS) + ")",
    )
    parser.add_argument(
        "--go-diskq-src",
        metavar="PATH",
        default=os.environ.get(GO_DISKQ_SRC_VARIABLE),
        help=f"a clone of {GO_DISKQ_URL} to build the go-diskq peer from (default: ${GO_DISKQ_SRC_VARIABLE}); "
        "Go's module proxy refuses the module, so without it go-diskq is left out",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="where compare.json, compare.png and RESULTS.md go (default: the first two beside this file, "
        "RESULTS.md in benchmarks/)",
    )
    parser.add_argument("--dir", default=None, help="where the peers' data goes (default: a temp folder)")
    parser.add_argument("--redraw", metavar="JSON", help="measure nothing: redraw chart and table from a compare.json")
    args = parser.parse_args(argv)
    if args.redraw:
        with open(args.redraw) as file:
            saved: dict[str, Any] = json.load(file)
        publish(saved, list(saved["summary"]), args.out)
        return 0
    default_peers, default_workloads = (KEYED_PEERS, KEYED_WORKLOADS) if args.keyed else (PEERS, WORKLOADS)
    peers = args.peers.split(",") if args.peers else list(default_peers)
    workloads = args.workloads.split(",") if args.workloads else list(default_workloads)
    for name, chosen, known in (("peer", peers, PEERS), ("workload", workloads, WORKLOADS)):
        unknown = set(chosen) - set(known)
        if unknown:
            parser.error(f"unknown {name}(s): {', '.join(sorted(unknown))}")
    go_env: dict[str, str] = {}
    go_facts: dict[str, str] = {}
    if GO_DISKQ in peers and not args.go_diskq_src:
        if args.peers:
            parser.error(
                f"go-diskq needs --go-diskq-src PATH (or {GO_DISKQ_SRC_VARIABLE}): Go's module proxy refuses "
                f"{GO_DISKQ_MODULE}; clone {GO_DISKQ_URL} and pass its path"
            )
        peers.remove(GO_DISKQ)
        left_out = [w for w in workloads if runs_workload(GO_DISKQ, w)]
        if left_out:
            print(
                f"go-diskq left out of {', '.join(left_out)}: Go's module proxy refuses {GO_DISKQ_MODULE} "
                f"(403), so it cannot be fetched; clone {GO_DISKQ_URL} and pass its path with --go-diskq-src "
                f"PATH (or {GO_DISKQ_SRC_VARIABLE}) to measure it",
                file=sys.stderr,
            )
    elif GO_DISKQ in peers:
        go_env[GO_DISKQ_BINARY_VARIABLE] = build_go_diskq_peer(args.go_diskq_src)
        go_facts = go_diskq_facts(args.go_diskq_src)
    if args.quick:
        runs_of = dict.fromkeys(workloads, 1)
    else:
        runs_of = {w: args.runs or (KEYED_RUNS if w in KEYED_WORKLOADS else 5) for w in workloads}
    counts = QUICK_COUNTS if args.quick else COUNTS
    timeout_s = 120.0 if args.quick else 900.0
    command = "python benchmarks/peers/bench_compare.py" + "".join(" " + shlex.quote(a) for a in (argv or sys.argv[1:]))
    # persist-queue and litequeue have no keys: they sit out the keyed workloads.
    plan = {w: [p for p in peers if runs_workload(p, w)] for w in workloads}

    compile_bytecode()
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    raw: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="adiskq-compare-", dir=args.dir) as root:
        for run in range(max(runs_of.values())):
            for workload in workloads:
                if run >= runs_of[workload]:
                    continue
                for peer in plan[workload]:
                    result = run_worker(peer, workload, count_for(counts, workload, peer), root, timeout_s, go_env)
                    result["run"] = run
                    raw.append(result)
                    shown = (
                        f"{result['count'] / result['seconds']:>12,.0f} msg/s"
                        if not workload.startswith("latency")
                        else f"p50 {percentile(sorted(result['latencies_ns']), 0.5) / 1e3:>8,.0f} µs"
                    )
                    print(
                        f"run {run + 1}/{runs_of[workload]}  {workload:<18} {peer:<14} {shown}",
                        file=sys.stderr,
                        flush=True,
                    )
    elapsed = time.monotonic() - started

    summary = summarize(raw, peers)
    keyless_runs = {runs_of[w] for w in workloads if w in KEYLESS_WORKLOADS}
    keyed_runs = {runs_of[w] for w in workloads if w in KEYED_WORKLOADS}
    report: dict[str, Any] = {
        "meta": {
            "command": command,
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "mode": _mode(args.quick, keyless_runs),
            "keyed_mode": _mode(args.quick, keyed_runs),
            "elapsed_s": elapsed,
            "load_average": [load_before, os.getloadavg()[0]],
            "machine": machine_facts(),
            "cores": {r["peer"]: r["core"] for r in raw if r.get("core")},
            "go_diskq": go_facts,
        },
        "counts": {w: {p: count_for(counts, w, p) for p in plan[w]} for w in workloads},
        "summary": summary,
        "paired_standings": paired_standings(raw, peers),
        "go_diskq_ratios": go_diskq_ratios(raw, peers),
        "latency_samples_us": {
            peer: quantiles(
                [ns / 1e3 for r in raw if r["peer"] == peer and r["workload"] == "latency" for ns in r["latencies_ns"]]
            )
            for peer in peers
        },
        "runs": [{k: v for k, v in r.items() if k != "latencies_ns"} for r in raw],
    }
    publish(report, peers, args.out)
    return 0


def _mode(quick: bool, runs: set[int]) -> str:
    if quick:
        return "quick mode, one run"
    return f"medians of {'/'.join(str(n) for n in sorted(runs))} runs" if runs else "not run"


def publish(report: dict[str, Any], peers: list[str], out: str | None) -> None:
    """Write the report's JSON, and for each table it has (keyless, keyed) its RESULTS.md section and
    print it; the keyless one also gets the chart. A run of only keyed workloads saves compare_keyed.json,
    so that it leaves the keyless compare.json alone. ``out`` None: the JSON and the chart beside this
    file, the sections in benchmarks/RESULTS.md."""
    results = os.path.join(BENCHMARKS if out is None else out, "RESULTS.md")
    out = HERE if out is None else out
    summary = report["summary"]
    keyless = any(key in summary.get(peer, {}) for key, _, _ in METRICS for peer in peers)
    keyed = any(metric.key in summary.get(peer, {}) for metric in KEYED_METRICS for peer in peers)
    os.makedirs(out, exist_ok=True)
    json_name = "compare.json" if keyless else "compare_keyed.json"
    with open(os.path.join(out, json_name), "w") as file:
        json.dump(report, file, indent=1)
    if keyless:
        rows = table_rows(summary, peers)
        from chart import render  # matplotlib loads only now, after the timed work

        chart = os.path.join(out, "compare.png")
        render(report, chart)
        update_results(results, results_section(report, rows, os.path.relpath(chart, os.path.dirname(results))))
        print(f"adiskq vs peers ({report['meta']['mode']}; {report['meta']['elapsed_s']:.0f} s)")
        print(plain_table(rows))
    if keyed:
        keyed_peers = [peer for peer in peers if peer in KEYED_PEERS]
        rows = keyed_rows(summary, keyed_peers, report.get("counts", {}), report.get("paired_standings"))
        update_results(results, keyed_results_section(report, rows), KEYED_BEGIN, KEYED_END)
        print(f"distinct keys, against their targets ({report['meta']['keyed_mode']})")
        print(plain_table(rows))
    if report.get("go_diskq_ratios"):
        rows = go_diskq_rows(summary, report["go_diskq_ratios"], report.get("counts", {}))
        update_results(results, go_diskq_results_section(report, rows), GO_BEGIN, GO_END)
        print("adiskq beside go-diskq (median ratio per run, lowest–highest)")
        print(plain_table(rows))
    print(f"wrote {out}/{json_name}{', compare.png' if keyless else ''} and RESULTS.md's section(s)")


if __name__ == "__main__":
    raise SystemExit(main())
