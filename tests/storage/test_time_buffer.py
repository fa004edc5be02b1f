"""Single pushes buffer their .timeindex entries (128 at a time): writers, readers and check agree."""

from __future__ import annotations

import os

import anyio
import pytest
from support.cli import invoke

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._sansio.entries import BUFFERED_ENTRIES, TIMEINDEX_ENTRY
from adiskq._storage.segment_writer import SegmentWriter

T0 = 1_700_000_000_000_000_000  # a fixed time, so every timestamp below is known


def time_entries(directory: str, base: int = 0) -> list[tuple[int, int]]:
    """The (offset, timestamp_ns) entries of a segment's .timeindex file."""
    with open(os.path.join(directory, f"{base:020d}.timeindex"), "rb") as file:
        raw = file.read()
    return [TIMEINDEX_ENTRY.unpack_from(raw, at) for at in range(0, len(raw), TIMEINDEX_ENTRY.size)]


def timeindex_path(stream: str, partition: int = 0, base: int = 0) -> str:
    return os.path.join(stream, "parts", f"{partition:06d}", f"{base:020d}.timeindex")


def timeindex_size(stream: str) -> int:
    """Bytes in partition 0's first .timeindex file."""
    return os.path.getsize(timeindex_path(stream))


def test_single_pushes_write_their_time_entries_128_at_a_time(tmp_path: object) -> None:
    """append_one buffers its time entry; the 128th writes them all; flush_buffered_entries the rest."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    for i in range(BUFFERED_ENTRIES - 1):
        writer.append_one(encode_record(b"v", b"k", T0 + i), T0 + i)
    assert time_entries(directory) == []
    writer.append_one(encode_record(b"v", b"k", T0 + 127), T0 + 127)
    assert time_entries(directory) == [(i, T0 + i) for i in range(128)]
    writer.append_one(encode_record(b"v", b"k", T0 + 128), T0 + 128)
    writer.flush_buffered_entries()
    assert time_entries(directory)[-1] == (128, T0 + 128)
    writer.close()


def test_a_batch_writes_the_buffered_time_entries_first(tmp_path: object) -> None:
    """Time entries buffered by single pushes go out with the next batch, in offset order."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    writer.append_one(encode_record(b"v", b"a", T0), T0)
    writer.append_one(encode_record(b"v", b"b", T0 + 1), T0 + 1)
    writer.append([encode_record(b"v", b"c", T0 + 2), encode_record(b"v", b"d", T0 + 3)], [T0 + 2, T0 + 3])
    assert time_entries(directory) == [(i, T0 + i) for i in range(4)]
    writer.close()


@pytest.mark.anyio
async def test_readers_find_times_a_producer_still_buffers(stream_path: str) -> None:
    """offset_for_time and stats answer for messages whose time entries are not written yet."""
    async with adiskq.Producer(stream_path) as producer:
        for i in range(10):
            await producer.push(b"%d" % i, timestamp=T0 + i * 1000)
        assert timeindex_size(stream_path) == 0  # all ten are still buffered
        assert adiskq.offset_for_time(stream_path, 0, T0 + 4500) == 5
        assert adiskq.offset_for_time(stream_path, 0, T0) == 0
        assert adiskq.offset_for_time(stream_path, 0, T0 + 10_000) == 10  # after the last: the next offset
        partition = adiskq.stats(stream_path).partitions[0]
        assert (partition.oldest_timestamp_ns, partition.newest_timestamp_ns) == (T0, T0 + 9000)
    assert timeindex_size(stream_path) == 10 * 16  # a clean close writes them


@pytest.mark.anyio
async def test_a_consumer_starts_at_a_time_a_producer_still_buffers(stream_path: str) -> None:
    """Consumer(start=datetime) finds the first message at or after it among buffered time entries."""
    async with adiskq.Producer(stream_path) as producer:
        for i in range(10):
            await producer.push(b"%d" % i, timestamp=T0 + i * 1000)
        start = adiskq.read(stream_path, 0, 7).timestamp
        with anyio.fail_after(10):
            async with adiskq.Consumer(stream_path, partition=0, start=start, end="close") as consumer:
                assert [m.offset async for m in consumer] == [7, 8, 9]


@pytest.mark.anyio
async def test_check_accepts_time_entries_a_producer_still_buffers(stream_path: str) -> None:
    """A live producer's buffered time entries are not a problem for check."""
    async with adiskq.Producer(stream_path) as producer:
        for i in range(10):
            await producer.push(b"%d" % i, timestamp=T0 + i)
        result = invoke("check", stream_path)
        assert result.exit_code == 0, result.stdout


@pytest.mark.anyio
async def test_check_accepts_a_short_tail_but_not_a_longer_gap(stream_path: str) -> None:
    """Up to 127 missing time entries at the active segment's end is what a crash leaves; more is a problem."""
    async with adiskq.Producer(stream_path) as producer:
        for i in range(300):
            await producer.push(b"%d" % i, timestamp=T0 + i)
    path = timeindex_path(stream_path)
    os.truncate(path, (300 - 127) * 16)  # a crash just before the buffer of 128 was written
    assert invoke("check", stream_path).exit_code == 0
    os.truncate(path, (300 - 128) * 16)
    result = invoke("check", stream_path)
    assert result.exit_code == 1
    assert f"{path}:{172 * 16}: has 172 entries but the index has 300: 128 missing" in result.stdout
