"""A compressed stream's segments are compact: no ``.timeindex``, and a ``.tagindex`` only from a
segment's first tagged message on. Timestamps and tags are read from the records instead, by every
reader, and recovery, ``check``, vacuum and shared producers keep to that layout."""

from __future__ import annotations

import datetime as dt
import pathlib

import anyio
import pytest
from support.cli import invoke
from support.compression import order_events, trained_dictionary

import adiskq
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name
from adiskq._storage.stream import StreamWriter

pytestmark = pytest.mark.anyio

EVENTS = order_events(400)


def partition_folder(stream_path: str, partition: int = 0) -> pathlib.Path:
    return pathlib.Path(stream_path, PARTS_DIR, partition_dir_name(partition))


def extensions_by_segment(stream_path: str, partition: int = 0) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for path in partition_folder(stream_path, partition).iterdir():
        base, _, extension = path.name.partition(".")
        if base.isdigit():
            found.setdefault(int(base), set()).add(extension)
    return found


def tag_entries(stream_path: str, base: int = 0) -> list[int]:
    raw = (partition_folder(stream_path) / f"{base:020d}.tagindex").read_bytes()
    return [int.from_bytes(raw[at : at + 4], "little") for at in range(0, len(raw), 4)]


def compressed(**options: object) -> dict[str, object]:
    return {"compression": "zstd", "zstd_dictionary": trained_dictionary(), **options}


async def drain(stream_path: str, **options: object) -> list[adiskq.Message]:
    with anyio.fail_after(20):
        async with adiskq.Consumer(stream_path, end="close", **options) as consumer:  # type: ignore[arg-type]
            return [message async for message in consumer]


async def test_segments_keep_no_time_index_and_no_tag_index_without_tags(stream_path: str) -> None:
    """Pushed one at a time and in batches, over several segments: each segment, sealed or active,
    holds .data, .index and .keyindex only, and every message reads back."""
    async with adiskq.Producer(stream_path, **compressed(segment_size_bytes=8192)) as producer:  # type: ignore[arg-type]
        for number, value in enumerate(EVENTS[:200]):
            await producer.push(value, key=f"order-{number}")
        await producer.push_many([adiskq.Record(value, key=f"order-{200 + i}") for i, value in enumerate(EVENTS[200:])])
    segments = extensions_by_segment(stream_path)
    assert len(segments) >= 3
    assert all(extensions == {"data", "index", "keyindex"} for extensions in segments.values()), segments
    assert [message.value for message in await drain(stream_path)] == EVENTS
    assert invoke("check", stream_path).exit_code == 0


