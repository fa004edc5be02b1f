"""benchmarks/bench_compression.py runs in its quick mode, so it never rots (no timing is asserted here)."""

from __future__ import annotations

import os

from support.bench import run_quick


def test_compression_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """bench_compression.py --quick prints each rate against the uncompressed stream's and the bytes
    per message against SQLite's, on both cores, what libzstd alone allows each workload, and leaves
    nothing behind."""
    result = run_quick("bench_compression.py", "--dir", os.fspath(tmp_path), timeout=300)
    for core in ("compiled core:", "pure-Python core:"):
        assert core in result.stdout
    for workload in ("push", "push_many", "read"):
        assert result.stdout.count(f"  {workload:10} zstd") == 2
    assert result.stdout.count("x sqlite's") == 2
    assert result.stdout.count("the most the codec allows") == 3
    assert os.listdir(tmp_path) == []
