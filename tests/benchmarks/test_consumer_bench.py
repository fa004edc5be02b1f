"""The consumer benchmark keeps working (its quick mode; figures are not checked, only that it runs)."""

from __future__ import annotations

from support.bench import run_quick


def test_the_consumer_benchmark_runs_in_quick_mode() -> None:
    """bench_consumer.py --quick runs every workload on both backends and prints each figure."""
    result = run_quick("bench_consumer.py", timeout=240)
    out = result.stdout
    assert "sqlite WAL full scan" in out
    for backend in ("asyncio", "trio"):
        assert f"batches()      {backend}" in out
        assert f"async for msg  {backend}" in out
        assert f"inotify alone, other process  {backend}" in out
        assert f"adiskq, other process         {backend}" in out
        assert f"adiskq, same process          {backend}" in out
