"""Raw runs for columnar readers (adiskq._storage.columns): what they cover, across rolls and vacuum."""

from __future__ import annotations

import struct

import pytest
from support.spark import fill

from adiskq import CorruptRecordError, OffsetOutOfRangeError
from adiskq._sansio.codec import decode_messages
from adiskq._storage.columns import RawCursor, RawRun, RawSegment
from adiskq._storage.stream import StreamReader, StreamWriter


def runs(path: str, partition: int, start: int, max_count: int = 7, max_bytes: int | None = None) -> list[RawRun]:
    reader = StreamReader.open(path).partition(partition)
    out = []
    with RawCursor(reader, start) as cursor:
        while (run := cursor.read(max_count, max_bytes)) is not None:
            out.append(run)
    return out


def decoded(run: RawRun) -> list[tuple[int, bytes]]:
    messages = decode_messages(bytes(run.data), run.partition, run.first_offset, run.message_count)
    return [(m.offset, bytes(m.value)) for m in messages]


def test_runs_cover_a_partition_in_order_across_segment_rolls(stream_path: str) -> None:
    """Reading from 0 gives every message once, in order, though the partition has many segments."""
    fill(stream_path, [300], segment_size_bytes=1024)
    got = [item for run in runs(stream_path, 0, 0) for item in decoded(run)]
    assert got == [(i, f"v0-{i}".encode()) for i in range(300)]
    assert len(StreamReader.open(stream_path).partition(0).segment_bases()) > 5


def test_a_run_starts_at_the_asked_offset_and_respects_its_limits(stream_path: str) -> None:
    """A run begins at the cursor's offset, holds at most max_count messages and about max_bytes."""
    fill(stream_path, [50])
    first = runs(stream_path, 0, 10, max_count=5)[0]
    assert (first.first_offset, first.message_count) == (10, 5)
    small = runs(stream_path, 0, 0, max_count=50, max_bytes=1)[0]
    assert small.message_count == 1  # at least one message, whatever max_bytes says
    entries = struct.unpack_from("<QQQ", first.entries, 0)
    assert entries[1] == first.data_position


def test_sealed_segments_are_mapped_and_the_active_one_is_read(stream_path: str) -> None:
    """Runs of sealed segments are views of a mapping; the active segment's are bytes."""
    fill(stream_path, [200], segment_size_bytes=1024)
    all_runs = runs(stream_path, 0, 0, max_count=1000)
    assert isinstance(all_runs[0].data, memoryview)
    assert isinstance(all_runs[-1].data, bytes)


def test_a_cursor_returns_none_when_caught_up_and_sees_later_appends(stream_path: str) -> None:
    """None means caught up; messages appended afterwards are read by the same cursor."""
    fill(stream_path, [3])
    reader = StreamReader.open(stream_path).partition(0)
    with RawCursor(reader, 0) as cursor:
        assert cursor.read(10) is not None
        assert cursor.read(10) is None
        writer = StreamWriter.open(stream_path)
        try:
            writer.partitions[0].append([read_all_records(stream_path)[0]], [0])
        finally:
            writer.close()
        later = cursor.read(10)
    assert later is not None
    assert later.first_offset == 3


def read_all_records(path: str) -> list[bytes]:
    run = runs(path, 0, 0, max_count=1000)[0]
    sizes = [struct.unpack_from("<QQQ", run.entries, i * 24)[2] for i in range(run.message_count)]
    records, position = [], 0
    for size in sizes:
        records.append(bytes(run.data[position : position + size]))
        position += size
    return records


def test_vacuumed_offsets_raise_with_the_oldest_offset(stream_path: str) -> None:
    """Reading an offset vacuum deleted raises OffsetOutOfRangeError carrying the oldest offset."""
    fill(stream_path, [200], segment_size_bytes=1024)
    writer = StreamWriter.open(stream_path)
    try:
        bases = StreamReader.open(stream_path).partition(0).segment_bases()
        writer.delete_segments([(0, bases[0]), (0, bases[1])])
    finally:
        writer.close()
    with pytest.raises(OffsetOutOfRangeError) as caught:
        runs(stream_path, 0, 0)
    assert caught.value.oldest_offset == bases[2]
    assert runs(stream_path, 0, bases[2])[0].first_offset == bases[2]


def test_an_index_entry_for_another_offset_is_corruption(stream_path: str) -> None:
    """A run whose first index entry names another offset raises CorruptRecordError on the index."""
    fill(stream_path, [5])
    reader = StreamReader.open(stream_path).partition(0)
    base = reader.segment_bases()[0]
    index_path = f"{reader.directory}/{base:020d}.index"
    with open(index_path, "r+b") as index:
        index.seek(24 * 2)
        index.write(struct.pack("<Q", 77))
    segment = RawSegment.open(reader.directory, base, 0)
    try:
        with pytest.raises(CorruptRecordError) as caught:
            segment.read(2, 3)
    finally:
        segment.close()
    assert caught.value.path == index_path
    assert caught.value.position == 48


def damage_entry(path: str, offset: int, position: int | None = None, size: int | None = None) -> str:
    """Rewrite the position and/or size of one index entry of partition 0's only segment."""
    reader = StreamReader.open(path).partition(0)
    index_path = f"{reader.directory}/{reader.segment_bases()[0]:020d}.index"
    with open(index_path, "r+b") as index:
        index.seek(offset * 24)
        found, old_position, old_size = struct.unpack("<QQQ", index.read(24))
        index.seek(offset * 24)
        index.write(
            struct.pack(
                "<QQQ", found, old_position if position is None else position, old_size if size is None else size
            )
        )
    return index_path


def test_a_run_starting_at_a_displaced_entry_is_corruption(stream_path: str) -> None:
    """The first entry must start where the one before ends, or the run would begin at another record."""
    fill(stream_path, [5])
    index_path = damage_entry(stream_path, 3, position=0)
    with pytest.raises(CorruptRecordError, match="says position 0") as caught:
        runs(stream_path, 0, 3)
    assert (caught.value.path, caught.value.position) == (index_path, 72)


def test_an_entry_claiming_a_huge_size_is_corruption_not_an_allocation(stream_path: str) -> None:
    """A damaged size larger than the data file raises before any buffer of that size is made."""
    fill(stream_path, [5])
    damage_entry(stream_path, 4, size=1 << 40)
    with pytest.raises(CorruptRecordError, match="points outside the data"):
        runs(stream_path, 0, 0)
