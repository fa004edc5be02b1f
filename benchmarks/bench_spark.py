"""Spark batch reads of an adiskq stream, beside Spark reading the same rows from Parquet and through
Spark's own Kafka connector (``format("kafka")``) from the Kafka gateway and from Apache Kafka, in one
run.

The same rows (100-byte values, 12-byte keys, timestamps, no headers) are written once as an adiskq
stream (2 partitions, written through the storage layer) and once as Parquet (snappy, one file per
partition, with the same six columns). A third peer, ``null-source``, is a Python data source that
reads nothing: it hands Spark one ready-made Arrow batch of the same schema over and over, in as
many tasks. It measures what Spark's Python data source machinery alone costs (moving Arrow batches
from Python workers into the JVM, and turning them into rows there): no Python data source can read
faster. Two more peers read the same rows with Spark's Kafka connector (spark-sql-kafka-0-10 at
the installed PySpark's version, the test suite's pinned jars), the job that reads any Kafka topic:
``kafka-gateway`` from the Kafka gateway (``adiskq serve`` in a process of its own, serving the very
stream the adiskq peer reads), ``apache-kafka`` from one Apache Kafka node on this machine (the test
suite's, 4.4 KRaft, ``-Xmx512m``; a topic of 2 partitions produced with the same keys, values and
partitions). Spark runs on ``local[2]`` and reads each the same ways:

* ``scan``: every column of every row materialised (``df.write.format("noop")``), the whole cost of
  a read;
* ``sum``: ``sum(length(value))``, which lets Parquet skip the columns it does not need.

It reports the median rows per second of each, each peer's ratio to adiskq's, and the CPU time the
query took in Spark's processes (the JVM and its Python workers) per row: on a machine shared with
other work, wall-clock rates move with the load, while CPU time per row mostly does not. (The Kafka
peers' brokers run outside Spark: their CPU is not in that column.)

    python benchmarks/bench_spark.py                # 10 million rows, medians of 5, all five peers
    python benchmarks/bench_spark.py --no-kafka     # adiskq, Parquet and null-source only
    python benchmarks/bench_spark.py --quick        # 20,000 rows, once: checks that it all runs
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

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

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")  # the Kafka jars' and Apache Kafka's support
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


def produce_rows(bootstrap: str, topic: str, rows: int, stream: str) -> None:
    """The stream's rows (keys, values, partitions, millisecond timestamps) into a new topic of
    Apache Kafka, every one acknowledged."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the creation is answered
    # The rows are timestamped in January 2026: Kafka's default retention (7 days) would delete them
    # at its next check (every 5 minutes) while the benchmark runs.
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"retention.ms": "-1"})])[topic].result(60)
    failures: list[object] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    value = adiskq.read(stream, 0, 0).value  # write_stream's one value
    for partition in range(PARTITIONS):
        count = rows // PARTITIONS + (partition < rows % PARTITIONS)
        for i in range(count):
            while True:
                try:
                    producer.produce(
                        topic,
                        value,
                        KEYS[i % 1000],
                        partition=partition,
                        timestamp=(START_NS + i * 1000) // 1_000_000,
                        on_delivery=lambda error, _: failures.append(error) if error else None,
                    )
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
    if producer.flush(300) or failures:
        raise RuntimeError(f"Apache Kafka did not take every row: {failures[:3]}")


