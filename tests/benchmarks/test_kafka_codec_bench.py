"""The Kafka record batch codec's benchmark runs in its quick mode, so it never rots."""

from __future__ import annotations

from support.bench import run_quick


def test_the_kafka_codec_benchmark_runs_in_quick_mode() -> None:
    """`benchmarks/kafka/bench_kafka_codec.py --quick` prints compiled and reference records/s for every workload."""
    done = run_quick("kafka/bench_kafka_codec.py", timeout=120)
    for workload in (
        "decode_batches, plain",
        "encode_batch, plain",
        "encode_batch_from_messages",
        "decode_batches, zstd",
    ):
        assert workload in done.stdout
    assert "x\n" in done.stdout  # the ratio column
