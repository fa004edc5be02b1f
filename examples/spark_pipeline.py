"""Click events through adiskq and Spark Structured Streaming, end to end.

1. An ``adiskq.Producer`` (async) appends click events to the stream ``events``: key = the user,
   value = JSON. In a real service it runs in the web server, while the Spark job runs elsewhere.
2. A Structured Streaming job reads ``events``, counts the clicks of each user in each minute, and
   appends each count to the stream ``counts`` once the minute is over (a 30-second watermark: a
   minute closes when a click 30 seconds past its end has been seen). The sink is exactly once per
   micro-batch: stop the job at any point and start it again, and no count is appended twice.
3. A batch read of ``counts`` shows them: one message per user and closed minute.

    python examples/spark_pipeline.py [FOLDER]     # needs Java 17 and adiskq[spark]
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile

import anyio
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import adiskq
import adiskq.spark

# As the README tells users: Spark's Python workers run this interpreter (the venv's, which has
# pyarrow and adiskq), not the first `python3` on PATH. Set before any session is made.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

START = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
PAGES = ["/", "/pricing", "/docs", "/blog"]


def make_events(count: int, users: int = 5) -> list[tuple[str, str, dt.datetime]]:
    """``count`` click events over a few minutes: ``(user, JSON, timestamp)``."""
    events = []
    for i in range(count):
        user = f"user-{i * 7 % users}"
        when = START + dt.timedelta(seconds=i * 3)
        events.append((user, json.dumps({"user": user, "page": PAGES[i % len(PAGES)]}), when))
    return events


async def produce(events_path: str, events: list[tuple[str, str, dt.datetime]]) -> None:
    """The producer: append the events to a 3-partition stream (created on first open)."""
    async with adiskq.Producer(events_path, partitions=3) as producer:
        await producer.push_many(
            adiskq.Record(value.encode(), key=user, timestamp=when) for user, value, when in events
        )


def count_per_minute(spark: SparkSession, events_path: str, counts_path: str, checkpoint: str) -> None:
    """The streaming job: clicks per user and closed minute, appended to ``counts``; runs until caught up."""
    events = (
        spark.readStream.format("adiskq")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "100")  # several micro-batches, as a long-running job would see
        .load(events_path)
    )
    counts = (
        events.withWatermark("timestamp", "30 seconds").groupBy(F.col("key"), F.window("timestamp", "1 minute")).count()
    )
    query = (
        counts.select(
            F.col("key"),  # counts of a user go to one partition of ``counts``, in order
            F.to_json(
                F.struct(
                    F.col("key").cast("string").alias("user"),
                    F.date_format("window.start", "yyyy-MM-dd'T'HH:mm").alias("minute"),
                    F.col("count"),
                )
            ).alias("value"),
        )
        .writeStream.format("adiskq")
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(counts_path)
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the streaming job failed: {query.exception()}")


def read_counts(spark: SparkSession, counts_path: str) -> list[tuple[str, str, int]]:
    """``(user, minute, clicks)`` of every message in ``counts``, from a batch read."""
    schema = "user string, minute string, count long"
    rows: DataFrame = (
        spark.read.format("adiskq")
        .load(counts_path)
        .select(F.from_json(F.col("value").cast("string"), schema).alias("c"))
        .select("c.*")
    )
    return sorted((r.user, r.minute, r["count"]) for r in rows.collect())


def run(spark: SparkSession, folder: str, event_count: int = 200) -> list[tuple[str, str, int]]:
    """Produce events, run the streaming job, and return what it appended to ``counts``."""
    adiskq.spark.register(spark)
    events_path, counts_path = os.path.join(folder, "events"), os.path.join(folder, "counts")
    anyio.run(produce, events_path, make_events(event_count))
    count_per_minute(spark, events_path, counts_path, os.path.join(folder, "checkpoint"))
    return read_counts(spark, counts_path)


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="adiskq-spark-")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("adiskq-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        counts = run(spark, folder)
    finally:
        spark.stop()
    print(f"streams in {folder}")
    for user, minute, clicks in counts:
        print(f"{minute}  {user}  {clicks:3d} clicks")


if __name__ == "__main__":
    main()
