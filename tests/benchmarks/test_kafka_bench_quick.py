"""benchmarks/kafka/bench_kafka.py in quick mode, so the Kafka gateway benchmark never rots (figures not checked)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
from support.kafka_broker import KafkaBroker
from support.paths import ROOT_DIR


@pytest.mark.timeout(400)
def test_quick_mode_measures_the_gateway_beside_the_library_and_apache_kafka(
    tmp_path: pathlib.Path, kafka_broker: KafkaBroker
) -> None:
    """Every figure is measured (positive), and the tables show the gateway beside the library and
    beside Apache Kafka (the run's node, which the benchmark finds through the run's environment)."""
    done = subprocess.run(
        [sys.executable, "benchmarks/kafka/bench_kafka.py", "--quick", "--out", str(tmp_path)],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=360,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((tmp_path / "kafka.json").read_text())
    names = ["kafka_produce_msgs", "native_produce_msgs", "kafka_fetch_msgs", "native_fetch_msgs"]
    names += [f"apache_kafka_{name}" for name in ("produce_msgs", "fetch_msgs", "cpu_per_round_trip_us")]
    names += ["apache_kafka_peak_rss_mib", "gateway_peak_rss_mib", "apache_kafka_fetch_broker_us"]
    for name in names:
        assert figures[name] > 0, name
    assert 0 < figures["kafka_e2e_p50_us"] <= figures["kafka_e2e_p99_us"]
    assert figures["gateway_cpu_per_round_trip_us"] > 0
    assert figures["gateway_cpu_per_unbatched_trip_us"] > 0
    # A trip's requests are counted: at least its Produce and its Fetch.
    assert figures["round_trip_requests_Produce"] >= 1
    assert figures["round_trip_requests_Fetch"] >= 1
    assert 0 < figures["apache_kafka_e2e_p50_us"] <= figures["apache_kafka_e2e_p99_us"]
    assert "Kafka gateway" in done.stdout
    assert "Apache Kafka" in done.stdout
    assert_fetch_context(figures, done.stdout)


def assert_fetch_context(figures: dict[str, float], printed: str) -> None:
    """The fetch's context is measured and printed: the default-settings consumer's read, kcat's, and
    the Fetch requests librdkafka sent."""
    assert figures["kafka_fetch_default_msgs"] > 0
    assert figures["kcat_fetch_msgs"] > 0
    assert figures["kcat_fetch_client_us"] > 0
    assert figures["kafka_fetch_requests"] >= 1
    assert figures["kafka_fetch_response_kib"] > 0
    assert "fetch by kcat" in printed
    assert "default queue settings" in printed
    assert "Fetch requests" in printed


@pytest.mark.timeout(120)
def test_only_fetch_measures_the_fetch_alone(tmp_path: pathlib.Path) -> None:
    """``--only fetch`` measures the gateway's fetch, kcat's and the library's, and nothing else."""
    done = subprocess.run(
        [sys.executable, "benchmarks/kafka/bench_kafka.py", "--quick", "--only", "fetch", "--out", str(tmp_path)],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((tmp_path / "kafka.json").read_text())
    assert figures["kafka_fetch_msgs"] > 0
    assert figures["native_fetch_msgs"] > 0
    assert "kafka_produce_msgs" not in figures
    assert "kafka_e2e_p50_us" not in figures
    assert_fetch_context(figures, done.stdout)


@pytest.mark.timeout(300)
def test_only_transactions_measures_the_gateway_beside_apache_kafka_and_an_earlier_gateway(
    tmp_path: pathlib.Path, kafka_broker: KafkaBroker
) -> None:
    """``--only transactions`` measures transactions of 100 records on the gateway and on Apache Kafka
    (the run's node): commit latency, throughput and the broker's CPU, each side, and a table; with
    ``--before FOLDER`` also the gateway of the adiskq package in FOLDER (here this checkout's own),
    in the same run, beside the others."""
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/kafka/bench_kafka.py",
            "--quick",
            "--only",
            "transactions",
            "--before",
            str(ROOT_DIR),
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((tmp_path / "kafka.json").read_text())
    for side in ("kafka_txn", "apache_kafka_txn"):
        for figure in ("commit_p50_us", "commit_p99_us", "per_second", "records_per_second"):
            assert figures[f"{side}_{figure}"] > 0, f"{side}_{figure}"
        assert f"{side}_broker_cpu_us" in figures
    assert figures["before_kafka_txn_commit_p50_us"] > 0
    assert "kafka_produce_msgs" not in figures
    assert "transactions of 100 records a second" in done.stdout
    assert "the gateway before" in done.stdout
