"""Spark batch reads of an adiskq stream, beside Spark reading the same rows from Parquet, in one run.

The same rows (100-byte values, 12-byte keys, timestamps, no headers) are written once as an adiskq
stream (2 partitions, written through the storage layer) and once as Parquet (snappy, one file per
partition, with the same six columns). A third peer, ``null-source``, is a Python data source that
reads nothing: it hands Spark one ready-made Arrow batch of the same schema over and over, in as
many tasks. It measures what Spark's Python data source machinery alone costs (moving Arrow batches
from Python workers into the JVM, and turning them into rows there): no Python data source can read
faster. Spark runs on ``local[2]`` and reads each the same ways:

* ``scan``: every column of every row materialised (``df.write.format("noop")``), the whole cost of
  a read;
* ``sum``: ``sum(length(value))``, which lets Parquet skip the columns it does not need.

It reports the median rows per second of each, the ratios adiskq / Parquet and adiskq / null-source,
and the CPU time the
query took in Spark's processes (the JVM and its Python workers) per row: on a machine shared with
other work, wall-clock rates move with the load, while CPU time per row mostly does not.

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

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

import adiskq.spark

# As the README tells users: Spark's Python workers run this interpreter (the venv's, which has
# pyarrow and adiskq), not the first `python3` on PATH. Set before any session is made.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter
from adiskq.spark import SCHEMA
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


class NullReader(DataSourceReader):
    """Yields one prepared batch again and again: Spark's own cost of a Python data source."""

    def __init__(self, rows: int, tasks: int) -> None:
        self.rows = rows
        self.tasks = tasks

    def partitions(self) -> list[InputPartition]:
        share = -(-self.rows // self.tasks)
        return [InputPartition(min(share, self.rows - i * share)) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> object:
        rows: int = partition.value
        size = min(65_536, rows)
        value_offsets = np.arange(0, VALUE_BYTES * size + 1, VALUE_BYTES, dtype=np.int32)
        key_offsets = np.arange(0, 12 * size + 1, 12, dtype=np.int32)
        columns = [
            pa.array(np.zeros(size, np.int32)),
            pa.array(np.arange(size, dtype=np.int64)),
            pa.array(np.arange(size, dtype=np.int64), pa.timestamp("us", tz="UTC")),
            pa.Array.from_buffers(pa.binary(), size, [None, pa.py_buffer(key_offsets), pa.py_buffer(b"k" * 12 * size)]),
            pa.Array.from_buffers(
                pa.binary(), size, [None, pa.py_buffer(value_offsets), pa.py_buffer(os.urandom(VALUE_BYTES * size))]
            ),
            pa.MapArray.from_arrays(
                pa.array(np.zeros(size + 1, np.int32)),
                pa.array([], pa.string()),
                pa.array([], pa.binary()),
                type=ARROW_SCHEMA.field("headers").type,
            ),
            pa.nulls(size, pa.string()),  # tag
        ]
        batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        for start in range(0, rows, size):
            yield batch.slice(0, min(size, rows - start))


class NullSource(DataSource):
    """``spark.read.format("adiskq_bench_null").option("rows", N).option("tasks", T)``."""

    @classmethod
    def name(cls) -> str:
        return "adiskq_bench_null"

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> NullReader:
        return NullReader(int(self.options["rows"]), int(self.options["tasks"]))


def spark_cpu_seconds() -> float:
    """CPU seconds used so far by this process's children: Spark's JVM and its Python workers."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:  # a worker that just ended
            continue
        total += times.user + times.system
    return total


def timed(action: Callable[[], object], rows: int) -> tuple[float, float]:
    """Rows per second (wall clock) and CPU nanoseconds per row in Spark's processes."""
    cpu_before = spark_cpu_seconds()
    started = time.perf_counter()
    action()
    elapsed = time.perf_counter() - started
    return rows / elapsed, (spark_cpu_seconds() - cpu_before) / rows * 1e9


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

    spark.dataSource.register(NullSource)
    adiskq_df = spark.read.format("adiskq").load(stream)
    sources = {
        "adiskq": adiskq_df,
        "parquet": spark.read.parquet(parquet),
        "null-source": spark.read.format("adiskq_bench_null")
        .option("rows", str(rows))
        .option("tasks", str(adiskq_df.rdd.getNumPartitions()))
        .load(),
    }
    expected_length = rows * VALUE_BYTES
    workloads = {name: {"scan": scan(df), "sum": total_length(df, expected_length)} for name, df in sources.items()}
    for actions in workloads.values():  # warm up: the first query starts the Python workers and the JIT
        for action in actions.values():
            action()
    rates: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):  # interleaved, so a busy moment of the machine hits both peers
        for name, actions in workloads.items():
            for workload, action in actions.items():
                rate, cpu_ns = timed(action, rows)
                rates.setdefault((name, workload), []).append(rate)
                cpu.setdefault((name, workload), []).append(cpu_ns)

    def median(table: dict[tuple[str, str], list[float]], name: str, workload: str) -> float:
        return statistics.median(table[name, workload])

    medians = {
        workload: (median(rates, "adiskq", workload), median(rates, "parquet", workload))
        for workload in ("scan", "sum")
    }
    load = os.getloadavg()[0]
    print(f"Spark {spark.version}, local[2], {os.cpu_count()} CPUs, median of {repeat}, load average {load:.1f}")
    print("rows/s (wall clock), and CPU ns per row in Spark's JVM and Python workers:")
    names = list(sources)
    print(f"{'workload':<10}" + "".join(f"{name + ' rows/s':>20}" for name in names), end="")
    print(f"{'adiskq/parquet':>16}{'adiskq/null-source':>20}" + "".join(f"{name + ' CPU':>17}" for name in names))
    for workload in ("scan", "sum"):
        row = {name: median(rates, name, workload) for name in names}
        line = f"{workload:<10}" + "".join(f"{row[name]:>20,.0f}" for name in names)
        line += f"{row['adiskq'] / row['parquet']:>16.2f}{row['adiskq'] / row['null-source']:>20.2f}"
        line += "".join(f"{median(cpu, name, workload):>17,.0f}" for name in names)
        print(line)
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
        .config("spark.ui.showConsoleProgress", "false")
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
