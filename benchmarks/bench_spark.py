"""Spark batch reads of an adiskq stream, beside Spark reading the same rows from Parquet, in one run.

The same rows (100-byte values, 12-byte keys, timestamps, no headers) are written once as an adiskq
stream (2 partitions, written through the storage layer) and once as Parquet (snappy, one file per
partition, with the same six columns). Spark runs on ``local[2]`` and reads each the same ways:

* ``scan``: every column of every row materialised (``df.write.format("noop")``), the whole cost of
  a read;
* ``sum``: ``sum(length(value))``, which lets Parquet skip the columns it does not need.

It reports the median rows per second of each and the ratio adiskq / Parquet.

    python benchmarks/bench_spark.py                # 10 million rows, medians of 5
    python benchmarks/bench_spark.py --quick        # 20,000 rows, for the test suite
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

import adiskq.spark
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter
from adiskq.spark._arrow import ARROW_SCHEMA

VALUE_BYTES = 100
KEYS = [f"customer-{i:03d}".encode() for i in range(1000)]  # 12 bytes each
START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
PARTITIONS = 2
CHUNK = 100_000
QUICK_ROWS = 20_000


def write_stream(path: str, rows: int) -> None:
    """``rows`` messages over two partitions, through the storage layer (the fastest writer)."""
    value = os.urandom(VALUE_BYTES)
    writer = StreamWriter.open(path, partitions=PARTITIONS)
    try:
        for partition in range(PARTITIONS):
            count = rows // PARTITIONS + (partition < rows % PARTITIONS)
            for start in range(0, count, CHUNK):
                stamps = [START_NS + i * 1000 for i in range(start, min(count, start + CHUNK))]
                records = [encode_record(value, KEYS[i % 1000], stamp) for i, stamp in enumerate(stamps, start)]
                writer.partitions[partition].append(records, stamps)
    finally:
        writer.close()


def write_parquet(stream: str, path: str) -> None:
    """The stream's rows, read back through adiskq's Arrow path, as Parquet files."""
    from adiskq._sansio.codec import DEFAULT_MAX_RECORD_BYTES
    from adiskq._storage.columns import RawCursor
    from adiskq._storage.stream import StreamReader
    from adiskq.spark._arrow import run_to_batch

    os.makedirs(path)
    reader = StreamReader.open(stream)
    for partition in range(reader.partition_count):
        with (
            pq.ParquetWriter(os.path.join(path, f"part-{partition:05d}.parquet"), ARROW_SCHEMA) as out,
            RawCursor(reader.partition(partition), 0) as cursor,
        ):
            while (run := cursor.read(65_536)) is not None:
                out.write_batch(run_to_batch(run, max_record_bytes=DEFAULT_MAX_RECORD_BYTES))


def timed(action: Callable[[], object], rows: int) -> float:
    started = time.perf_counter()
    action()
    return rows / (time.perf_counter() - started)


def scan(df: DataFrame) -> Callable[[], object]:
    return lambda: df.write.format("noop").mode("overwrite").save()


def total_length(df: DataFrame, expected: int) -> Callable[[], object]:
    def run() -> None:
        got = df.selectExpr("sum(length(value))").collect()[0][0]
        if got != expected:
            raise AssertionError(f"sum(length(value)) is {got}, expected {expected}")

    return run


def run(spark: SparkSession, rows: int, repeat: int, root: str) -> dict[str, tuple[float, float]]:
    """Write the data under ``root``, time both peers, print the table; workload -> (adiskq, parquet) rows/s."""
    adiskq.spark.register(spark)
    stream, parquet = os.path.join(root, "stream"), os.path.join(root, "parquet")
    started = time.perf_counter()
    write_stream(stream, rows)
    write_parquet(stream, parquet)
    print(f"{rows:,} rows of {VALUE_BYTES}-byte values written in {time.perf_counter() - started:.1f} s")

    sources = {
        "adiskq": spark.read.format("adiskq").load(stream),
        "parquet": spark.read.parquet(parquet),
    }
    expected_length = rows * VALUE_BYTES
    workloads = {name: {"scan": scan(df), "sum": total_length(df, expected_length)} for name, df in sources.items()}
    for actions in workloads.values():  # warm up: the first query starts the Python workers and the JIT
        for action in actions.values():
            action()
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):  # interleaved, so a busy moment of the machine hits both peers
        for name, actions in workloads.items():
            for workload, action in actions.items():
                results.setdefault((name, workload), []).append(timed(action, rows))

    medians = {
        workload: (statistics.median(results["adiskq", workload]), statistics.median(results["parquet", workload]))
        for workload in ("scan", "sum")
    }
    print(f"Spark {spark.version}, local[2], {os.cpu_count()} CPUs, median of {repeat}")
    print(f"{'workload':<10}{'adiskq rows/s':>16}{'parquet rows/s':>17}{'adiskq/parquet':>16}")
    for workload, (ours, theirs) in medians.items():
        print(f"{workload:<10}{ours:>16,.0f}{theirs:>17,.0f}{ours / theirs:>16.2f}")
    sys.stdout.flush()
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, once: checks that the benchmark runs")
    parser.add_argument("--dir", default=None, help="where to put the data (default: a temporary folder)")
    args = parser.parse_args()
    rows, repeat = (QUICK_ROWS, 1) if args.quick else (args.rows, args.repeat)
    root = tempfile.mkdtemp(prefix="bench-spark-", dir=args.dir)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("adiskq-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        run(spark, rows, repeat, root)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
