"""Tags through Spark: the ``tag`` column of reads, the ``tags`` option, and writes that take a ``tag`` column."""

from __future__ import annotations

import contextlib
import os
import re
import struct
from collections.abc import Iterator

import anyio
import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import EqualTo, GreaterThan, In
from support.cli import flip_byte

import adiskq
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name
from adiskq._storage.columns import RawCursor
from adiskq._storage.stream import StreamReader
from adiskq.spark._arrow import run_to_batch
from adiskq.spark._reader import pushed_tags


def push_tagged(path: str, count: int, tag_of: dict[int, str | None] | None = None) -> list[str | None]:
    tags = [(None if i % 3 == 2 else ("created", "paid")[i % 3]) for i in range(count)]

    async def push() -> None:
        async with adiskq.Producer(path, partitions=2) as producer:
            await producer.push_many([adiskq.Record(b"v%d" % i, key=f"k{i % 2}", tag=tags[i]) for i in range(count)])

    anyio.run(push)
    return tags


def test_the_arrow_batches_carry_each_messages_tag(stream_path: str) -> None:
    """Every Arrow path (uniform, general, with headers) gives the tag column the messages' tags."""

    async def push() -> None:
        async with adiskq.Producer(stream_path) as producer:
            await producer.push_many([adiskq.Record(b"same", key=b"k") for _ in range(10)])  # the uniform path
            await producer.push_many([adiskq.Record(b"v", key=b"k", tag="t") for _ in range(10)])
            await producer.push(b"h", key=b"k", headers={"a": b"1"}, tag="with-headers")
            await producer.push(b"plain-but-longer", key=b"k")

    anyio.run(push)
    reader = StreamReader.open(stream_path).partition(0)
    tags: list[str | None] = []
    with RawCursor(reader, 0) as cursor:
        while (run := cursor.read(10)) is not None:
            batch = run_to_batch(run, max_record_bytes=2**20)
            assert batch.schema.field("tag").type == pa.string()
            tags += batch.column("tag").to_pylist()
    assert tags == [None] * 10 + ["t"] * 10 + ["with-headers", None]


def test_a_read_has_a_tag_column_and_the_tags_option_filters(spark: SparkSession, stream_path: str) -> None:
    """The tag column holds each message's tag (null for none); option tags=a,b keeps those tags only."""
    tags = push_tagged(stream_path, 60)
    everything = spark.read.format("adiskq").load(stream_path).collect()
    assert sorted((bytes(r.value), r.tag) for r in everything) == sorted((b"v%d" % i, t) for i, t in enumerate(tags))
    paid = spark.read.format("adiskq").option("tags", "paid").load(stream_path).collect()
    assert sorted(bytes(r.value) for r in paid) == sorted(b"v%d" % i for i, t in enumerate(tags) if t == "paid")
    both = spark.read.format("adiskq").option("tags", "paid, created").load(stream_path).where("tag = 'created'")
    assert both.count() == tags.count("created")


def test_a_bad_tags_option_is_refused(spark: SparkSession, stream_path: str) -> None:
    """tags= needs at least one valid tag."""
    push_tagged(stream_path, 3)
    with pytest.raises(PySparkException, match="option tags"):
        spark.read.format("adiskq").option("tags", " , ").load(stream_path).collect()


def test_a_write_takes_a_tag_column(spark: SparkSession, stream_path: str) -> None:
    """A DataFrame's string 'tag' column becomes each message's tag (null: none)."""
    df = spark.createDataFrame([("a", "created"), ("b", None)], "value string, tag string")
    df.write.format("adiskq").mode("append").save(stream_path)
    assert sorted((m.value, m.tag) for m in (adiskq.read(stream_path, 0, o) for o in range(2))) == [
        (b"a", "created"),
        (b"b", None),
    ]


# -- the filters tag = ... and tag IN (...) pushed down to the source --------------------------------

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@contextlib.contextmanager
def filter_pushdown(spark: SparkSession, enabled: bool) -> Iterator[None]:
    before = spark.conf.get(PUSHDOWN, "false")
    spark.conf.set(PUSHDOWN, "true" if enabled else "false")
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN, before)


def push_rare_tags(path: str, count: int) -> list[str]:
    """One partition, 20 tags taking turns (a wanted one is 5%: its records are read one by one)."""
    tags = [f"t{i % 20}" for i in range(count)]

    async def push() -> None:
        async with adiskq.Producer(path) as producer:
            await producer.push_many([adiskq.Record(b"v%d" % i, key=b"k", tag=tags[i]) for i in range(count)])

    anyio.run(push)
    return tags


def damage_record(path: str, offset: int) -> None:
    """Flip the last byte of a record's value: reading that record fails its CRC check."""
    index = os.path.join(path, PARTS_DIR, partition_dir_name(0), f"{0:020d}.index")
    with open(index, "rb") as file:
        file.seek(offset * 24)
        found, position, size = struct.unpack("<QQQ", file.read(24))
    assert found == offset
    flip_byte(os.path.join(path, PARTS_DIR, partition_dir_name(0), f"{0:020d}.data"), position + size - 1)


