"""Tags through Spark: the ``tag`` column of reads, the ``tags`` option, and writes that take a ``tag`` column."""

from __future__ import annotations

import anyio
import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import adiskq
from adiskq._storage.columns import RawCursor
from adiskq._storage.stream import StreamReader
from adiskq.spark._arrow import run_to_batch


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
