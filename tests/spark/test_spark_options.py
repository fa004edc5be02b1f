"""Options of the adiskq Spark source and sink, parsed and checked before any task runs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

import adiskq
from adiskq.spark import InvalidOptionError
from adiskq.spark._options import EARLIEST, LATEST, ReadOptions, WriteOptions


def read(streaming: bool = False, **options: str) -> ReadOptions:
    return ReadOptions.parse({"path": "/s", **options}, streaming=streaming)


def test_batch_reads_default_to_everything_and_streams_to_what_comes_next() -> None:
    """Batch: earliest to latest; streaming: from latest; failOnDataLoss on; 1,000,000 rows a task."""
    batch, stream = read(), read(streaming=True)
    assert (batch.starting_offsets, batch.ending_offsets, stream.starting_offsets) == (EARLIEST, LATEST, LATEST)
    assert batch.fail_on_data_loss
    assert batch.max_records_per_partition == 1_000_000


def test_json_offsets_map_partitions_to_offsets_with_markers() -> None:
    """{"0": 5, "1": -2} gives partition 0 at 5 and partition 1 at earliest."""
    assert read(startingOffsets='{"0": 5, "1": -2}').starting_offsets == {0: 5, 1: EARLIEST}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("startingOffsets", "oldest"),
        ("startingOffsets", '{"0": -3}'),
        ("startingOffsets", '{"zero": 1}'),
        ("endingOffsets", "earliest"),
        ("endingOffsets", '{"0": -2}'),
        ("failOnDataLoss", "maybe"),
        ("maxRecordsPerTrigger", "0"),
        ("partitions", "1,x"),
        ("startingTimestamp", "yesterday"),
    ],
)
def test_unusable_values_are_refused_naming_the_option(name: str, value: str) -> None:
    """Every bad value raises InvalidOptionError (an InvalidArgumentError) that names the option."""
    with pytest.raises(InvalidOptionError, match=name):
        read(**{name: value})


def test_option_errors_are_adiskq_argument_errors() -> None:
    """InvalidOptionError is an adiskq.InvalidArgumentError and a ValueError."""
    assert issubclass(InvalidOptionError, adiskq.InvalidArgumentError)
    assert issubclass(InvalidOptionError, ValueError)


def test_starting_timestamp_takes_milliseconds_or_iso_8601() -> None:
    """Milliseconds since the epoch, as Spark's Kafka source takes them, or an ISO 8601 time."""
    assert read(startingTimestamp="1767225600000").starting_timestamp_ns == 1_767_225_600_000_000_000
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert read(startingTimestamp=when.isoformat()).starting_timestamp_ns == 1_767_225_600_000_000_000


def test_a_streaming_read_refuses_an_ending_offset() -> None:
    """endingOffsets belongs to batch reads; a stream says to use Trigger.AvailableNow instead."""
    with pytest.raises(InvalidOptionError, match="AvailableNow"):
        read(streaming=True, endingOffsets="latest")


def test_option_names_are_case_insensitive_as_spark_passes_them() -> None:
    """Spark lowercases option names; both spellings work."""
    assert read(maxrecordspertrigger="9").max_records_per_trigger == 9


def test_a_read_without_a_path_says_how_to_give_one() -> None:
    """No path: the error shows .load(path)."""
    with pytest.raises(InvalidOptionError, match=r"\.load\(path\)"):
        ReadOptions.parse({}, streaming=False)


def test_file_uris_become_local_paths() -> None:
    """file: URIs for the stream and the checkpoint become absolute local paths."""
    options = WriteOptions.parse({"path": "file:///data/out", "checkpointLocation": "file:/data/ckpt"})
    assert (options.path, options.checkpoint_location) == ("/data/out", "/data/ckpt")


def test_a_checkpoint_that_is_not_local_is_refused() -> None:
    """The sink keeps its commit record beside the checkpoint, so it must be a local folder."""
    with pytest.raises(InvalidOptionError, match="must be a local folder"):
        WriteOptions.parse({"path": "/data/out", "checkpointLocation": "s3a://bucket/ckpt"})


@pytest.mark.parametrize("parse", [WriteOptions.parse, lambda options: ReadOptions.parse(options, streaming=False)])
def test_a_stream_path_that_is_not_local_is_refused(parse: Callable[[dict[str, str]], object]) -> None:
    """A stream is a folder on this host: an s3a:// path is refused, not turned into a local folder."""
    with pytest.raises(InvalidOptionError, match="must be a local folder"):
        parse({"path": "s3a://bucket/stream"})


def test_write_options_default_to_a_minute_of_lock_waiting() -> None:
    """lockTimeout defaults to 60 s; partitionCount to the stream's own."""
    options = WriteOptions.parse({"path": "/data/out"})
    assert (options.lock_timeout, options.partition_count) == (60.0, None)


@pytest.mark.parametrize(
    ("raw", "level"), [(None, 0.95), ("0.9", 0.9), ("1", None), ("1.0", None), ("none", None), ("None", None)]
)
def test_writes_are_refused_above_95_percent_unless_told_otherwise(raw: str | None, level: float | None) -> None:
    """refuseWritesAbove defaults to a producer's 0.95; 1 or none turns the check off."""
    options = {"path": "/data/out"} if raw is None else {"path": "/data/out", "refuseWritesAbove": raw}
    assert WriteOptions.parse(options).refuse_writes_above == level


@pytest.mark.parametrize("raw", ["0", "-0.1", "1.5", "nan", "full"])
def test_a_refuse_level_out_of_range_names_the_option(raw: str) -> None:
    """A level outside (0, 1] is refused with what to give."""
    with pytest.raises(InvalidOptionError, match=r"refuseWritesAbove=.*give a fraction"):
        WriteOptions.parse({"path": "/data/out", "refuseWritesAbove": raw})
