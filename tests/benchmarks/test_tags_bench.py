"""bench_tags.py runs in its quick mode, so the script never rots (no timing is asserted here)."""

from __future__ import annotations

import os

from support.bench import run_quick


def test_tags_benchmark_quick(tmp_path: os.PathLike[str]) -> None:
    """--quick measures filtered and unfiltered reads at three selectivities and tagged pushes, on both cores."""
    result = run_quick("bench_tags.py", "--dir", os.fspath(tmp_path), timeout=300)
    for line in ("compiled core", "reference core", "5%", "1%", "100%", "push_many", "target >= 0.95x"):
        assert line in result.stdout
    assert os.listdir(tmp_path) == []
