"""The writer's side of the key index: one entry per message, buffered single pushes, the seal at a roll."""

from __future__ import annotations

import errno
import os
import zlib
from collections.abc import Callable

import pytest
from support.storage import encode, fields

from adiskq._sansio import keyindex as keyindex_format
from adiskq._sansio.codec import encode_record
from adiskq._sansio.entries import BUFFERED_ENTRIES
from adiskq._storage import keyindex, segment_writer
from adiskq._storage.partition_writer import PartitionWriter
from adiskq._storage.segment_writer import SegmentWriter


def column(directory: str, base: int = 0) -> list[int]:
    """The hashes in a segment's key index (its bare column, without any seal)."""
    with open(os.path.join(directory, f"{base:020d}.keyindex"), "rb") as file:
        raw = file.read()
    return keyindex_format.unpack_hashes(raw).tolist()


def key_hashes(batch: list[tuple[bytes, bytes, int, dict[str, bytes]]]) -> list[int]:
    return [zlib.crc32(key) for _, key, _, _ in batch]


def test_a_batch_writes_one_entry_per_message(tmp_path: object) -> None:
    """The hashes a producer passes are written beside the index entries, in offset order."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    batch = fields(10)
    writer.append(*encode(batch), key_hashes=[7] * 10)
    assert column(directory) == [7] * 10
    writer.close()


def test_a_batch_with_packed_hashes_writes_them_after_the_buffered_ones(tmp_path: object) -> None:
    """Hashes passed packed as the key index stores them (the Kafka gateway's) are written as they
    are, after the entries single pushes left buffered, one entry per message."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    writer.append_one(encode_record(b"v", b"k", 0), 0, key_hash=99)
    batch = fields(10)
    writer.append(*encode(batch), key_hashes=keyindex_format.pack_hashes(range(10)))
    assert column(directory) == [99, *range(10)]
    writer.append(*encode(fields(2)), key_hashes=keyindex_format.pack_hashes([5, 6]))
    assert column(directory) == [99, *range(10), 5, 6]
    writer.close()


def test_packed_hashes_of_another_count_are_refused_and_write_nothing(tmp_path: object) -> None:
    """A packed column that is not one entry a record would misplace every key after it: refused
    (ValueError) before anything is written."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    with pytest.raises(ValueError, match="one 4-byte entry a record"):
        writer.append(*encode(fields(3)), key_hashes=keyindex_format.pack_hashes([1, 2]))
    assert writer.next_offset == 0
    assert writer.data_size == 0
    assert os.path.getsize(os.path.join(directory, f"{0:020d}.data")) == 0
    writer.append(*encode(fields(2)), key_hashes=keyindex_format.pack_hashes([1, 2]))
    assert column(directory) == [1, 2]
    writer.close()


def test_a_batch_without_hashes_gets_its_keys_hashed(tmp_path: object) -> None:
    """A writer that passes no hashes (Spark, tests) gets each record's key hashed from the record."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    batch = fields(12)
    writer.append(*encode(batch))
    assert column(directory) == key_hashes(batch)
    writer.close()


def test_single_pushes_are_written_128_at_a_time(tmp_path: object) -> None:
    """append_one buffers its entry; the 128th writes them all; flush_buffered_entries writes the rest."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    for i in range(BUFFERED_ENTRIES - 1):
        writer.append_one(encode_record(b"v", b"k", i), i, key_hash=i)
    assert column(directory) == []
    writer.append_one(encode_record(b"v", b"k", 0), 0, key_hash=1000)
    assert column(directory) == [*range(127), 1000]
    writer.append_one(encode_record(b"v", b"k", 0), 0)
    writer.flush_buffered_entries()
    assert column(directory)[-1] == zlib.crc32(b"k")
    writer.close()


def test_a_batch_writes_the_buffered_entries_first(tmp_path: object) -> None:
    """Entries buffered by single pushes go out with the next batch, in offset order."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    writer.append_one(encode_record(b"v", b"a", 0), 0, key_hash=1)
    writer.append_one(encode_record(b"v", b"b", 0), 0, key_hash=2)
    writer.append(*encode(fields(2)), key_hashes=[3, 4])
    assert column(directory) == [1, 2, 3, 4]
    writer.close()


def test_a_stream_without_a_key_index_writes_none(tmp_path: object) -> None:
    """key_index=False: no .keyindex file, and appends cost nothing for it."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0, key_index=False)
    writer.append(*encode(fields(3)), key_hashes=[1, 2, 3])
    writer.append_one(encode_record(b"v", b"k", 0), 0, key_hash=4)
    writer.flush_buffered_entries()
    writer.seal_key_index()
    assert sorted(os.listdir(directory)) == [f"{0:020d}.{ext}" for ext in ("data", "index", "tagindex", "timeindex")]
    assert writer.file_state().keyindex_file is None
    writer.close()


def test_a_roll_seals_the_old_key_index(tmp_path: object) -> None:
    """After a roll the old segment's key index is sealed for its messages; the new one is empty."""
    directory = str(tmp_path)
    partition, _ = PartitionWriter.open(directory, 0, segment_size_bytes=1024)
    for i in range(40):
        partition.active.append_one(
            encode_record(b"x" * 40, b"key-%d" % (i % 3), i), i, zlib.crc32(b"key-%d" % (i % 3))
        )
    partition.roll()
    old = os.path.join(directory, f"{0:020d}.keyindex")
    assert keyindex.sealed_problem(old, 40, check_crc=True) is None
    index = keyindex.sealed_index(directory, 0, 40)
    assert index is not None
    assert index.candidates(zlib.crc32(b"key-1")) == list(range(1, 40, 3))
    assert column(directory, 40) == []
    partition.close()


def failing_writes(writer: SegmentWriter, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Make every write to the writer's key index fail with ENOSPC; returns the undo."""
    real = segment_writer.write_all

    def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
        if fd == writer._keyindex_fd:
            os.write(fd, bytes(data)[:3])  # a short write first, as at a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(segment_writer, "write_all", write_all)
    return lambda: monkeypatch.setattr(segment_writer, "write_all", real)


def sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}


def test_a_failed_key_index_write_undoes_the_batch(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC on the key index cuts every file back; the next batch writes correct entries."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    writer.append(*encode(fields(2)), key_hashes=[1, 2])
    before = sizes(directory)
    undo = failing_writes(writer, monkeypatch)
    with pytest.raises(OSError, match="No space"):
        writer.append(*encode(fields(3)), key_hashes=[3, 4, 5])
    assert sizes(directory) == before
    undo()
    writer.append(*encode(fields(3)), key_hashes=[6, 7, 8])
    assert column(directory) == [1, 2, 6, 7, 8]
    assert writer.next_offset == 5
    writer.close()


def test_a_failed_buffer_write_undoes_the_single_push(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A single push whose buffered entries cannot be written fails whole; the buffer is kept."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    for i in range(BUFFERED_ENTRIES - 1):
        writer.append_one(encode_record(b"v", b"k", i), i, key_hash=i)
    before = sizes(directory)
    undo = failing_writes(writer, monkeypatch)
    with pytest.raises(OSError, match="No space"):
        writer.append_one(encode_record(b"v", b"k", 0), 0, key_hash=999)
    assert sizes(directory) == before
    assert writer.next_offset == 127
    undo()
    writer.append_one(encode_record(b"v", b"k", 0), 0, key_hash=1000)
    assert column(directory) == [*range(127), 1000]
    writer.close()


def test_a_failed_seal_leaves_the_bare_column_and_can_be_retried(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A roll whose seal fails changes nothing a reader relies on; the next roll seals."""
    directory = str(tmp_path)
    partition, _ = PartitionWriter.open(directory, 0, segment_size_bytes=1024)
    partition.append(*encode(fields(5)))
    undo = failing_writes(partition.active, monkeypatch)
    monkeypatch.setattr(keyindex, "write_all", segment_writer.write_all)
    with pytest.raises(OSError, match="No space"):
        partition.roll()
    assert os.path.getsize(os.path.join(directory, f"{0:020d}.keyindex")) == 5 * 4
    assert partition.segment_count == 1
    undo()
    monkeypatch.undo()
    partition.roll()
    assert keyindex.sealed_problem(os.path.join(directory, f"{0:020d}.keyindex"), 5, check_crc=True) is None
    partition.close()


def test_a_roll_retried_after_its_seal_succeeded_never_cuts_the_sealed_key_index(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync_dir fails after the seal: the retried roll leaves the sealed file alone (readers may map it)."""
    directory = str(tmp_path)
    partition, _ = PartitionWriter.open(directory, 0, segment_size_bytes=1024)
    partition.append(*encode(fields(5)))
    path = os.path.join(directory, f"{0:020d}.keyindex")
    real_fsync_dir = segment_writer.fsync_dir

    def failing_fsync_dir(folder: str) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment_writer, "fsync_dir", failing_fsync_dir)
    with pytest.raises(OSError, match="Input/output"):
        partition.roll()
    sealed = os.stat(path)
    assert keyindex.sealed_problem(path, 5, check_crc=True) is None
    truncations: list[int] = []
    real_ftruncate = os.ftruncate

    def watched_ftruncate(fd: int, length: int) -> None:
        if os.path.samefile(f"/proc/self/fd/{fd}", path):
            truncations.append(length)
        real_ftruncate(fd, length)

    monkeypatch.setattr(segment_writer, "fsync_dir", real_fsync_dir)
    monkeypatch.setattr(os, "ftruncate", watched_ftruncate)
    partition.roll()
    monkeypatch.undo()
    assert truncations == []  # never cut, not even for an instant
    assert os.stat(path).st_size == sealed.st_size
    assert keyindex.sealed_problem(path, 5, check_crc=True) is None
    assert partition.segment_count == 2
    partition.close()


def test_the_clean_close_state_includes_the_key_index(tmp_path: object) -> None:
    """file_state names the key index's size and time, after the buffered entries are written."""
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    writer.append_one(encode_record(b"v", b"k", 0), 0, key_hash=1)
    writer.flush_buffered_entries()
    state = writer.file_state()
    assert state.keyindex_file is not None
    assert state.keyindex_file[0] == 4
    writer.close()
