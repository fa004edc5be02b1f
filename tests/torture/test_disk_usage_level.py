"""Writes refused above a disk-usage level, for real: a small tmpfs mounted for the test (as root).

Pushes fail with ``DiskUsageRefusedError`` (ENOSPC) before the disk is full, write nothing, say
what to do, and succeed again as soon as usage is below the level.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pathlib
import re
import shutil
from collections.abc import Iterator

import anyio
import pytest
from support.cli import invoke
from support.small_disk import fill, fill_to, mounted_small_disk, remove_filler, usage
from support.waiting import until_changed

import adiskq

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_disk(tmp_path: object) -> Iterator[str]:
    """A 2 MiB file system of its own (5% of it, the default headroom, is about 100 KiB)."""
    with mounted_small_disk(str(tmp_path), size="2m") as mount_point:
        yield mount_point


def values(path: str) -> list[bytes]:
    """Every retained value of partition 0, in order."""
    partition = adiskq.stats(path).partitions[0]
    return [adiskq.read(path, 0, offset).value for offset in range(partition.oldest_offset, partition.next_offset)]


async def create(path: str) -> None:
    """Create the stream with one message, so what a test fills next is the disk, not the stream."""
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024) as producer:
        await producer.push(b"first", key="k")


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_pushes_are_refused_above_the_level_before_the_disk_is_full(small_disk: str, flush: str) -> None:
    """By default pushes stop at 95% usage with ENOSPC, space still left; everything acknowledged reads back."""
    path = os.path.join(small_disk, "stream")
    acknowledged: list[bytes] = []
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, flush=flush) as producer:  # type: ignore[arg-type]
        error = await fill(producer, acknowledged)
    assert isinstance(error, adiskq.DiskUsageRefusedError)
    assert error.errno == errno.ENOSPC
    assert error.level == 0.95
    assert 0.95 <= error.usage < 1.0
    assert shutil.disk_usage(small_disk).free > 0  # refused, not full
    assert values(path) == acknowledged  # the refused push left nothing behind


@pytest.mark.parametrize("level", [0.95, 0.6])
async def test_eight_shared_producers_are_refused_at_the_level_together(small_disk: str, level: float) -> None:
    """Eight shared producers pushing at once stop at the level between them: each is refused with
    ``DiskUsageRefusedError`` within a few pushes of the level, and none meets a real ENOSPC."""
    path = os.path.join(small_disk, "stream")
    await create(path)
    errors: list[OSError] = []
    acknowledged = 0

    async def push_until_refused(producer: adiskq.Producer, name: int) -> None:
        nonlocal acknowledged
        for i in range(100_000):
            try:
                await producer.push(b"%d-%06d" % (name, i) + b"x" * 250, key=b"%d" % name)
            except OSError as error:
                errors.append(error)
                return
            acknowledged += 1
        raise AssertionError("never refused")

    async with contextlib.AsyncExitStack() as stack:
        producers = [
            await stack.enter_async_context(
                adiskq.Producer(path, shared=True, refuse_writes_above=level, flush_interval=60)
            )
            for _ in range(8)
        ]
        with anyio.fail_after(120):
            async with anyio.create_task_group() as group:
                for name, producer in enumerate(producers):
                    group.start_soon(push_until_refused, producer, name)
    assert [type(error) for error in errors] == [adiskq.DiskUsageRefusedError] * 8, errors
    refused = [error for error in errors if isinstance(error, adiskq.DiskUsageRefusedError)]
    assert all(level <= error.usage < level + 0.02 for error in refused), [error.usage for error in refused]
    assert usage(small_disk) < level + 0.02
    assert adiskq.stats(path).message_count == acknowledged + 1


async def test_a_refused_push_many_writes_nothing(small_disk: str) -> None:
    """A batch refused at the level writes none of its records, on any partition."""
    path = os.path.join(small_disk, "stream")
    await create(path)
    fill_to(small_disk, 0.96)
    async with adiskq.Producer(path, partitions=3) as producer:
        with pytest.raises(adiskq.DiskUsageRefusedError):
            await producer.push_many([adiskq.Record(b"v%d" % i, key=f"k{i}") for i in range(50)])
    assert adiskq.stats(path).message_count == 1


async def test_the_refusal_says_which_level_was_crossed_and_what_to_do(small_disk: str) -> None:
    """The message names the level, the usage measured, and the ways out."""
    path = os.path.join(small_disk, "stream")
    await create(path)
    fill_to(small_disk, 0.96)
    async with adiskq.Producer(path, refuse_writes_above=0.9) as producer:
        with pytest.raises(adiskq.DiskUsageRefusedError) as caught:
            await producer.push(b"refused")
    text = str(caught.value)
    assert f"{caught.value.usage:.1%} full" in text
    assert "refuse_writes_above=0.9" in text
    assert "Nothing was written" in text
    for way_out in ("free space", "vacuum", "max_disk_usage", "higher refuse_writes_above"):
        assert way_out in text
    assert path in text


async def test_writing_resumes_by_itself_once_space_is_freed(small_disk: str) -> None:
    """The first push after usage drops below the level succeeds, without reopening the producer."""
    path = os.path.join(small_disk, "stream")
    await create(path)
    fill_to(small_disk, 0.96)
    async with adiskq.Producer(path) as producer:
        with pytest.raises(adiskq.DiskUsageRefusedError):
            await producer.push(b"refused", key="k")
        remove_filler(small_disk)
        receipt = await producer.push(b"accepted", key="k")
    assert values(path) == [b"first", b"accepted"]
    assert receipt.offset == 1


async def test_writing_resumes_after_a_vacuum_by_disk_usage(small_disk: str) -> None:
    """A stream that filled its disk to the level is writable again once vacuum deletes old segments."""
    path = os.path.join(small_disk, "stream")
    acknowledged: list[bytes] = []
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024) as producer:
        assert isinstance(await fill(producer, acknowledged), adiskq.DiskUsageRefusedError)
        report = await producer.vacuum(adiskq.Retention(max_disk_usage=0.5))
        assert report.removed_bytes > 0
        assert usage(small_disk) < 0.95
        receipt = await producer.push(b"after vacuum", key="k")
    assert adiskq.read(path, 0, receipt.offset).value == b"after vacuum"


async def test_writing_resumes_once_the_background_vacuum_frees_space(small_disk: str) -> None:
    """A stream Retention(max_disk_usage=...) below the level lets the producer's own vacuum end a refusal."""
    path = os.path.join(small_disk, "stream")
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, refuse_writes_above=None) as producer:
        for _ in range(100):  # ~1 MiB in sealed segments of 16 KiB (a batch never spans two)
            await producer.push_many([adiskq.Record(b"x" * 1000, key="k") for _ in range(10)])
    fill_to(small_disk, 0.96)
    retention = adiskq.Retention(max_disk_usage=0.9)
    async with adiskq.Producer(path, retention=retention, vacuum_interval=0.05) as producer:
        with anyio.fail_after(20):
            await until_changed(lambda: usage(small_disk) < 0.95, [os.path.join(path, "parts", "000000")])
        receipt = await producer.push(b"after the vacuum", key="k")
    assert adiskq.read(path, 0, receipt.offset).value == b"after the vacuum"


