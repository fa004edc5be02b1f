"""The Spark pipeline example runs and counts every click once, and the benchmark's quick mode runs."""

from __future__ import annotations

import collections
import importlib.util
import pathlib
import types

import pytest
from paths import ROOT_DIR
from pyspark.sql import SparkSession

ROOT = pathlib.Path(ROOT_DIR)


def load(relative: str) -> types.ModuleType:
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pipeline_counts_each_users_clicks_per_closed_minute(spark: SparkSession, tmp_path: pathlib.Path) -> None:
    """Produce, stream-aggregate into another stream, read back: one count per user and closed minute."""
    example = load("examples/spark_pipeline.py")
    events = example.make_events(200)
    last_minute = max(when for _, _, when in events).strftime("%Y-%m-%dT%H:%M")  # still open: no later click
    clicks = collections.Counter((user, when.strftime("%Y-%m-%dT%H:%M")) for user, _, when in events)
    expected = sorted((user, minute, n) for (user, minute), n in clicks.items() if minute != last_minute)
    assert example.run(spark, str(tmp_path), event_count=200) == expected


def test_the_spark_benchmark_runs_in_quick_mode(
    spark: SparkSession, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/bench_spark.py's quick mode reads both peers and prints rows/s with the ratio."""
    bench = load("benchmarks/bench_spark.py")
    medians = bench.run(spark, bench.QUICK_ROWS, 1, str(tmp_path))
    assert set(medians) == {"scan", "sum"}
    assert all(ours > 0 and theirs > 0 for ours, theirs in medians.values())
    assert "adiskq/parquet" in capsys.readouterr().out
