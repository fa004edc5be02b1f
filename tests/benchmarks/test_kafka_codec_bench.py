"""The Kafka record batch codec's benchmark runs in its quick mode, so it never rots."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT_DIR


def test_the_kafka_codec_benchmark_runs_in_quick_mode() -> None:
    """`benchmarks/bench_kafka_codec.py --quick` prints compiled and reference records/s for every workload."""
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT_DIR, "benchmarks", "bench_kafka_codec.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for workload in (
        "decode_batches, plain",
        "encode_batch, plain",
        "encode_batch_from_messages",
        "decode_batches, zstd",
    ):
        assert workload in done.stdout
    assert "x\n" in done.stdout  # the ratio column
