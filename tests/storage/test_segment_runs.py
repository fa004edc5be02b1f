"""A run of records written as it is: its bytes in one write, its index entries made ahead of the write.

The Kafka gateway hands the segment a Produce's records as one run (their bytes back to back, their
``.index`` and ``.timeindex`` entries numbered from 0, their key hashes packed), which the segment
places at its next offset and writes without an object a record. The files must end up exactly as
the same records appended as a list leave them, and a run whose entries disagree with its bytes, or
whose write fails, must leave the segment as it was.
"""

from __future__ import annotations

import errno
import os
import struct

import pytest
from support.storage import Fields, encode, expected_messages, fields, read_all

from adiskq._sansio.codec import encode_record
from adiskq._sansio.entries import EncodedRun
from adiskq._sansio.keyindex import key_hash, pack_hashes
from adiskq._storage import segment_writer
from adiskq._storage.partition_writer import PartitionWriter


def run_of(batch: list[Fields]) -> EncodedRun:
    """The run of ``batch``: its records' bytes, their entries numbered from 0, their key hashes
    (no tag column: a Kafka Produce's run)."""
    records, stamps = encode(batch)
    positions = [sum(map(len, records[:i])) for i in range(len(records))]
    index = b"".join(struct.pack("<QQQ", i, positions[i], len(record)) for i, record in enumerate(records))
    timeindex = b"".join(struct.pack("<Qq", i, stamp) for i, stamp in enumerate(stamps))
    hashes = pack_hashes([key_hash(key) for _, key, _, _ in batch])
    return EncodedRun(b"".join(records), index, timeindex, hashes, b"", max(map(len, records), default=0))


def files_of(directory: str) -> dict[str, bytes]:
    """Every file of a partition folder, by name."""
    contents = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as file:
            contents[name] = file.read()
    return contents


def test_a_run_leaves_the_files_as_the_same_records_appended_as_a_list(tmp_path: os.PathLike[str]) -> None:
    """After a batch and a single push (whose time, tag and key index entries wait in buffers), a
    run writes the same .data, .index, .timeindex, .tagindex and .keyindex bytes as a list would."""
    single = encode_record(b"one", b"key-1", 5)
    batch, run = fields(4), fields(6, 4)
    as_lists = os.path.join(os.fspath(tmp_path), "lists")
    as_run = os.path.join(os.fspath(tmp_path), "run")
    for directory in (as_lists, as_run):
        writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=2**20)
        try:
            assert writer.append(*encode(batch)) == 0
            assert writer.active.append_one(single, 5) == 4  # its time, tag and key index entries wait
            if directory == as_lists:
                assert writer.append(*encode(run)) == 5
            else:
                assert writer.append_run(run_of(run)) == 5
            writer.flush_buffered_entries()
        finally:
            writer.close()
    assert files_of(as_run) == files_of(as_lists)
    assert read_all(as_run)[5:] == expected_messages(run, first_offset=5)


def _sizes(directory: str) -> dict[str, int]:
    return {name: len(content) for name, content in files_of(directory).items()}


@pytest.mark.parametrize("damage", ["position", "offset"])
def test_a_run_s_own_offsets_and_positions_are_not_what_is_stored(tmp_path: os.PathLike[str], damage: str) -> None:
    """The segment places a run's records itself (each at the next offset, where it begins in
    ``.data``): a run numbered wrongly in those fields is stored as if it were right."""
    directory = os.path.join(os.fspath(tmp_path), "000000")
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=2**20)
    try:
        writer.append(*encode(fields(2)))
        data, index, timeindex, hashes, _, _ = run_of(fields(3, 2))
        entries = bytearray(index)
        entries[24 + (8 if damage == "position" else 0)] += 7
        assert writer.append_run(EncodedRun(data, bytes(entries), timeindex, hashes, b"", 0)) == 2
    finally:
        writer.close()
    assert read_all(directory) == expected_messages(fields(5))


@pytest.mark.parametrize("damage", ["size", "timeindex", "key hashes", "tagged"])
def test_entries_that_disagree_with_the_run_write_nothing(tmp_path: os.PathLike[str], damage: str) -> None:
    """A size that is not the record's, columns of different lengths, a key hash short, a tagged
    record without a tag column: ValueError before any write, the segment as it was and still
    writable."""
    directory = os.path.join(os.fspath(tmp_path), "000000")
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=2**20)
    try:
        writer.append(*encode(fields(2)))
        before = _sizes(directory)
        data, index, timeindex, hashes, _, _ = run_of(fields(3, 2))
        entries = bytearray(index)
        if damage == "size":
            entries[24 + 16] += 1
        elif damage == "timeindex":
            timeindex = timeindex[:-16]
        elif damage == "key hashes":
            hashes = hashes[:-4]
        else:
            tagged = encode_record(b"v", b"k", 1, tag="t")
            data, entries = tagged, bytearray(struct.pack("<QQQ", 0, 0, len(tagged)))
            timeindex, hashes = struct.pack("<Qq", 0, 1), pack_hashes([key_hash(b"k")])
        with pytest.raises(ValueError, match=r"place_entries|key hashes"):
            writer.append_run(EncodedRun(data, bytes(entries), timeindex, hashes, b"", 0))
        assert _sizes(directory) == before
        assert writer.append_run(run_of(fields(3, 2))) == 2
    finally:
        writer.close()
    assert read_all(directory) == expected_messages(fields(5))


@pytest.mark.parametrize("failing", [1, 2, 5], ids=["data", "timeindex", "index"])
def test_a_failed_run_write_leaves_the_segment_as_it_was(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    """A write of the run's data or of its entries that fails part way is cut back from every file:
    the segment is as it was, and the next write goes where the run would have."""
    directory = os.path.join(os.fspath(tmp_path), "000000")
    writer, _ = PartitionWriter.open(directory, 0, segment_size_bytes=2**20)
    try:
        writer.append(*encode(fields(2)))
        before = _sizes(directory)
        real_write_all = segment_writer.write_all
        calls: list[int] = []

        def fail_one(fd: int, data: bytes) -> None:
            calls.append(fd)
            real_write_all(fd, data[:5])
            if len(calls) == failing:  # .data, .timeindex, .tagindex, .keyindex, .index in turn
                raise OSError(errno.EIO, "I/O error")
            real_write_all(fd, data[5:])

        monkeypatch.setattr(segment_writer, "write_all", fail_one)
        with pytest.raises(OSError, match="I/O error"):
            writer.append_run(run_of(fields(3, 2)))
        monkeypatch.undo()
        assert _sizes(directory) == before
        assert writer.append_run(run_of(fields(3, 2))) == 2
    finally:
        writer.close()
    assert read_all(directory) == expected_messages(fields(5))
