"""Segments and partitions: append, roll, read across segments and vacuum, failed writes, damage."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence

import pytest
from support.storage import append, encode, expected_messages, fields, read_all

import adiskq
from adiskq._storage import segment_reader, segment_writer
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.partition_writer import PartitionWriter
from adiskq._storage.segment_writer import SegmentWriter


@pytest.fixture
def directory(tmp_path: os.PathLike[str]) -> str:
    """A partition folder that does not exist yet."""
    return os.path.join(os.fspath(tmp_path), "000000")


@pytest.fixture
def writer(directory: str) -> Iterator[PartitionWriter]:
    """A partition writer with small (1 KiB) segments."""
    partition, repairs = PartitionWriter.open(directory, 0, segment_size_bytes=1024)
    assert repairs == []
    try:
        yield partition
    finally:
        partition.close()


def _file(directory: str, base: int, extension: str) -> str:
    return os.path.join(directory, f"{base:020d}.{extension}")


def _sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}


def test_new_partition_has_an_empty_first_segment(writer: PartitionWriter, directory: str) -> None:
    """Opening a missing partition creates its folder and segment 0's files (with its tag and key indexes)."""
    assert _sizes(directory) == {f"{0:020d}.{ext}": 0 for ext in ("data", "index", "timeindex", "tagindex", "keyindex")}
    assert (writer.oldest_offset, writer.next_offset, writer.segment_count) == (0, 0, 1)


def test_appends_get_consecutive_offsets(writer: PartitionWriter, directory: str) -> None:
    """Each batch starts at the offset after the previous one, and the index files grow per message."""
    assert append(writer, fields(3)) == 0
    assert append(writer, fields(1, 3)) == 3
    assert os.path.getsize(_file(directory, 0, "index")) == 4 * 24
    assert os.path.getsize(_file(directory, 0, "timeindex")) == 4 * 16
    assert read_all(directory) == expected_messages(fields(4))


def test_segment_rolls_when_full(writer: PartitionWriter, directory: str) -> None:
    """A batch after the active segment reached segment_size_bytes starts a segment named by its offset."""
    big = [(b"x" * 600, b"k", 1, {})]
    append(writer, big)
    append(writer, big)  # the segment is not full before this batch: no roll yet
    assert writer.segment_count == 1
    assert append(writer, big) == 2
    assert writer.segment_count == 2
    assert writer.active.base_offset == 2
    assert os.path.exists(_file(directory, 2, "index"))
    assert PartitionReader(directory, 0).segment_bases() == [0, 2]


def test_rolling_an_empty_segment_does_nothing(writer: PartitionWriter) -> None:
    """roll() on an empty active segment keeps it (a new one would have the same name)."""
    writer.roll()
    assert writer.segment_count == 1
    append(writer, fields(1))
    writer.roll()
    writer.roll()
    assert writer.segment_count == 2


def test_reader_bisects_to_the_right_segment(writer: PartitionWriter, directory: str) -> None:
    """read_one finds any offset among many segments."""
    for start in range(0, 30, 3):
        append(writer, fields(3, start))
        writer.roll()
    reader = PartitionReader(directory, 0)
    assert len(reader.segment_bases()) == 11
    assert [reader.read_one(offset) for offset in (0, 4, 17, 29)] == [
        expected_messages(fields(30))[offset] for offset in (0, 4, 17, 29)
    ]


def test_cursor_follows_appends_and_rolls(writer: PartitionWriter, directory: str) -> None:
    """A caught-up cursor returns [] and then continues with later appends, across a roll."""
    with PartitionReader(directory, 0).cursor(0) as cursor:
        assert cursor.read() == []
        append(writer, fields(2))
        assert cursor.read() == expected_messages(fields(2))
        assert cursor.read() == []
        writer.roll()
        assert cursor.read() == []
        append(writer, fields(2, 2))
        assert cursor.read() == expected_messages(fields(2, 2), first_offset=2)
        assert cursor.position == 4