def kafka_source(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """Spark's own Kafka connector reading ``topic`` whole (a batch read)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )


def run(
    spark: SparkSession, rows: int, repeat: int, root: str, kafka: dict[str, str] | None = None
) -> dict[str, dict[str, float]]:
    """Write the data under ``root``, time every peer, print the table; workload -> peer -> median
    rows/s. ``kafka``: the Kafka connector's peers, by name, as ``bootstrap`` of a Kafka gateway
    serving ``root`` (``kafka-gateway``) or of Apache Kafka (``apache-kafka``); the session must
    carry the connector's jars then."""
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
    for name, bootstrap in (kafka or {}).items():
        if name == "kafka-gateway":  # the gateway serves root: the topic is the adiskq peer's stream
            sources[name] = kafka_source(spark, bootstrap, "stream")
        else:
            topic = f"bench-spark-{os.getpid()}-{time.monotonic_ns()}"  # a node may outlive this run
            started = time.perf_counter()
            produce_rows(bootstrap, topic, rows, stream)
            print(f"{rows:,} rows produced to {name} in {time.perf_counter() - started:.1f} s")
            sources[name] = kafka_source(spark, bootstrap, topic)
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

    names = list(sources)
    medians = {workload: {name: median(rates, name, workload) for name in names} for workload in ("scan", "sum")}
    load = os.getloadavg()[0]
    print(f"Spark {spark.version}, local[2], {os.cpu_count()} CPUs, median of {repeat}, load average {load:.1f}")
    print("rows/s (wall clock), each peer's ratio to adiskq's, and CPU ns per row in Spark's JVM and Python workers:")
    print(f"| workload | {' | '.join(f'{name} rows/s' for name in names)} | {' | '.join(f'{n} CPU' for n in names)} |")
    print("|---" * (1 + 2 * len(names)) + "|")
    for workload in ("scan", "sum"):
        row = medians[workload]
        cells = [f"{row['adiskq']:,.0f}"] + [f"{row[n]:,.0f} ({row[n] / row['adiskq']:.2f}×)" for n in names[1:]]
        cpu_cells = [f"{median(cpu, name, workload):,.0f}" for name in names]
        print(f"| {workload} | {' | '.join(cells)} | {' | '.join(cpu_cells)} |")
    print("adiskq/parquet: " + ", ".join(f"{w} {medians[w]['adiskq'] / medians[w]['parquet']:.2f}" for w in medians))
    sys.stdout.flush()
    return medians


def kafka_class_path() -> str:
    """Spark's Kafka connector's jars at the installed PySpark's version, as the test suite pins
    them (``scripts/fetch_kafka_jars.py`` fetches them)."""
    import pyspark

    sys.path.insert(0, TESTS)
    from support.kafka_jars import class_path

    return ",".join(str(jar) for jar in class_path(f"spark-kafka-{pyspark.__version__}"))


@contextlib.contextmanager
def kafka_peers(root: str) -> Iterator[dict[str, str]]:
    """The Kafka gateway serving ``root`` (``adiskq serve``, a process of its own) and one Apache
    Kafka node (the test suite's own, started for this run and stopped after it): name -> bootstrap."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, TESTS)
    from bench_kafka import start_gateway, stop_gateway
    from support import kafka_broker as kafka_broker_support

    os.makedirs(root, exist_ok=True)
    gateway, port = start_gateway(root)
    kafka_broker_support.claim_run_folder()
    try:
        print(f"{time.strftime('%H:%M:%S')} starting Apache Kafka ...", file=sys.stderr, flush=True)
        broker = kafka_broker_support.shared_broker()
        yield {"kafka-gateway": f"127.0.0.1:{port}", "apache-kafka": broker.bootstrap}
    finally:
        kafka_broker_support.release_run_folder()
        stop_gateway(gateway)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, once: checks that the benchmark runs")
    parser.add_argument("--dir", default=None, help="where to put the data (default: a temporary folder)")
    parser.add_argument("--no-kafka", action="store_true", help="leave out the Kafka connector's two peers")
    args = parser.parse_args()
    rows, repeat = (QUICK_ROWS, 1) if args.quick else (args.rows, args.repeat)
    root = tempfile.mkdtemp(prefix="bench-spark-", dir=args.dir)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("adiskq-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if not args.no_kafka:
        builder = builder.config("spark.jars", kafka_class_path())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with contextlib.ExitStack() as stack:
            kafka = None if args.no_kafka else stack.enter_context(kafka_peers(root))
            run(spark, rows, repeat, root, kafka)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
