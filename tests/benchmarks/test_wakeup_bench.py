"""The wake-up benchmark and its breakdown keep working (quick runs; figures are not checked, only that they run)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from support.bench import run_quick
from support.paths import ROOT_DIR

BENCHMARKS = pathlib.Path(ROOT_DIR) / "benchmarks"


def bench_wakeup(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``benchmarks/bench_wakeup.py`` run with ``args``, its output captured."""
    command = [sys.executable, str(BENCHMARKS / "bench_wakeup.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def test_the_wakeup_benchmark_runs_in_quick_mode(tmp_path: pathlib.Path) -> None:
    """bench_wakeup.py --quick runs every peer and prints its percentiles, its ratio and the target."""
    result = run_quick("bench_wakeup.py", "--dir", str(tmp_path), timeout=240)
    rows = {line.split()[0] for line in result.stdout.splitlines()[2:] if line}
    assert {"adiskq-asyncio", "adiskq-trio", "inotify-blocking", "pipe", "sqlite-100us", "sqlite-1ms"} <= rows
    assert "target for adiskq: p50 <=" in result.stdout
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("backend", "producer_backend"), [("asyncio", "trio"), ("trio", None)])
def test_the_wakeup_breakdown_runs(backend: str, producer_backend: str | None) -> None:
    """wakeup_breakdown.py cuts adiskq's cross-process latency into its stages, on either backend
    (the producer's loop chosen apart, or the consumer's)."""
    chosen = ["--producer-backend", producer_backend] if producer_backend else []
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "wakeup_breakdown.py"), "--backend", backend, *chosen, "--count", "300"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"adiskq {backend}" + (f" (producer on {producer_backend})" if chosen else ":"))
    for stage in ("index written", "woken", "events read", "read starts", "data read", "decoded", "delivered"):
        assert f"→ {stage}" in result.stdout


def test_the_wakeup_breakdown_counts_the_calls_on_the_way() -> None:
    """wakeup_breakdown.py --calls counts the consumer's calls from the epoll return to the message,
    by whose code they are, instead of timing the stages."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "wakeup_breakdown.py"), "--backend", "asyncio", "--calls", "--count", "300"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("adiskq asyncio: calls from the epoll return to the message")
    rows = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()[2:]}
    assert set(rows) == {"adiskq", "event-loop", "built-in", "total"}
    assert 0 < rows["adiskq"] < rows["total"]


def test_the_wakeup_benchmark_runs_a_baseline_beside(tmp_path: pathlib.Path) -> None:
    """bench_wakeup.py --baseline runs another tree's adiskq right after each adiskq peer, in the same run."""
    result = bench_wakeup("--quick", "--peers=adiskq-trio,pipe", f"--baseline={ROOT_DIR}", f"--dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    rows = [line.split()[0] for line in result.stdout.splitlines()[2:] if line and not line.startswith("target")]
    assert rows == ["adiskq-trio", "baseline-trio", "pipe"]


def test_the_wakeup_benchmark_refuses_a_baseline_without_adiskq(tmp_path: pathlib.Path) -> None:
    """--baseline must name a folder holding an adiskq package."""
    result = bench_wakeup("--quick", f"--baseline={tmp_path}", timeout=60)
    assert result.returncode == 2
    assert "no adiskq package there" in result.stderr


def test_the_wakeup_benchmark_pins_its_processes(tmp_path: pathlib.Path) -> None:
    """bench_wakeup.py --cpus apart runs the consumer and the producer on CPUs 0 and 1, and says so."""
    result = bench_wakeup("--quick", "--peers=adiskq-asyncio,pipe", "--cpus=apart", f"--dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    assert "consumer and producer on CPUs 0 and 1" in result.stdout
    rows = [line.split()[0] for line in result.stdout.splitlines()[2:] if line and not line.startswith("target")]
    assert rows == ["adiskq-asyncio", "pipe"]


@pytest.mark.parametrize("co_runner", ["idle-class", "busy"])
def test_the_wakeup_benchmark_runs_the_floors_in_c_at_an_interval_beside_a_co_runner(
    tmp_path: pathlib.Path, co_runner: str
) -> None:
    """bench_wakeup.py builds and runs the C floors, paces the producers at --interval, and runs its
    --co-runner beside the peers, saying so."""
    result = bench_wakeup(
        "--quick",
        "--peers=c-inotify-blocking,c-poll-100us,pipe,sqlite-100us",
        "--interval=500",
        f"--co-runner={co_runner}",
        f"--dir={tmp_path}",
    )
    assert result.returncode == 0, result.stderr
    assert f"one message every 500 µs, 150 samples a run, medians of 1 run(s), co-runner: {co_runner}" in result.stdout
    rows = {line.split()[0]: line.split()[1:4] for line in result.stdout.splitlines()[2:] if line}
    assert {"c-inotify-blocking", "c-poll-100us", "pipe", "sqlite-100us"} <= set(rows)
    for peer in ("c-inotify-blocking", "c-poll-100us"):
        p50, p90, p99 = (float(figure) for figure in rows[peer])
        assert 0 < p50 <= p90 <= p99
    assert os.listdir(tmp_path) == []


def test_the_wakeup_breakdown_warms_up_by_messages_not_by_wakeups() -> None:
    """wakeup_breakdown.py leaves out the first messages of a run, and keeps every later message a
    wake-up brought, however few wake-ups the run had (on a busy machine most messages are found
    without one)."""
    sys.path.insert(0, str(BENCHMARKS))
    import wakeup_breakdown

    index_times: list[int] = []
    log: list[tuple[str, int]] = []
    for n in range(10):  # message n stamped at 1000n, its index written 10 ns later
        stamp = 1000 * n
        index_times.append(stamp + 10)
        if n % 3 == 0:  # every third message came by a wake-up; the others by the look before sleeping
            log += [("woken", stamp + 20), ("events read", stamp + 30), ("read starts", stamp + 40)]
            log += [("data read", stamp + 50), ("decoded", stamp + 60), ("delivered", stamp + 70)]
        log.append(("stamp", stamp))
    rows = wakeup_breakdown.stages(index_times, log, warmup=2)
    assert rows == [[10, 10, 10, 10, 10, 10, 10]] * 3  # messages 3, 6 and 9