async def test_a_plain_stream_keeps_its_time_and_tag_index(stream_path: str) -> None:
    """Without compression the layout stays as older versions read it: every index file, always."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many(EVENTS[:10])
    assert extensions_by_segment(stream_path) == {0: {"data", "index", "timeindex", "tagindex", "keyindex"}}


async def test_lookups_by_time_read_the_records_timestamps(stream_path: str) -> None:
    """A consumer started at a time, `adiskq read --start TIME` and `stats` find the same messages
    and timestamps in a compact stream as the time index gives elsewhere, across sealed segments,
    with timestamps out of order in a batch."""
    base = 1_800_000_000 * 10**9
    records = [adiskq.Record(value, timestamp=base + 1000 * number) for number, value in enumerate(EVENTS)]
    records[50], records[51] = records[51], records[50]  # out of order: the first at or after wins
    await push_in_batches(stream_path, records)
    assert len(extensions_by_segment(stream_path)) > 3
    at = dt.datetime.fromtimestamp((base + 1000 * 300) / 10**9, dt.UTC)
    assert (await drain(stream_path, start=at))[0].offset == 300
    at = dt.datetime.fromtimestamp((base + 1000 * 50) / 10**9, dt.UTC)
    assert (await drain(stream_path, start=at))[0].offset == 50  # stamped 51 x 1000 ns: after the time
    partition = adiskq.stats(stream_path).partitions[0]
    assert (partition.oldest_timestamp_ns, partition.newest_timestamp_ns) == (base, base + 1000 * (len(EVENTS) - 1))
    result = invoke("read", stream_path, "--start", "2027-01-15T08:00:00.000300Z", "--limit", "1", "--format", "json")
    assert result.exit_code == 0, result.output
    assert '"offset": 300' in result.stdout


async def test_retention_by_age_reads_the_records_timestamps(stream_path: str) -> None:
    """Vacuum by age finds a sealed segment's newest timestamp in its records: the old segments go,
    the recent ones stay."""
    await push_in_batches(
        stream_path, [adiskq.Record(value, timestamp=10**12 + number * 10**9) for number, value in enumerate(EVENTS)]
    )
    writer = StreamWriter.open(stream_path)
    try:
        report = writer.vacuum(adiskq.Retention(max_age=dt.timedelta(seconds=100)), now_ns=10**12 + 300 * 10**9)
    finally:
        writer.close()
    assert report.removed_messages > 0
    oldest = adiskq.stats(stream_path).partitions[0].oldest_offset
    assert 0 < oldest <= 200  # messages stamped from 200 s on are within the last 100 s: kept
    assert adiskq.read(stream_path, 0, oldest).value == EVENTS[oldest]


async def push_in_batches(stream_path: str, records: list[adiskq.Record[str, bytes]]) -> None:
    """push_many of 50 at a time into 8 KiB segments: several segments."""
    async with adiskq.Producer(stream_path, **compressed(segment_size_bytes=8192)) as producer:  # type: ignore[arg-type]
        for first in range(0, len(records), 50):
            await producer.push_many(records[first : first + 50])


async def test_the_first_tagged_message_makes_the_tag_index(stream_path: str) -> None:
    """Untagged single pushes and a batch leave the segment without .tagindex; a tagged push makes
    it, the messages before it entered as untagged; a tag filter then finds exactly the tagged ones,
    and the stream checks clean."""
    async with adiskq.Producer(stream_path, **compressed()) as producer:  # type: ignore[arg-type]
        for number in range(5):
            await producer.push(EVENTS[number], key=f"order-{number}")
        await producer.push_many(EVENTS[5:10])
        await producer.flush()
        assert "tagindex" not in extensions_by_segment(stream_path)[0]
        await producer.push(EVENTS[10], tag="paid")
        await producer.push_many([adiskq.Record(EVENTS[11]), adiskq.Record(EVENTS[12], tag="paid")])
    entries = tag_entries(stream_path)
    assert len(entries) == 13
    assert [bool(entry) for entry in entries] == [False] * 10 + [True, False, True]
    assert [m.offset for m in await drain(stream_path, tags={"paid"})] == [10, 12]
    assert invoke("check", stream_path).exit_code == 0


async def test_a_clean_close_is_trusted_without_a_time_or_tag_index(stream_path: str) -> None:
    """The next producer trusts a compact segment a clean close left, tag index or not (no full check)."""
    async with adiskq.Producer(stream_path, **compressed()) as producer:  # type: ignore[arg-type]
        await producer.push_many(EVENTS[:20])
    writer = StreamWriter.open(stream_path)
    try:
        assert writer.recovery.clean_partitions == (0,)
    finally:
        writer.close()


async def test_recovery_keeps_to_the_compact_layout(stream_path: str) -> None:
    """After a crash (no clean close), recovery makes no .timeindex and removes a stray one, makes no
    .tagindex for a segment without tags, and rebuilds a lost one where a record has a tag."""
    async with adiskq.Producer(stream_path, **compressed()) as producer:  # type: ignore[arg-type]
        await producer.push_many(EVENTS[:20])
    (pathlib.Path(stream_path) / "recovery.json").unlink()
    folder = partition_folder(stream_path)
    (folder / f"{0:020d}.timeindex").write_bytes(b"stale")
    report = _reopen(stream_path)
    assert any("removed a .timeindex" in str(repair) for repair in report.repairs)
    assert extensions_by_segment(stream_path)[0] == {"data", "index", "keyindex"}

    async with adiskq.Producer(stream_path) as producer:
        await producer.push(EVENTS[20], tag="paid")
    (pathlib.Path(stream_path) / "recovery.json").unlink()
    (folder / f"{0:020d}.tagindex").unlink()
    report = _reopen(stream_path)
    assert any("recreated missing .tagindex" in str(repair) for repair in report.repairs)
    assert [bool(entry) for entry in tag_entries(stream_path)] == [False] * 20 + [True]
    assert invoke("check", stream_path).exit_code == 0


def _reopen(stream_path: str) -> adiskq.RecoveryReport:
    writer = StreamWriter.open(stream_path)
    try:
        return writer.recovery
    finally:
        writer.close()


async def test_shared_producers_keep_one_tag_entry_a_message(stream_path: str) -> None:
    """Two shared producers take turns on a compressed stream: one makes the .tagindex with a tagged
    push, and the other, which opened before it existed, enters its messages there too."""
    async with adiskq.Producer(stream_path, **compressed(shared=True)) as first:  # type: ignore[arg-type]
        await first.push(EVENTS[0])
        async with adiskq.Producer(stream_path, **compressed(shared=True)) as second:  # type: ignore[arg-type]
            await second.push(EVENTS[1])
            await first.push(EVENTS[2], tag="paid")
            await first.flush()
            await second.push(EVENTS[3])
            await second.push_many([adiskq.Record(EVENTS[4], tag="paid"), adiskq.Record(EVENTS[5])])
            await first.push(EVENTS[6])
    assert [bool(entry) for entry in tag_entries(stream_path)] == [False, False, True, False, True, False, False]
    assert [m.offset for m in await drain(stream_path, tags={"paid"})] == [2, 4]
    assert [m.value for m in await drain(stream_path)] == EVENTS[:7]
    assert invoke("check", stream_path).exit_code == 0


async def test_a_plain_segment_that_lost_its_time_index_is_still_found_by_time(stream_path: str) -> None:
    """A sealed segment of an uncompressed stream whose .timeindex was deleted is searched through its
    records too, instead of being passed over, until the next producer open rebuilds the file."""
    base = 1_800_000_000 * 10**9
    async with adiskq.Producer(stream_path, segment_size_bytes=8192) as producer:
        for first in range(0, len(EVENTS), 50):
            await producer.push_many(
                [
                    adiskq.Record(value, timestamp=base + 1000 * (first + i))
                    for i, value in enumerate(EVENTS[first : first + 50])
                ]
            )
    sealed = sorted(extensions_by_segment(stream_path))[1]
    (partition_folder(stream_path) / f"{sealed:020d}.timeindex").unlink()
    assert adiskq.offset_for_time(stream_path, 0, base + 1000 * (sealed + 1)) == sealed + 1