def test_cursor_waits_for_the_next_segments_index(writer: PartitionWriter, directory: str) -> None:
    """A cursor does not move on while the next segment has no .index yet (a roll in progress)."""
    append(writer, fields(2))
    with open(_file(directory, 2, "data"), "wb"):
        pass
    with PartitionReader(directory, 0).cursor(0) as cursor:
        assert len(cursor.read()) == 2
        assert cursor.read() == []


def test_cursor_reports_vacuumed_offsets(writer: PartitionWriter, directory: str) -> None:
    """A cursor at a deleted offset raises OffsetOutOfRangeError with the oldest offset; seek goes on."""
    for start in (0, 2, 4):
        append(writer, fields(2, start))
        writer.roll()
    writer.delete_segments([0, 2])
    with PartitionReader(directory, 0).cursor(1) as cursor:
        with pytest.raises(adiskq.OffsetOutOfRangeError, match="oldest offset is now 4") as caught:
            cursor.read()
        assert caught.value.oldest_offset == 4
        cursor.seek(caught.value.oldest_offset)
        assert cursor.read() == expected_messages(fields(2, 4), first_offset=4)


def test_cursor_finishes_a_segment_vacuumed_under_it(writer: PartitionWriter, directory: str) -> None:
    """A segment deleted while a cursor reads it is read to its end through the open files: no gap."""
    append(writer, fields(3))
    writer.roll()
    append(writer, fields(2, 3))
    writer.roll()
    with PartitionReader(directory, 0).cursor(0) as cursor:
        first = cursor.read(1)
        writer.delete_segments([0])
        rest = cursor.read(10)
        rest += cursor.read(10)
    assert first + rest == expected_messages(fields(5))


def test_readers_never_see_a_torn_tail(writer: PartitionWriter, directory: str) -> None:
    """Bytes after the last indexed record (a write in progress) are invisible, not an error."""
    append(writer, fields(2))
    with open(_file(directory, 0, "data"), "ab") as file:
        file.write(b"\x40\x00\x00\x00partial")
    assert read_all(directory) == expected_messages(fields(2))


def test_data_without_index_entries_is_invisible(writer: PartitionWriter, directory: str) -> None:
    """Records written to .data become visible only when their index entries are written."""
    append(writer, fields(1))
    pending = writer.active.write_data(*encode(fields(2, 1)))
    assert read_all(directory) == expected_messages(fields(1))
    writer.active.write_entries(pending)
    assert read_all(directory) == expected_messages(fields(3))


def test_abandoned_batch_is_cut_back(writer: PartitionWriter, directory: str) -> None:
    """abandon() removes a batch's data; the next batch takes its offsets."""
    append(writer, fields(1))
    size = os.path.getsize(_file(directory, 0, "data"))
    pending = writer.active.write_data(*encode(fields(2, 50)))
    writer.active.abandon(pending)
    assert os.path.getsize(_file(directory, 0, "data")) == size
    assert append(writer, fields(2, 1)) == 1
    assert read_all(directory) == expected_messages(fields(3))


def test_batches_are_written_one_at_a_time(writer: PartitionWriter) -> None:
    """A second write_data before write_entries, or a stranger's batch, is a programming error."""
    pending = writer.active.write_data(*encode(fields(1)))
    with pytest.raises(RuntimeError, match="already waiting"):
        writer.active.write_data(*encode(fields(1)))
    with pytest.raises(RuntimeError, match="the last write_data"):
        writer.active.write_entries(pending._replace(message_count=5))
    writer.active.write_entries(pending)


def test_corrupt_committed_record_names_file_and_position(writer: PartitionWriter, directory: str) -> None:
    """A damaged record inside committed data raises CorruptRecordError with the .data path and byte."""
    records, _ = encode(fields(3))
    append(writer, fields(3))
    position = len(records[0]) + len(records[1])
    with open(_file(directory, 0, "data"), "r+b") as file:
        file.seek(position + len(records[2]) - 1)
        file.write(b"\x00" if records[2][-1] else b"\x01")
    with pytest.raises(adiskq.CorruptRecordError, match="CRC") as caught:
        read_all(directory)
    assert (caught.value.path, caught.value.position) == (_file(directory, 0, "data"), position)


