"""Batch writes through Spark: ``df.write.format("adiskq").mode("append").save(path)``."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from support.spark import placed_correctly, read_all

from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamReader, StreamWriter


def append(spark: SparkSession, path: str, data: list[tuple[object, ...]], ddl: str, **options: str) -> None:
    spark.createDataFrame(data, ddl).write.format("adiskq").mode("append").options(**options).save(path)


def test_a_write_creates_the_stream_with_the_partitions_asked(spark: SparkSession, stream_path: str) -> None:
    """A missing stream is created by the write, with partitionCount partitions."""
    append(spark, stream_path, [("k", "v")], "key string, value string", partitionCount="3")
    assert StreamReader.open(stream_path).partition_count == 3


def test_rows_are_appended_by_key_with_values_as_utf8(spark: SparkSession, stream_path: str) -> None:
    """Every row is appended once, in the partition FNV-1(key) picks, string values as UTF-8."""
    data = [(f"user-{i % 7}", f"event-{i}-é") for i in range(200)]
    append(spark, stream_path, data, "key string, value string", partitionCount="4")
    messages = read_all(stream_path)
    assert sorted((bytes(m.key).decode(), bytes(m.value).decode()) for m in messages) == sorted(data)
    assert placed_correctly(messages, 4)


def test_rows_of_one_key_keep_their_order(spark: SparkSession, stream_path: str) -> None:
    """Rows of a key from one task land in the order they came."""
    data = [("same", i.to_bytes(2, "big")) for i in range(100)]
    spark.createDataFrame(data, "key string, value binary").coalesce(1).write.format("adiskq").mode("append").save(
        stream_path
    )
    assert [bytes(m.value) for m in read_all(stream_path)] == [value for _, value in data]


def test_rows_without_a_key_get_random_keys(spark: SparkSession, stream_path: str) -> None:
    """A null or missing key becomes a random 8-byte key, as Producer.push gives, spreading the rows."""
    append(spark, stream_path, [(None, b"a")], "key binary, value binary", partitionCount="4")
    append(spark, stream_path, [(b"x%d" % i,) for i in range(100)], "value binary")
    messages = read_all(stream_path)
    assert all(len(m.key) == 8 for m in messages)
    assert len({bytes(m.key) for m in messages}) == 101
    assert len({m.partition for m in messages}) == 4
    assert placed_correctly(messages, 4)


def test_headers_and_timestamps_are_kept(spark: SparkSession, stream_path: str) -> None:
    """A headers map (string or binary values) and a timestamp column are stored with each message."""
    when = dt.datetime(2026, 3, 4, 5, 6, 7, 891_011, tzinfo=dt.UTC)
    spark.createDataFrame(
        [(b"v", {"type": "click", "id": "7"}, when)], "value binary, headers map<string,string>, timestamp timestamp"
    ).write.format("adiskq").mode("append").save(stream_path)
    (message,) = read_all(stream_path)
    assert dict(message.headers) == {"type": b"click", "id": b"7"}
    assert message.timestamp == when


def test_rows_without_a_timestamp_get_the_time_of_the_write(spark: SparkSession, stream_path: str) -> None:
    """A message's timestamp defaults to when the task encoded it."""
    before = dt.datetime.now(dt.UTC)
    append(spark, stream_path, [("v",)], "value string")
    (message,) = read_all(stream_path)
    assert before - dt.timedelta(seconds=1) <= message.timestamp <= dt.datetime.now(dt.UTC)


def test_what_a_read_gives_can_be_written_back(spark: SparkSession, stream_path: str) -> None:
    """A DataFrame read from adiskq (with partition and offset columns) copies into another stream."""
    append(spark, stream_path, [(f"k{i}", f"v{i}") for i in range(30)], "key string, value string", partitionCount="2")
    copy = f"{stream_path}-copy"
    df = spark.read.format("adiskq").load(stream_path)
    df.write.format("adiskq").mode("append").option("partitionCount", "2").save(copy)
    original = {(m.partition, bytes(m.key), bytes(m.value)) for m in read_all(stream_path)}
    assert {(m.partition, bytes(m.key), bytes(m.value)) for m in read_all(copy)} == original


def test_a_dataframe_without_value_is_refused(spark: SparkSession, stream_path: str) -> None:
    """No value column: the write fails before any task runs, naming what is needed."""
    with pytest.raises(PySparkException, match="needs a 'value' column"):
        append(spark, stream_path, [("k",)], "key string")


def test_a_value_of_the_wrong_type_is_refused(spark: SparkSession, stream_path: str) -> None:
    """value must be binary or string."""
    with pytest.raises(PySparkException, match="the 'value' column is int; make it binary or string"):
        append(spark, stream_path, [(1,)], "value int")


