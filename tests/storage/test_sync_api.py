"""The synchronous read API: adiskq.read, adiskq.offset_for_time and adiskq.stats."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from support.storage import append, expected_messages, fields, read_all, write_stream
from support.unprivileged import as_nobody

import adiskq
from adiskq._sansio.values import Message, ns_from_datetime
from adiskq._storage.stream import StreamWriter

T0 = 1_700_000_000 * 10**9  # 2023-11-14T22:13:20Z


def _at(*stamps: int) -> list[tuple[bytes, bytes, int, dict[str, bytes]]]:
    """Records with these timestamps (ns)."""
    return [(b"v%d" % i, b"k", stamp, {}) for i, stamp in enumerate(stamps)]


def _segmented(stream_path: str, segments: list[list[int]]) -> None:
    """A one-partition stream with one segment per list of timestamps."""
    writer = StreamWriter.open(stream_path, segment_size_bytes=1024)
    try:
        for i, stamps in enumerate(segments):
            if i:
                writer.partitions[0].roll()
            append(writer.partitions[0], _at(*stamps))
    finally:
        writer.close()


# -- read ----------------------------------------------------------------------------------------


def test_read_returns_the_message(stream_path: str) -> None:
    """read() gives the message at an offset, with its partition, offset, time, key, value and headers."""
    write_stream(stream_path, [fields(4)])
    assert adiskq.read(stream_path, 0, 3) == expected_messages(fields(4))[3]
    assert adiskq.read(stream_path, 0, 0).headers == {"n": b"0"}


def test_read_beyond_the_end_is_out_of_range(stream_path: str) -> None:
    """An offset not written yet raises OffsetOutOfRangeError (an IndexError) naming the range held."""
    write_stream(stream_path, [fields(3)])
    with pytest.raises(adiskq.OffsetOutOfRangeError, match=r"not written yet \(the partition holds offsets 0\.\.2\)"):
        adiskq.read(stream_path, 0, 3)
    with pytest.raises(IndexError):
        adiskq.read(stream_path, 0, 10**9)


def test_read_of_an_empty_partition_is_out_of_range(stream_path: str) -> None:
    """Reading offset 0 of an empty partition raises OffsetOutOfRangeError saying it holds no message."""
    StreamWriter.open(stream_path).close()
    with pytest.raises(adiskq.OffsetOutOfRangeError, match=r"not written yet \(the partition holds no message\)"):
        adiskq.read(stream_path, 0, 0)


def test_read_of_a_negative_offset_is_out_of_range(stream_path: str) -> None:
    """A negative offset raises OffsetOutOfRangeError."""
    write_stream(stream_path, [fields(1)])
    with pytest.raises(adiskq.OffsetOutOfRangeError, match="start at 0"):
        adiskq.read(stream_path, 0, -1)


def test_read_of_a_vacuumed_offset_is_out_of_range(stream_path: str) -> None:
    """An offset deleted by retention raises OffsetOutOfRangeError carrying the oldest offset left."""
    _segmented(stream_path, [[1, 2], [3, 4], [5]])
    writer = StreamWriter.open(stream_path)
    try:
        writer.vacuum(adiskq.Retention(max_age=dt.timedelta(microseconds=1)), now_ns=10**6)
    finally:
        writer.close()
    with pytest.raises(adiskq.OffsetOutOfRangeError, match="deleted by retention") as caught:
        adiskq.read(stream_path, 0, 1)
    assert (caught.value.oldest_offset, caught.value.offset, caught.value.partition) == (4, 1, 0)
    assert adiskq.read(stream_path, 0, 4).timestamp_ns == 5


@pytest.mark.parametrize("partition", [2, -1, 10**6])
def test_read_of_a_missing_partition_is_refused(stream_path: str, partition: int) -> None:
    """A partition the stream does not have raises InvalidArgumentError naming the partitions it has."""
    StreamWriter.open(stream_path, partitions=2).close()
    with pytest.raises(adiskq.InvalidArgumentError, match=r"has partitions 0\.\.1"):
        adiskq.read(stream_path, partition, 0)


def test_read_sees_a_partition_added_after_opening(stream_path: str) -> None:
    """A partition another producer added is readable without reopening anything."""
    write_stream(stream_path, [fields(1)], partitions=1)
    writer = StreamWriter.open(stream_path, partitions=2)
    try:
        append(writer.partitions[1], fields(1, 7))
    finally:
        writer.close()
    assert adiskq.read(stream_path, 1, 0) == expected_messages(fields(1, 7), partition=1)[0]


def test_read_across_segments(stream_path: str) -> None:
    """read() finds offsets in sealed segments and in the active one."""
    _segmented(stream_path, [[10, 11], [12], [13, 14]])
    assert [adiskq.read(stream_path, 0, offset).timestamp_ns for offset in range(5)] == [10, 11, 12, 13, 14]


def test_message_timestamp_is_utc() -> None:
    """Message.timestamp is an aware UTC datetime."""
    message = Message(0, 0, T0 + 1500, b"", b"")
    assert message.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=dt.UTC)


# -- offset_for_time -----------------------------------------------------------------------------


def test_offset_for_time_in_one_segment(stream_path: str) -> None:
    """The first offset at or after a time: exact, between, before all, and after all (next offset)."""
    _segmented(stream_path, [[10, 20, 30]])
    assert [adiskq.offset_for_time(stream_path, 0, t) for t in (10, 15, 20, 30, 0, -5, 31)] == [0, 1, 1, 2, 0, 0, 3]


def test_offset_for_time_in_a_segment_of_one_message(stream_path: str) -> None:
    """A segment holding one message is found by a time at or before it (go-diskq misses this)."""
    _segmented(stream_path, [[10], [20], [30]])
    assert [adiskq.offset_for_time(stream_path, 0, t) for t in (5, 10, 11, 20, 21, 30, 31)] == [0, 0, 1, 1, 2, 2, 3]


def test_offset_for_time_across_segments(stream_path: str) -> None:
    """Times that fall in, between and around several segments map to the right offsets."""
    _segmented(stream_path, [[10, 20], [30, 40, 50], [60]])
    cases = {9: 0, 10: 0, 25: 2, 30: 2, 45: 4, 50: 4, 55: 5, 60: 5, 61: 6}
    assert {t: adiskq.offset_for_time(stream_path, 0, t) for t in cases} == cases


def test_offset_for_time_takes_datetimes(stream_path: str) -> None:
    """`when` may be an aware or a naive (UTC) datetime."""
    _segmented(stream_path, [[T0, T0 + 2000]])
    aware = dt.datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=dt.UTC)
    naive = aware.replace(tzinfo=None)
    other_zone = aware.astimezone(dt.timezone(dt.timedelta(hours=5)))
    assert ns_from_datetime(aware) == T0 + 1000
    assert [adiskq.offset_for_time(stream_path, 0, w) for w in (aware, naive, other_zone)] == [1, 1, 1]


def test_offset_for_time_of_an_empty_partition_is_zero(stream_path: str) -> None:
    """An empty partition answers its next offset, 0."""
    StreamWriter.open(stream_path).close()
    assert adiskq.offset_for_time(stream_path, 0, 0) == 0


def test_offset_for_time_after_vacuum_starts_at_the_oldest_left(stream_path: str) -> None:
    """A time before every retained message maps to the oldest offset still stored."""
    _segmented(stream_path, [[10, 20], [30], [40]])
    writer = StreamWriter.open(stream_path)
    try:
        writer.delete_segments([(0, 0)])
    finally:
        writer.close()
    assert adiskq.offset_for_time(stream_path, 0, 0) == 2


def test_offset_for_time_with_unordered_timestamps(stream_path: str) -> None:
    """With timestamps out of order, the answer is the first offset whose time is at or after `when`."""
    _segmented(stream_path, [[50, 10, 60, 20]])
    assert [adiskq.offset_for_time(stream_path, 0, t) for t in (15, 55, 61)] == [0, 2, 4]


def test_offset_for_time_ignores_uncommitted_time_entries(stream_path: str) -> None:
    """A .timeindex entry whose .index entry is not written yet is not an answer."""
    _segmented(stream_path, [[10]])
    timeindex = os.path.join(stream_path, "parts", "000000", f"{0:020d}.timeindex")
    with open(timeindex, "ab") as file:
        file.write((1).to_bytes(8, "little") + (99).to_bytes(8, "little"))
    assert adiskq.offset_for_time(stream_path, 0, 50) == 1


# -- stats ---------------------------------------------------------------------------------------


def test_stats_of_a_stream(stream_path: str) -> None:
    """stats() gives each partition's offsets, segments, bytes and timestamps, and the stream's totals."""
    _segmented(stream_path, [[10, 20], [30]])
    writer = StreamWriter.open(stream_path, partitions=2)
    writer.close()
    stats = adiskq.stats(stream_path)
    files = os.path.join(stream_path, "parts", "000000")
    size = sum(os.path.getsize(os.path.join(files, name)) for name in os.listdir(files))
    assert stats.path == os.path.abspath(stream_path)
    assert stats.partitions == [
        adiskq.PartitionStats(0, 0, 3, 2, size, 10, 30),
        adiskq.PartitionStats(1, 0, 0, 1, 0, None, None),
    ]
    assert (stats.message_count, stats.size_bytes) == (3, size)
    assert (stats.owner, stats.groups) == (None, {})
    assert stats.last_recovery == writer.recovery


def test_stats_after_vacuum(stream_path: str) -> None:
    """After vacuum, stats() counts only the retained segments and messages."""
    _segmented(stream_path, [[10, 20], [30], [40]])
    writer = StreamWriter.open(stream_path)
    try:
        report = writer.vacuum(adiskq.Retention(max_age=dt.timedelta(microseconds=1)), now_ns=35_000)
    finally:
        writer.close()
    assert report.removed_segments == ((0, 0), (0, 2))
    assert report.removed_messages == 3
    partition = adiskq.stats(stream_path).partitions[0]
    assert (partition.oldest_offset, partition.next_offset, partition.segments) == (3, 4, 1)
    assert (partition.oldest_timestamp_ns, partition.newest_timestamp_ns, partition.message_count) == (40, 40, 1)


def test_stats_while_a_producer_writes(stream_path: str) -> None:
    """stats() of a stream with a live producer names it and sees what it has committed."""
    writer = StreamWriter.open(stream_path)
    try:
        append(writer.partitions[0], fields(2))
        stats = adiskq.stats(stream_path)
    finally:
        writer.close()
    assert stats.owner is not None
    assert stats.owner["pid"] == os.getpid()
    assert stats.partitions[0].next_offset == 2


# -- readers need only read permission -----------------------------------------------------------


def _cannot_write(directory: str) -> bool:
    try:
        os.close(os.open(os.path.join(directory, "probe"), os.O_WRONLY | os.O_CREAT, 0o644))
    except PermissionError:
        return True
    return False


def test_readers_need_only_read_permission(shared_dir: str) -> None:
    """A user who may only read the stream's files gets read, offset_for_time, stats and a full scan."""
    stream = os.path.join(shared_dir, "stream")
    _segmented(stream, [[10, 20], [30]])
    writer = StreamWriter.open(stream, mode=0o644)
    append(writer.partitions[0], _at(40))
    writer.close()
    expected = (
        True,
        adiskq.read(stream, 0, 3),
        2,
        adiskq.stats(stream),
        read_all(os.path.join(stream, "parts", "000000")),
    )
    seen = as_nobody(
        lambda: (
            _cannot_write(stream),
            adiskq.read(stream, 0, 3),
            adiskq.offset_for_time(stream, 0, 25),
            adiskq.stats(stream),
            read_all(os.path.join(stream, "parts", "000000")),
        )
    )
    assert seen == expected
    assert not os.path.exists(os.path.join(stream, "probe"))


def test_unprivileged_stats_names_the_live_producer(shared_dir: str) -> None:
    """A read-only user sees who holds the stream, through the owner file's lock."""
    stream = os.path.join(shared_dir, "stream")
    writer = StreamWriter.open(stream, mode=0o644)
    try:
        append(writer.partitions[0], fields(3))
        owner = as_nobody(lambda: adiskq.stats(stream).owner)
    finally:
        writer.close()
    assert isinstance(owner, dict)
    assert owner["pid"] == os.getpid()


def test_all_messages_read_back(stream_path: str) -> None:
    """Everything written through the storage layer reads back in order."""
    write_stream(stream_path, [fields(10), fields(5, 10)])
    assert read_all(os.path.join(stream_path, "parts", "000000")) == expected_messages(fields(15))