def test_index_entry_for_the_wrong_offset_is_corrupt(writer: PartitionWriter, directory: str) -> None:
    """An index entry naming another offset raises CorruptRecordError with the .index path and byte."""
    append(writer, fields(3))
    with open(_file(directory, 0, "index"), "r+b") as file:
        file.seek(24)
        file.write((7).to_bytes(8, "little"))
    reader = PartitionReader(directory, 0)
    with pytest.raises(adiskq.CorruptRecordError, match="for offset 7, expected 1") as caught:
        reader.read_one(1)
    assert (caught.value.path, caught.value.position) == (_file(directory, 0, "index"), 24)


def test_index_pointing_past_the_data_is_corrupt(writer: PartitionWriter, directory: str) -> None:
    """Committed entries whose records are missing from .data raise CorruptRecordError."""
    append(writer, fields(3))
    os.truncate(_file(directory, 0, "data"), 10)
    with pytest.raises(adiskq.CorruptRecordError, match="past the end of the data"):
        read_all(directory)


def test_sealed_segments_are_read_through_their_mapping(writer: PartitionWriter, directory: str) -> None:
    """A segment with a later one is read from a view of its mapping; the messages are the same
    (bytes keys and values, copied out), and the active segment is still read with pread."""
    append(writer, fields(3))
    writer.roll()
    append(writer, fields(2, 3))
    with PartitionReader(directory, 0).cursor(0) as cursor:
        segment = cursor._current()
        assert segment is not None
        assert segment.sealed
        assert isinstance(segment.read_span(0, 10), memoryview)
        messages = cursor.read(10) + cursor.read(10)
        active = cursor._current()
        assert active is not None
        assert not active.sealed
        assert type(active.read_span(0, 10)) is bytes
    assert messages == expected_messages(fields(5))
    assert {type(m.key) for m in messages} == {type(m.value) for m in messages} == {bytes}