def test_a_null_value_fails_the_write(spark: SparkSession, stream_path: str) -> None:
    """A null value is refused, with what to write instead."""
    with pytest.raises(PySparkException, match="null 'value'"):
        append(spark, stream_path, [("k", None)], "key string, value string")


def test_overwrite_is_refused_because_streams_are_append_only(spark: SparkSession, stream_path: str) -> None:
    """mode("overwrite") fails and says to append."""
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match=r"append-only: write with .mode\('append'\)"):
        df.write.format("adiskq").mode("overwrite").save(stream_path)


def test_a_locked_stream_fails_the_task_naming_the_holder(spark: SparkSession, stream_path: str) -> None:
    """While another producer holds the stream, the write waits lockTimeout, then fails naming pid and host."""
    holder = StreamWriter.open(stream_path, partitions=1)
    try:
        with pytest.raises(PySparkException, match=rf"is locked \(held by pid {os.getpid()} on host"):
            append(spark, stream_path, [("v",)], "value string", lockTimeout="0.2")
    finally:
        holder.close()
    assert read_all(stream_path) == []


def test_tasks_take_the_lock_in_turn(spark: SparkSession, stream_path: str) -> None:
    """Many tasks writing one stream at once all succeed: each waits for the lock in turn."""
    df = spark.range(0, 2_000, numPartitions=8).selectExpr("cast(id as string) as key", "cast(id as string) as value")
    df.write.format("adiskq").mode("append").option("partitionCount", "2").save(stream_path)
    assert sorted(int(bytes(m.value)) for m in read_all(stream_path)) == list(range(2_000))


def test_a_write_goes_in_beside_a_live_shared_producer(spark: SparkSession, stream_path: str) -> None:
    """A batch write appends while a service's shared producer is open and appending too."""
    live = StreamWriter.open(stream_path, partitions=2, shared=True)
    try:
        append(spark, stream_path, [(f"k{i}", f"spark-{i}") for i in range(100)], "key string, value string")
        with live.appending([0]):
            live.partitions[0].append([encode_record(b"service", b"k", 1)], [1])
    finally:
        live.close()
    values = sorted(bytes(m.value).decode() for m in read_all(stream_path))
    assert values == sorted([f"spark-{i}" for i in range(100)] + ["service"])


def rows(*rows: str) -> str:
    """A Spark SQL query of ``rows``, each ``(value, key, tag, timestamp, headers)``."""
    return f"select * from values {', '.join(rows)} as t(value, key, tag, timestamp, headers)"


SOUND_ROWS = (
    "('a', 'k1', 't', timestamp'2020-01-01', map('h', 'x'))",
    "('b', 'k2', 't', timestamp'2020-01-01', map('h', 'x'))",
)
FIXED_ROW = "('c', 'k3', 't', timestamp'2020-01-01', map('h', 'x'))"
BAD_ROWS = {
    "null value": ("(null, 'k3', 't', timestamp'2020-01-01', map('h', 'x'))", "null 'value'"),
    "empty tag": ("('c', 'k3', '', timestamp'2020-01-01', map('h', 'x'))", "tag"),
    "overlong tag": ("('c', 'k3', repeat('t', 256), timestamp'2020-01-01', map('h', 'x'))", "tag"),
    "null header value": ("('c', 'k3', 't', timestamp'2020-01-01', map('h', null))", "header 'h' of a row is null"),
    "timestamp past 2262": ("('c', 'k3', 't', timestamp'2300-01-01', map('h', 'x'))", "timestamp"),
    "value above the limit": (
        "(repeat('x', 2000), 'k3', 't', timestamp'2020-01-01', map('h', 'x'))",
        "max_message_bytes",
    ),
}


@pytest.mark.parametrize("bad", list(BAD_ROWS), ids=list(BAD_ROWS))
def test_a_write_with_one_bad_row_appends_nothing_and_a_rerun_writes_each_row_once(
    spark: SparkSession, stream_path: str, bad: str
) -> None:
    """A bad row in one task fails the write before any task's rows reach the stream; fixed, it writes each row once."""
    StreamWriter.open(stream_path, partitions=1, max_message_bytes=1024).close()
    bad_row, error = BAD_ROWS[bad]
    sound = spark.sql(rows(*SOUND_ROWS))
    # The sound rows' tasks run (and succeed) beside the bad row's.
    df = sound.union(spark.sql(rows(bad_row)))
    assert df.rdd.getNumPartitions() >= 2
    with pytest.raises(PySparkException, match=error):
        df.write.format("adiskq").mode("append").save(stream_path)
    assert read_all(stream_path) == []
    assert "spark-staging" not in os.listdir(stream_path)  # the failed job's staged rows are gone
    sound.union(spark.sql(rows(FIXED_ROW))).write.format("adiskq").mode("append").save(stream_path)
    assert sorted(bytes(m.value) for m in read_all(stream_path)) == [b"a", b"b", b"c"]
