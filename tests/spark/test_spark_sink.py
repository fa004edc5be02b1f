"""Streaming writes, exactly once per (checkpointLocation, batchId), replays and crashed commits included."""

from __future__ import annotations

import errno
import os
import pathlib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from support.spark import fill, read_all

from adiskq import CorruptRecordError, StreamLockedError
from adiskq._sansio.codec import encode_record
from adiskq._storage.partition_writer import PartitionWriter
from adiskq._storage.stream import StreamReader, StreamWriter
from adiskq.spark import _sink
from adiskq.spark._encode import Columns, Grouped
from adiskq.spark._sink import SinkCommitter, StagedRecords, stage

COLUMNS = Columns(has_key=True, has_headers=False, has_timestamp=False)


def copy_stream(spark: SparkSession, source: str, target: str, checkpoint: str) -> None:
    """Copy source into target with AvailableNow, 7 records a micro-batch."""
    query = (
        spark.readStream.format("adiskq")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "7")
        .load(source)
        .select("key", "value")
        .writeStream.format("adiskq")
        .option("checkpointLocation", checkpoint)
        .option("partitionCount", "2")
        .trigger(availableNow=True)
        .start(target)
    )
    query.awaitTermination(180)
    assert query.exception() is None


def values(path: str) -> list[bytes]:
    return sorted(bytes(m.value) for m in read_all(path))


def test_a_streaming_copy_writes_every_row_once(spark: SparkSession, stream_path: str, tmp_path: pathlib.Path) -> None:
    """Rows of every micro-batch land in the target once, placed by key."""
    fill(stream_path, [12, 9])
    target = str(tmp_path / "target")
    copy_stream(spark, stream_path, target, str(tmp_path / "ckpt"))
    assert values(target) == values(stream_path)
    assert StreamReader.open(target).partition_count == 2


def test_a_replayed_micro_batch_is_not_appended_twice(
    spark: SparkSession, stream_path: str, tmp_path: pathlib.Path
) -> None:
    """Deleting the query's last commits/N file makes Spark run batch N again; the sink drops it."""
    fill(stream_path, [12, 9])
    target, checkpoint = str(tmp_path / "target"), str(tmp_path / "ckpt")
    copy_stream(spark, stream_path, target, checkpoint)
    commits = os.path.join(checkpoint, "commits")
    last = max(int(name) for name in os.listdir(commits) if name.isdigit())
    os.unlink(os.path.join(commits, str(last)))
    os.unlink(os.path.join(commits, f".{last}.crc"))
    copy_stream(spark, stream_path, target, checkpoint)
    assert os.path.exists(os.path.join(commits, str(last)))  # Spark did run batch N again
    assert values(target) == values(stream_path)
    assert os.listdir(os.path.join(checkpoint, "adiskq-sink", "staging")) == []


def test_a_new_checkpoint_starts_afresh(spark: SparkSession, stream_path: str, tmp_path: pathlib.Path) -> None:
    """Batch ids start at 0 for each checkpoint: a second query with its own checkpoint writes again."""
    fill(stream_path, [5])
    target = str(tmp_path / "target")
    copy_stream(spark, stream_path, target, str(tmp_path / "ckpt-1"))
    copy_stream(spark, stream_path, target, str(tmp_path / "ckpt-2"))
    assert values(target) == sorted(values(stream_path) * 2)


def test_a_streaming_write_needs_a_checkpoint_location(spark: SparkSession, stream_path: str) -> None:
    """Without .option("checkpointLocation") the query does not start, and says what is needed."""
    fill(stream_path, [1])
    df = spark.readStream.format("adiskq").load(stream_path).select("value")
    spark.conf.set("spark.sql.streaming.checkpointLocation", os.path.dirname(stream_path))
    try:
        with pytest.raises(PySparkException, match=r"needs \.option\('checkpointLocation'"):
            df.writeStream.format("adiskq").trigger(availableNow=True).start(stream_path + "-out").awaitTermination(60)
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")


