"""Streaming reads: offsets as JSON, read limits, Trigger.AvailableNow, new data, latest offsets by stat."""

from __future__ import annotations

import json
import logging
import os
import pathlib

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows
from support.spark import delete_oldest_segment, fill, read_all

from adiskq import OffsetOutOfRangeError
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter
from adiskq.spark._options import ReadOptions
from adiskq.spark._reader import OffsetRange, read_range
from adiskq.spark._stream_reader import AdiskqStreamReader, LatestOffsets, _limit


def run_available_now(spark: SparkSession, source: str, checkpoint: str, **options: str) -> StreamingQuery:
    """Copy ``source``'s values into a memory table named after the checkpoint, until caught up."""
    name = "t_" + os.path.basename(checkpoint).replace("-", "_")
    query = (
        spark.readStream.format("adiskq")
        .options(**options)
        .load(source)
        .selectExpr("partition", "offset", "cast(value as string) as value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    return query


def table(spark: SparkSession, checkpoint: str) -> list[tuple[int, int, str]]:
    name = "t_" + os.path.basename(checkpoint).replace("-", "_")
    return sorted((r.partition, r.offset, r.value) for r in spark.table(name).collect())


def test_available_now_reads_what_is_there_and_stops(
    spark: SparkSession, stream_path: str, tmp_path: pathlib.Path
) -> None:
    """With startingOffsets=earliest, AvailableNow reads every message once and ends the query."""
    fill(stream_path, [4, 3])
    checkpoint = os.path.join(tmp_path, "ckpt-all")
    run_available_now(spark, stream_path, checkpoint, startingOffsets="earliest")
    assert table(spark, checkpoint) == [(0, i, f"v0-{i}") for i in range(4)] + [(1, i, f"v1-{i}") for i in range(3)]


def test_offsets_in_the_checkpoint_are_json_by_partition(
    spark: SparkSession, stream_path: str, tmp_path: pathlib.Path
) -> None:
    """The offset log holds {"0": next_offset, "1": next_offset} with string keys in partition order."""
    fill(stream_path, [2, 5])
    checkpoint = os.path.join(tmp_path, "ckpt-json")
    run_available_now(spark, stream_path, checkpoint, startingOffsets="earliest")
    with open(os.path.join(checkpoint, "offsets", "0")) as log:
        last_line = log.read().splitlines()[-1]
    assert last_line == '{"0": 2, "1": 5}'
    assert list(json.loads(last_line)) == ["0", "1"]


def test_max_records_per_trigger_bounds_each_micro_batch(
    spark: SparkSession, stream_path: str, tmp_path: pathlib.Path
) -> None:
    """Every micro-batch reads at most maxRecordsPerTrigger rows, AvailableNow included."""
    fill(stream_path, [12, 8])
    checkpoint = os.path.join(tmp_path, "ckpt-limit")
    query = run_available_now(spark, stream_path, checkpoint, startingOffsets="earliest", maxRecordsPerTrigger="6")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [6, 6, 6, 2]
    assert len(table(spark, checkpoint)) == 20


def test_a_restarted_query_reads_only_what_came_since(
    spark: SparkSession, stream_path: str, tmp_path: pathlib.Path
) -> None:
    """The default startingOffsets is latest; a restart goes on from the checkpoint, new data only."""
    fill(stream_path, [3])
    checkpoint = os.path.join(tmp_path, "ckpt-resume")
    target = os.path.join(tmp_path, "copy")

    def copy() -> None:
        query = (
            spark.readStream.format("adiskq")
            .load(stream_path)
            .select("key", "value")
            .writeStream.format("adiskq")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start(target)
        )
        query.awaitTermination(120)

    copy()
    assert read_all(target) == []
    writer = StreamWriter.open(stream_path)
    try:
        writer.partitions[0].append([encode_record(b"later", b"k", 1)], [1])
    finally:
        writer.close()
    copy()
    assert [bytes(m.value) for m in read_all(target)] == [b"later"]


def test_latest_offsets_follow_appends_and_rolls_without_listing(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first look, latest offsets come from stat calls alone, across segment rolls."""
    fill(stream_path, [5, 0], segment_size_bytes=1024)
    latest = LatestOffsets(stream_path)
    assert latest.snapshot([0, 1]) == {0: 5, 1: 0}

    writer = StreamWriter.open(stream_path)
    try:
        for i in range(200):  # many 1 KiB segments
            writer.partitions[0].append([encode_record(b"x" * 40, b"k", i)], [i])
        writer.partitions[1].append([encode_record(b"y", b"k", 0)], [0])
    finally:
        writer.close()

    def no_listing(*args: object) -> None:
        raise AssertionError("latestOffset listed a folder")

    monkeypatch.setattr(os, "scandir", no_listing)
    monkeypatch.setattr(os, "listdir", no_listing)
    assert latest.snapshot([0, 1]) == {0: 205, 1: 1}


def test_read_limits_share_rows_in_proportion_to_what_each_partition_has() -> None:
    """A row limit is shared in proportion to the backlog, every row of the limit used, no more."""
    assert _limit({0: 0, 1: 0}, {0: 30, 1: 10}, 8) == {0: 6, 1: 2}
    assert _limit({0: 0}, {0: 3}, 10) == {0: 3}


def test_read_limits_never_starve_a_small_partition() -> None:
    """A partition with one waiting row gets it even while another has a hundred."""
    assert _limit({0: 5, 1: 0}, {0: 6, 1: 100}, 10) == {0: 6, 1: 9}
    assert _limit({0: 0, 1: 0, 2: 0}, {0: 1, 1: 1, 2: 50}, 2) == {0: 1, 1: 1, 2: 0}


def test_latest_offset_respects_min_rows_and_available_now(stream_path: str) -> None:
    """ReadMinRows waits for enough rows; after prepareForTriggerAvailableNow, later appends are not read."""
    fill(stream_path, [4])
    reader = AdiskqStreamReader(ReadOptions.parse({"path": stream_path}, streaming=True))
    start = {"0": 0}
    assert reader.latestOffset(start, ReadMinRows(10)) == start
    assert reader.latestOffset(start, ReadMaxRows(3)) == {"0": 3}
    reader.prepareForTriggerAvailableNow()
    writer = StreamWriter.open(stream_path)
    try:
        writer.partitions[0].append([encode_record(b"late", b"k", 0)], [0])
    finally:
        writer.close()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"0": 4}
    assert reader.reportLatestOffset() == {"0": 5}


def test_a_partition_added_later_is_read_from_its_start(stream_path: str) -> None:
    """Offsets that lack a partition (added after the query began) start it at its oldest offset."""
    fill(stream_path, [2])
    reader = AdiskqStreamReader(ReadOptions.parse({"path": stream_path}, streaming=True))
    start = reader.initialOffset()
    writer = StreamWriter.open(stream_path, partitions=2)
    try:
        writer.partitions[1].append([encode_record(b"new", b"k", 0)], [0])
    finally:
        writer.close()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert (start, end) == ({"0": 2}, {"0": 2, "1": 1})
    assert reader.partitions(start, end) == [OffsetRange(1, 0, 1)]


def vacuumed(path: str) -> int:
    fill(path, [60], segment_size_bytes=1024)
    return delete_oldest_segment(path)


def test_a_range_retention_deleted_fails_the_read_by_default(stream_path: str) -> None:
    """Reading a planned range whose start was vacuumed meanwhile raises, pointing at failOnDataLoss."""
    vacuumed(stream_path)
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss=false"):
        list(read_range(stream_path, OffsetRange(0, 0, 60), fail_on_data_loss=True))


def test_a_range_retention_deleted_is_skipped_with_a_warning(
    stream_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With failOnDataLoss=false the lost offsets are skipped and a warning names them."""
    oldest = vacuumed(stream_path)
    with caplog.at_level(logging.WARNING, logger="adiskq.spark"):
        batches = list(read_range(stream_path, OffsetRange(0, 0, 60), fail_on_data_loss=False))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(oldest, 60))
    assert f"offsets 0..{oldest - 1} of partition 0 were deleted by retention" in caplog.text