@pytest.mark.parametrize("level", [None, 1.0])
async def test_none_or_one_turns_the_check_off(small_disk: str, level: float | None) -> None:
    """Without a level, pushes go on until the disk itself is full (plain ENOSPC)."""
    path = os.path.join(small_disk, "stream")
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, refuse_writes_above=level) as producer:
        assert producer.refuse_writes_above is None
        error = await fill(producer, [])
    assert not isinstance(error, adiskq.DiskUsageRefusedError)
    assert error.errno == errno.ENOSPC


@pytest.mark.parametrize("level", [0, 0.0, -0.5, 1.5, float("nan"), "0.9", True])
def test_a_level_out_of_range_is_refused_at_construction(stream_path: str, level: object) -> None:
    """refuse_writes_above takes a fraction in (0, 1], None or 1.0; anything else says what to give."""
    with pytest.raises(adiskq.InvalidArgumentError, match=r"refuse_writes_above=.*give a fraction"):
        adiskq.Producer(stream_path, refuse_writes_above=level)  # type: ignore[arg-type]
    assert not os.path.exists(stream_path)


def test_cli_write_says_writes_are_refused_and_what_to_do(small_disk: str) -> None:
    """`adiskq write` above the level fails with one line naming the level and the options to use."""
    path = os.path.join(small_disk, "stream")
    assert invoke("write", path, input=b"first\n").exit_code == 0
    fill_to(small_disk, 0.96)
    result = invoke("write", path, input=b"second\nthird\n")
    assert result.exit_code == 1
    assert "refused" in result.stderr
    assert "--refuse-writes-above" in result.stderr
    assert "adiskq vacuum" in result.stderr
    assert values(path) == [b"first"]
    relaxed = invoke("write", path, "--refuse-writes-above", "1", input=b"second\n")
    assert relaxed.exit_code == 0, relaxed.output
    assert values(path) == [b"first", b"second"]