# -- the committer, without Spark: crashes at each step of a commit ------------------------------------


def staged_rows(checkpoint: str, rows: Sequence[tuple[bytes, bytes]], partition_count: int = 2) -> StagedRecords:
    """What a task's write() leaves: its rows encoded and staged."""
    grouped = Grouped(partition_count)
    grouped.encode(pa.record_batch({"key": [k for k, _ in rows], "value": [v for _, v in rows]}), COLUMNS, 1 << 20)
    return stage(checkpoint, grouped)


ROWS = [(b"k%d" % i, b"v%d" % i) for i in range(40)]
REPLAY = [(b"k%d" % i, b"replayed-%d" % i) for i in range(40)]  # what a rerun computes (may differ)


class Crash(Exception):
    """Stands for the driver dying at that point."""


def test_a_commit_appends_the_staged_rows_and_deletes_them(stream_path: str, tmp_path: pathlib.Path) -> None:
    """commit(B) appends the staged rows once, records B, and removes the staging files."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    staged = staged_rows(str(tmp_path), ROWS)
    assert committer.commit(0, [staged]) is True
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert committer.load_state().committed == 0
    assert not os.path.exists(staged.path)


def test_committing_a_committed_batch_again_appends_nothing(stream_path: str, tmp_path: pathlib.Path) -> None:
    """A replay of batch B after B was recorded is dropped, staging file and all."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    committer.commit(0, [staged_rows(str(tmp_path), ROWS)])
    replay = staged_rows(str(tmp_path), REPLAY)
    assert committer.commit(0, [replay]) is False
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert not os.path.exists(replay.path)


