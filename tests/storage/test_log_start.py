"""A partition's log start offset (``adiskq/_storage/log_start.py``): readers, stats, time lookups
and vacuum honour it; recovery lowers one past the partition's end and removes a damaged file;
``check`` reports both and ``--repair`` fixes them."""

from __future__ import annotations

import datetime as dt
import os
import pathlib

import pytest
from support.cli import invoke

import adiskq
from adiskq._errors import OffsetOutOfRangeError
from adiskq._sansio.retention import SegmentInfo, plan_vacuum
from adiskq._sansio.values import Retention
from adiskq._storage.log_start import LOG_START_FILE, load_log_start, save_log_start
from adiskq._storage.stream import StreamReader, StreamWriter


async def _stream(path: str, count: int, **settings: object) -> None:
    async with adiskq.Producer(path, **settings) as producer:  # type: ignore[arg-type]
        for i in range(count):
            await producer.push(
                b"m%03d" % i + b"." * 100, timestamp=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i)
            )


def _partition_dir(path: str) -> str:
    return os.path.join(path, "parts", "000000")


@pytest.mark.anyio
async def test_readers_stats_and_time_lookups_start_at_the_log_start(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "s")
    await _stream(path, 10)
    save_log_start(_partition_dir(path), 6)
    partition = StreamReader.open(path).partition(0)
    assert partition.bounds() == (6, 10)
    assert partition.offset_of("oldest") == 6
    with pytest.raises(OffsetOutOfRangeError) as below:
        partition.cursor(2).read()
    assert below.value.oldest_offset == 6
    assert [m.offset for m in partition.cursor(6).read()] == [6, 7, 8, 9]
    stats = adiskq.stats(path).partitions[0]
    assert (stats.oldest_offset, stats.next_offset) == (6, 10)
    assert stats.oldest_timestamp_ns == partition.read_one(6).timestamp_ns
    # A time before the log start finds the log start; the newest time is found past it.
    assert partition.offset_for_time(0) == 6
    assert partition.newest_time() == (9, partition.read_one(9).timestamp_ns)
    async with adiskq.Consumer(path, start="oldest") as consumer:
        first = await consumer.__anext__()
    assert first.offset == 6


@pytest.mark.anyio
async def test_vacuum_deletes_the_segments_below_the_log_start(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "s")
    await _stream(path, 30, segment_size_bytes=1024)
    directory = _partition_dir(path)
    segments = sorted(int(name.split(".")[0]) for name in os.listdir(directory) if name.endswith(".index"))
    save_log_start(directory, 20)
    async with adiskq.Producer(path) as producer:  # unbounded retention: the log start alone
        report = await producer.vacuum()
    left = sorted(int(name.split(".")[0]) for name in os.listdir(directory) if name.endswith(".index"))
    assert len(report.removed_segments) == len(segments) - len(left) > 0
    assert left[0] <= 20 < (left[1] if len(left) > 1 else 30)
    assert StreamReader.open(path).partition(0).bounds() == (20, 30)


def test_plan_vacuum_takes_every_sealed_segment_below_the_log_start() -> None:
    segments = [SegmentInfo(0, base, base + 10, 100, 1) for base in (0, 10, 20, 30)]
    doomed = plan_vacuum({0: segments}, Retention(), 0, None, {0: 25})
    assert [s.base_offset for s in doomed] == [0, 10]
    doomed = plan_vacuum({0: segments}, Retention(), 0, None, {0: 40})  # never the active segment
    assert [s.base_offset for s in doomed] == [0, 10, 20]


@pytest.mark.anyio
async def test_a_log_start_past_the_end_is_lowered_by_recovery_and_reported_by_check(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "s")
    await _stream(path, 10)
    directory = _partition_dir(path)
    save_log_start(directory, 15)  # as a power cut leaves it: records 10..14 taken back
    assert StreamReader.open(path).partition(0).bounds() == (10, 10)
    found = invoke("check", path)
    assert found.exit_code == 1
    assert "log start offset 15 is past the partition's end 10" in found.output
    repaired = invoke("check", "--repair", path)
    assert repaired.exit_code == 0, repaired.output
    assert "lowered the log start offset from 15 to 10" in repaired.output
    assert load_log_start(directory) == 10
    async with adiskq.Producer(path) as producer:
        receipt = await producer.push(b"after")
    assert adiskq.read(path, 0, receipt.offset).value == b"after"
    assert receipt.offset == 10


def test_a_damaged_log_start_file_hides_nothing_and_recovery_removes_it(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "s")
    StreamWriter.open(path).close()
    directory = _partition_dir(path)
    pathlib.Path(directory, LOG_START_FILE).write_text("{not json")
    assert load_log_start(directory) == 0
    found = invoke("check", path)
    assert found.exit_code == 1
    assert LOG_START_FILE in found.output
    writer = StreamWriter.open(path)
    writer.close()
    assert any("removed log-start.json" in repair.action for repair in writer.recovery.repairs)
    assert not os.path.exists(os.path.join(directory, LOG_START_FILE))
    assert invoke("check", path).exit_code == 0