def rows(frame: DataFrame) -> list[tuple[int, bytes, str | None]]:
    return sorted((r.offset, bytes(r.value), r.tag) for r in frame.collect())


def pushing(spark: SparkSession, path: str) -> DataFrame:
    """A read that offers Spark to apply its tag filters."""
    return spark.read.format("adiskq").option("pushFilters", "true").load(path)


@pytest.mark.parametrize("condition", ["tag = 't3'", "tag IN ('t3', 't7')", "tag IN ('t3', 't7') AND tag = 't7'"])
def test_a_pushed_tag_filter_gives_the_rows_spark_would_and_reads_only_their_records(
    spark: SparkSession, stream_path: str, condition: str
) -> None:
    """With filter pushdown on, the source applies the tag filter (it is gone from Spark's Filter in
    the plan) and reads only the records of those tags: a damaged record of another tag is never
    read, while the same query without pushdown reads it and fails."""
    tags = push_rare_tags(stream_path, 400)
    expected = rows(spark.read.format("adiskq").load(stream_path).where(condition))
    assert expected
    assert {tag for _, _, tag in expected} <= {"t3", "t7"}
    damage_record(stream_path, tags.index("t11"))
    with filter_pushdown(spark, True):
        frame = pushing(spark, stream_path).where(condition)
        assert not spark_filters_tags(frame)
        assert rows(frame) == expected
        with pytest.raises(PySparkException, match="CRC-32C"):
            spark.read.format("adiskq").load(stream_path).where(condition).collect()  # not offered: Spark filters


def spark_filters_tags(frame: DataFrame) -> bool:
    """Whether Spark compares the tag column itself (``tag#7 = t1``, ``tag#7 IN (t1,t2)``) in the
    query's physical plan, or left that to the source."""
    plan: str = frame._jdf.queryExecution().executedPlan().toString()
    return re.search(r"tag#\d+ (=|IN) ", plan) is not None


def test_with_pushdown_off_spark_filters_and_the_rows_are_the_same(spark: SparkSession, stream_path: str) -> None:
    """Pushdown off (Spark's default): Spark applies the filter itself, with the same rows; asking
    for pushFilters then is refused by Spark with what to set."""
    tags = push_rare_tags(stream_path, 100)
    with filter_pushdown(spark, False):
        frame = spark.read.format("adiskq").load(stream_path).where("tag IN ('t1', 't2')")
        assert spark_filters_tags(frame)
        assert rows(frame) == sorted((i, b"v%d" % i, t) for i, t in enumerate(tags) if t in {"t1", "t2"})
        with pytest.raises(PySparkException, match=r"spark\.sql\.python\.filterPushdown\.enabled"):
            pushing(spark, stream_path).where("tag = 't1'").collect()


def test_pushed_filters_and_the_tags_option_keep_the_tags_in_both(spark: SparkSession, stream_path: str) -> None:
    """The tags option and a pushed filter together: only the tags in both; none in both: no rows;
    a value no message can carry as a tag, or another column's filter, is left to Spark."""
    tags = push_rare_tags(stream_path, 100)
    with filter_pushdown(spark, True):
        both = spark.read.format("adiskq").option("tags", "t1,t2").option("pushFilters", "true").load(stream_path)
        assert rows(both.where("tag IN ('t2', 't3')")) == [(i, b"v%d" % i, t) for i, t in enumerate(tags) if t == "t2"]
        assert rows(both.where("tag = 't3'")) == []
        assert rows(pushing(spark, stream_path).where("tag = ''")) == []
        got = rows(pushing(spark, stream_path).where("tag = 't4' AND offset < 50"))
        assert got == [(4, b"v4", "t4"), (24, b"v24", "t4"), (44, b"v44", "t4")]


def test_pushfilters_is_for_batch_reads(spark: SparkSession, stream_path: str) -> None:
    """A streaming read refuses the option, saying what to use instead."""
    push_rare_tags(stream_path, 3)
    with pytest.raises(PySparkException, match="option pushFilters is for batch reads"):
        spark.readStream.format("adiskq").option("pushFilters", "true").load(stream_path).writeStream.format(
            "memory"
        ).queryName("pushed").start().processAllAvailable()


def test_only_tag_equality_and_membership_are_taken() -> None:
    """pushed_tags: EqualTo and In on the tag column with tags a message can carry; nothing else."""
    assert pushed_tags(EqualTo(("tag",), "paid")) == {"paid"}
    assert pushed_tags(In(("tag",), ("a", None, "b"))) == {"a", "b"}
    assert pushed_tags(EqualTo(("key",), "paid")) is None
    assert pushed_tags(EqualTo(("tag",), 5)) is None
    assert pushed_tags(EqualTo(("tag",), "")) is None
    assert pushed_tags(In(("tag",), (None,))) is None
    assert pushed_tags(In(("tag",), ("x" * 256,))) is None
    assert pushed_tags(GreaterThan(("tag",), "a")) is None