def test_a_crash_after_appending_but_before_recording_is_not_repeated(
    stream_path: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dying between the append and recording the batch: the replay finds the rows there and adds none."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    real_save = committer.save_state

    def save_then_crash_on_record(state: object) -> None:
        if getattr(state, "intent", None) is None:
            raise Crash
        real_save(state)  # type: ignore[arg-type]

    monkeypatch.setattr(committer, "save_state", save_then_crash_on_record)
    with pytest.raises(Crash):
        committer.commit(0, [staged_rows(str(tmp_path), ROWS)])
    monkeypatch.setattr(committer, "save_state", real_save)
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert committer.commit(0, [staged_rows(str(tmp_path), REPLAY)]) is False
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert committer.load_state().committed == 0


def test_a_crash_in_the_middle_of_the_append_is_completed_not_repeated(
    stream_path: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dying after part of the rows landed: the replay appends exactly the missing ones, first attempt's rows."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    real_append = _sink.append_grouped

    def append_some_then_crash(writer: StreamWriter, grouped: dict[int, list[bytes]], **kwargs: object) -> None:
        first = min(grouped)
        real_append(writer, {first: grouped[first][:5]})
        raise Crash

    monkeypatch.setattr(_sink, "append_grouped", append_some_then_crash)
    with pytest.raises(Crash):
        committer.commit(3, [staged_rows(str(tmp_path), ROWS)])
    monkeypatch.setattr(_sink, "append_grouped", real_append)
    assert len(read_all(stream_path)) == 5
    assert committer.commit(3, [staged_rows(str(tmp_path), REPLAY)]) is False
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert os.listdir(os.path.join(tmp_path, "adiskq-sink", "staging")) == []


def test_an_abort_after_a_failed_commit_keeps_what_its_intent_needs(
    stream_path: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that fails part-way (disk full), then Spark's abort: the retry appends every row once."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    real_append = PartitionWriter.append

    def full_disk_on_partition_1(self: PartitionWriter, *args: Any, **kwargs: Any) -> int:
        if self.partition == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(self, *args, **kwargs)

    monkeypatch.setattr(PartitionWriter, "append", full_disk_on_partition_1)
    staged = [staged_rows(str(tmp_path), ROWS)]
    with pytest.raises(OSError, match="No space"):
        committer.commit(0, staged)
    committer.discard(staged)  # what AdiskqStreamWriter.abort does
    monkeypatch.setattr(PartitionWriter, "append", real_append)
    assert committer.commit(0, [staged_rows(str(tmp_path), REPLAY)]) is False  # the intent's batch, finished
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert committer.load_state().committed == 0
    assert committer.commit(1, [staged_rows(str(tmp_path), REPLAY)]) is True
    assert values(stream_path) == sorted([v for _, v in ROWS] + [v for _, v in REPLAY])


def test_an_interrupted_commit_is_finished_before_the_next_batch(
    stream_path: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the crashed batch is not replayed (its commit file exists), it is still finished first."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    monkeypatch.setattr(_sink, "append_grouped", lambda *args, **kwargs: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        committer.commit(0, [staged_rows(str(tmp_path), ROWS[:10])])
    monkeypatch.undo()
    assert committer.commit(1, [staged_rows(str(tmp_path), ROWS[10:])]) is True
    assert values(stream_path) == sorted(v for _, v in ROWS)
    assert committer.load_state().committed == 1


def test_another_producers_appends_after_a_crash_are_not_mistaken_for_ours(
    stream_path: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows another writer appended after the crash stay, and none of the batch's rows is lost."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    monkeypatch.setattr(_sink, "append_grouped", lambda *args, **kwargs: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        committer.commit(0, [staged_rows(str(tmp_path), ROWS)])
    monkeypatch.undo()
    other = SinkCommitter(str(tmp_path / "other-query"), stream_path, 1.0)
    other.commit(0, [staged_rows(str(tmp_path / "other-query"), [(b"k1", b"theirs")])])
    committer.commit(0, [staged_rows(str(tmp_path), REPLAY)])
    assert values(stream_path) == sorted([v for _, v in ROWS] + [b"theirs"])


def test_a_commit_waits_for_the_lock_and_names_the_holder(stream_path: str, tmp_path: pathlib.Path) -> None:
    """While another producer holds the stream, commit fails after lockTimeout naming it; nothing is lost."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 0.1)
    staged = staged_rows(str(tmp_path), ROWS)
    holder = StreamWriter.open(stream_path)
    try:
        with pytest.raises(StreamLockedError, match=f"held by pid {os.getpid()}"):
            committer.commit(0, [staged])
    finally:
        holder.close()
    assert os.path.exists(staged.path)
    assert committer.commit(0, [staged]) is True
    assert len(read_all(stream_path)) == len(ROWS)


def test_a_damaged_staging_file_is_refused_before_anything_is_appended(
    stream_path: str, tmp_path: pathlib.Path
) -> None:
    """Every staged record's CRC is checked at commit; a damaged one names the file and appends nothing."""
    fill(stream_path, [0, 0])
    committer = SinkCommitter(str(tmp_path), stream_path, 1.0)
    staged = staged_rows(str(tmp_path), ROWS)
    with open(staged.path, "r+b") as file:
        file.seek(30)
        byte = file.read(1)
        file.seek(30)
        file.write(bytes([byte[0] ^ 1]))
    with pytest.raises(CorruptRecordError) as caught:
        committer.commit(0, [staged])
    assert caught.value.path == staged.path
    assert read_all(stream_path) == []


def test_a_commit_writes_beside_a_live_shared_producer(stream_path: str, tmp_path: pathlib.Path) -> None:
    """The sink commits while a service's shared producer is open, and the service writes on after."""
    fill(stream_path, [0, 0])
    live = StreamWriter.open(stream_path, shared=True)
    try:
        committer = SinkCommitter(str(tmp_path), stream_path, 0.1)
        assert committer.commit(0, [staged_rows(str(tmp_path), ROWS)]) is True
        with live.appending([1]):
            live.partitions[1].append([encode_record(b"service", b"k", 1)], [1])
    finally:
        live.close()
    assert values(stream_path) == sorted([v for _, v in ROWS] + [b"service"])