def test_a_sealed_segment_that_cannot_be_mapped_is_read_with_pread(
    writer: PartitionWriter, directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without address space for a mapping (ENOMEM), a sealed segment's messages are read as the
    active segment's are, with pread."""
    append(writer, fields(3))
    writer.roll()
    append(writer, fields(2, 3))

    def no_space(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(segment_reader.mmap, "mmap", no_space)
    assert read_all(directory) == expected_messages(fields(5))


def test_corrupt_record_in_a_sealed_segment_names_file_and_position(writer: PartitionWriter, directory: str) -> None:
    """Read through the mapping, a damaged record raises as it does when read with pread, and the
    messages before it are delivered first."""
    records, _ = encode(fields(3))
    append(writer, fields(3))
    writer.roll()
    append(writer, fields(1, 3))
    position = len(records[0]) + len(records[1])
    with open(_file(directory, 0, "data"), "r+b") as file:
        file.seek(position + len(records[2]) - 1)
        file.write(b"\x00" if records[2][-1] else b"\x01")
    with PartitionReader(directory, 0).cursor(0) as cursor:
        assert cursor.read(10) == expected_messages(fields(2))
        with pytest.raises(adiskq.CorruptRecordError, match="CRC") as caught:
            cursor.read(10)
    assert (caught.value.path, caught.value.position) == (_file(directory, 0, "data"), position)


def test_sealed_data_shorter_than_its_index_is_corrupt(writer: PartitionWriter, directory: str) -> None:
    """A sealed segment cut short (not by adiskq) is mapped only as far as it goes: a read past its
    end raises CorruptRecordError instead of touching unmapped bytes."""
    append(writer, fields(3))
    writer.roll()
    append(writer, fields(1, 3))
    os.truncate(_file(directory, 0, "data"), 10)
    with pytest.raises(adiskq.CorruptRecordError, match="past the end of the data"):
        read_all(directory)


def test_read_respects_max_bytes(writer: PartitionWriter, directory: str) -> None:
    """read(max_bytes=) returns at least one message, then only as many as fit."""
    append(writer, [(b"x" * 100, b"", 0, {})] * 10)
    with PartitionReader(directory, 0).cursor(0) as cursor:
        assert len(cursor.read(10, max_bytes=1)) == 1
        assert len(cursor.read(10, max_bytes=3 * 126)) == 3
        assert len(cursor.read(10, max_bytes=10**6)) == 6


@pytest.mark.parametrize(
    "batch",
    [fields(3, 2), [(b"x" * 600_000, b"k", 5, {}), (b"y" * 600_000, b"k", 6, {})]],
    ids=["small-records-joined", "large-records-writev"],
)
def test_failed_data_write_leaves_the_segment_as_it_was(
    directory: str, monkeypatch: pytest.MonkeyPatch, batch: list[tuple[bytes, bytes, int, dict[str, bytes]]]
) -> None:
    """A write that fails halfway (a full disk) is cut back; the next batch gets the same offsets."""
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=10**7)
    append(writer, fields(2))
    before = _sizes(directory)
    real_write, real_writev = os.write, os.writev

    def full_disk_write(fd: int, data: bytes) -> int:
        real_write(fd, memoryview(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    def full_disk_writev(fd: int, buffers: Sequence[bytes]) -> int:
        real_writev(fd, buffers[:1])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk_write)
    monkeypatch.setattr(os, "writev", full_disk_writev)
    with pytest.raises(OSError, match="No space"):
        append(writer, batch)
    monkeypatch.undo()
    assert _sizes(directory) == before
    assert append(writer, batch) == 2
    assert read_all(directory) == expected_messages(fields(2) + batch)
    writer.close()


def test_short_writes_are_completed(directory: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system that takes fewer bytes than asked gets the rest in further writes."""
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=10**7)
    real_write, real_writev = os.write, os.writev
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, memoryview(data)[:4093]))
    monkeypatch.setattr(os, "writev", lambda fd, buffers: real_writev(fd, buffers[:1]))
    big = [(b"x" * 600_000, b"k", 5, {}), (b"y" * 600_000, b"k", 6, {})]
    append(writer, fields(3))
    append(writer, big)
    monkeypatch.undo()
    assert read_all(directory) == expected_messages(fields(3) + big)
    writer.close()


def test_failed_index_write_leaves_the_segment_as_it_was(
    writer: PartitionWriter, directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the index entries cannot be written, the batch's data and entries are all cut back."""
    append(writer, fields(2))
    before = _sizes(directory)
    real_write_all = segment_writer.write_all
    calls = []

    def fail_second(fd: int, data: bytes) -> None:
        calls.append(fd)
        real_write_all(fd, data[:5])
        if len(calls) == 2:  # the .index entries, after the .timeindex ones
            raise OSError(errno.EIO, "I/O error")
        real_write_all(fd, data[5:])

    monkeypatch.setattr(segment_writer, "write_all", fail_second)
    with pytest.raises(OSError, match="I/O error"):
        append(writer, fields(3, 2))
    monkeypatch.undo()
    assert _sizes(directory) == before
    assert append(writer, fields(1, 2)) == 2
    assert read_all(directory) == expected_messages(fields(3))


def test_unrepairable_segment_refuses_writes(
    writer: PartitionWriter, directory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If even the cut-back fails, the segment refuses further writes and says to reopen."""

    def failing(*args: object) -> int:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "write", failing)
    monkeypatch.setattr(os, "ftruncate", failing)
    with pytest.raises(OSError, match="I/O error"):
        append(writer, fields(2))
    monkeypatch.undo()
    with pytest.raises(OSError, match="open it again"):
        append(writer, fields(2))


def test_closed_segment_refuses_writes(directory: str) -> None:
    """Writing to a closed segment raises; closing twice is harmless."""
    os.mkdir(directory)
    segment = SegmentWriter.create(directory, 0)
    segment.close()
    segment.close()
    with pytest.raises(ValueError, match="closed"):
        segment.append(*encode(fields(1)))


def test_active_segment_is_never_deleted(writer: PartitionWriter) -> None:
    """delete_segments refuses the active segment."""
    with pytest.raises(ValueError, match="never deleted"):
        writer.delete_segments([writer.active.base_offset])


def test_vacuum_deletes_index_first_and_whole_segments(writer: PartitionWriter, directory: str) -> None:
    """Deleted segments leave no file behind, and the report counts their messages and bytes."""
    append(writer, fields(3))
    writer.roll()
    size = sum(_sizes(directory).values())
    append(writer, fields(1, 3))
    report = writer.delete_segments([0])
    assert (report.removed_segments, report.removed_messages, report.removed_bytes) == (((0, 0),), 3, size)
    assert all(not name.startswith(f"{0:020d}") for name in os.listdir(directory))
    assert writer.oldest_offset == 3


def test_segment_infos_for_vacuum(writer: PartitionWriter) -> None:
    """segment_infos lists sealed segments with their newest timestamp, the active one last."""
    append(writer, [(b"a", b"", 50, {}), (b"b", b"", 40, {})])
    writer.roll()
    append(writer, fields(1, 2))
    infos = writer.segment_infos()
    assert [(i.base_offset, i.next_offset, i.newest_timestamp_ns) for i in infos] == [(0, 2, 50), (2, 3, None)]


def test_sync_is_harmless(writer: PartitionWriter, directory: str) -> None:
    """sync() fsyncs without changing anything."""
    append(writer, fields(2))
    writer.sync()
    assert read_all(directory) == expected_messages(fields(2))


def test_append_one_matches_append(directory: str) -> None:
    """append_one writes the same files as append of a one-record batch, at the next offset (once the
    time entries it buffers are written)."""
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=10**7)
    records, stamps = encode(fields(4))
    for record, stamp in zip(records, stamps, strict=True):
        assert writer.active.append_one(record, stamp) == writer.next_offset - 1
    writer.flush_buffered_entries()
    writer.close()
    assert read_all(directory) == expected_messages(fields(4))
    other = os.path.join(os.path.dirname(directory), "000001")
    twin, _ = PartitionWriter.open(other, 1, segment_size_bytes=10**7)
    for record, stamp in zip(records, stamps, strict=True):
        twin.append([record], [stamp])
    twin.close()
    for ext in ("data", "index", "timeindex"):
        with open(_file(directory, 0, ext), "rb") as mine, open(_file(other, 0, ext), "rb") as theirs:
            assert mine.read() == theirs.read()


@pytest.mark.parametrize("failing", ["data", "index"])
def test_failed_append_one_leaves_the_segment_as_it_was(
    writer: PartitionWriter, directory: str, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """append_one that fails writing data or entries is cut back; the record is appended later as usual."""
    append(writer, fields(2))
    before = _sizes(directory)
    records, stamps = encode(fields(1, 2))
    real_write = os.write
    calls: list[int] = []

    def fail(fd: int, data: bytes) -> int:
        calls.append(fd)
        if (failing == "data" and len(calls) == 1) or (failing == "index" and len(calls) == 2):
            real_write(fd, memoryview(data)[:3])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", fail)
    with pytest.raises(OSError, match="No space"):
        writer.active.append_one(records[0], stamps[0])
    monkeypatch.undo()
    assert _sizes(directory) == before
    assert writer.active.append_one(records[0], stamps[0]) == 2
    assert read_all(directory) == expected_messages(fields(3))


def test_append_one_refuses_a_closed_segment(writer: PartitionWriter) -> None:
    """append_one on a closed segment raises like append."""
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.active.append_one(encode(fields(1))[0][0], 0)
