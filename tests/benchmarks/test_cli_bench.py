"""The command line's benchmark runs in its quick mode, so it never rots."""

from __future__ import annotations

from support.bench import run_quick


def test_the_cli_benchmark_runs_in_quick_mode() -> None:
    """`benchmarks/bench_cli.py --quick` finishes and prints start-up and throughput figures."""
    done = run_quick("bench_cli.py", timeout=120)
    assert "adiskq --help, rich eager" in done.stdout
    assert "adiskq read --format json" in done.stdout
    assert "adiskq check" in done.stdout
