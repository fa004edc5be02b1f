"""The Spark pipeline example runs and counts every click once, and the benchmark's quick mode runs."""

from __future__ import annotations

import collections
import importlib.util
import pathlib
import types

import pytest
from anyio.from_thread import start_blocking_portal
from pyspark.sql import SparkSession
from support.kafka_broker import KafkaBroker
from support.paths import ROOT_DIR

from adiskq.kafka import KafkaGateway

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
    spark: SparkSession, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], kafka_broker: KafkaBroker
) -> None:
    """benchmarks/bench_spark.py's quick mode reads every peer — the adiskq data source, Parquet, the
    null source, and Spark's Kafka connector from a Kafka gateway serving the same stream and from
    Apache Kafka — each whole (the sum of the values' lengths is checked), and prints the table."""
    bench = load("benchmarks/bench_spark.py")
    with start_blocking_portal(backend="asyncio") as portal:
        gateway = KafkaGateway(str(tmp_path), port=0)
        with portal.wrap_async_context_manager(gateway):
            kafka = {"kafka-gateway": f"127.0.0.1:{gateway.port}", "apache-kafka": kafka_broker.bootstrap}
            medians = bench.run(spark, bench.QUICK_ROWS, 1, str(tmp_path), kafka)
    assert set(medians) == {"scan", "sum"}
    peers = {"adiskq", "parquet", "null-source", "kafka-gateway", "apache-kafka"}
    assert all(set(rates) == peers and min(rates.values()) > 0 for rates in medians.values()), medians
    out = capsys.readouterr().out
    assert "kafka-gateway rows/s" in out
    assert "adiskq/parquet" in out


@pytest.mark.parametrize("script", ["benchmarks/bench_spark.py", "examples/spark_pipeline.py"])
def test_the_spark_scripts_point_spark_at_their_own_interpreter(script: str) -> None:
    """Run with the venv's interpreter and no PYSPARK_PYTHON exported, a script sets it to that
    interpreter before Spark starts (as the README tells users), so Spark's workers import what
    the venv has instead of the first `python3` on PATH."""
    import os
    import subprocess
    import sys

    probe = (
        "import importlib.util, os, sys\n"
        f"spec = importlib.util.spec_from_file_location('probe', {str(ROOT / script)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(os.environ['PYSPARK_PYTHON'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == sys.executable