def test_cli_stats_shows_the_disk_usage_and_the_level(small_disk: str) -> None:
    """`adiskq stats` says how full the stream's file system is and where writes are refused."""
    path = os.path.join(small_disk, "stream")
    assert invoke("write", path, input=b"first\n").exit_code == 0
    fill_to(small_disk, 0.96)
    table = invoke("stats", path)
    assert table.exit_code == 0, table.output
    assert re.search(r"disk: 9\d\.\d% used of 2\.0 MiB \(at or over the level: writes are refused\)", table.stdout)
    assert "above 95% by default" in table.stdout
    disk = json.loads(invoke("stats", path, "--json").stdout)["disk"]
    assert disk["size_bytes"] == 2 * 2**20
    assert disk["usage"] == pytest.approx(usage(small_disk), abs=0.01)
    assert disk["refuse_writes_above"] == 0.95


def test_a_spark_sink_commit_above_the_level_writes_nothing_and_succeeds_later(
    small_disk: str, tmp_path: pathlib.Path
) -> None:
    """A streaming commit is refused before its intent is saved; once space is freed it appends once."""
    import pyarrow as pa

    from adiskq.spark._encode import Columns, Grouped
    from adiskq.spark._sink import SinkCommitter, stage

    path = os.path.join(small_disk, "stream")
    assert invoke("write", path, input=b"first\n").exit_code == 0
    grouped = Grouped(1)
    columns = Columns(has_key=False, has_headers=False, has_timestamp=False)
    grouped.encode(pa.record_batch({"value": [b"row-%d" % i for i in range(10)]}), columns, 1 << 20)
    staged = stage(str(tmp_path), grouped)
    committer = SinkCommitter(str(tmp_path), path, 1.0)
    fill_to(small_disk, 0.96)
    with pytest.raises(adiskq.DiskUsageRefusedError):
        committer.commit(0, [staged])
    assert values(path) == [b"first"]
    assert committer.load_state().intent is None
    remove_filler(small_disk)
    assert committer.commit(0, [staged]) is True
    assert values(path) == [b"first"] + [b"row-%d" % i for i in range(10)]


def test_a_spark_batch_task_above_the_level_appends_nothing(small_disk: str) -> None:
    """A batch write's task fails with the refusal before staging any of its rows; nothing is appended."""
    import pyarrow as pa

    from adiskq.spark._encode import Columns
    from adiskq.spark._options import WriteOptions
    from adiskq.spark._writer import AdiskqBatchWriter, prepare_stream

    path = os.path.join(small_disk, "stream")
    options = WriteOptions.parse({"path": path})
    facts = prepare_stream(options)
    writer = AdiskqBatchWriter(options, Columns(has_key=False, has_headers=False, has_timestamp=False), facts)
    fill_to(small_disk, 0.96)
    with pytest.raises(adiskq.DiskUsageRefusedError):
        writer.write(iter([pa.record_batch({"value": [b"a", b"b"]})]))
    assert adiskq.stats(path).message_count == 0
    remove_filler(small_disk)
    writer.commit([writer.write(iter([pa.record_batch({"value": [b"a", b"b"]})]))])
    assert adiskq.stats(path).message_count == 2
