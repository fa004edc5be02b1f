"""Parked partitions: a writer of more partitions than it may keep files open for closes an idle
partition's files (fsynced first) and opens them again, without a scan, when it writes it next.
The Kafka gateway does so to serve one topic of thousands of partitions at a default `ulimit -n`."""

from __future__ import annotations

import os

import pytest
from support.storage import open_descriptors, partition_values

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage.segment_writer import SegmentWriter
from adiskq._storage.stream import StreamWriter

T0 = 1_700_000_000_000_000_000


def test_a_parked_segment_refuses_writes_and_continues_where_it_was_once_unparked(tmp_path: object) -> None:
    directory = str(tmp_path)
    writer = SegmentWriter.create(directory, 0)
    writer.append_one(encode_record(b"one", b"k", T0), T0)  # its time entry buffered: park writes it
    before = open_descriptors(directory)
    writer.park()
    assert writer.parked
    assert before == 5  # .data .index .timeindex .tagindex .keyindex
    assert open_descriptors(directory) == 0
    with pytest.raises(ValueError, match="parked"):
        writer.append([encode_record(b"two", b"k", T0 + 1)], [T0 + 1])
    writer.sync()  # the flusher's fsync of a parked segment: nothing to do
    state = writer.file_state()
    assert state.message_count == 1  # the buffered entries reached the files before they closed
    writer.unpark()
    assert not writer.parked
    assert writer.append([encode_record(b"two", b"k", T0 + 1)], [T0 + 1]) == 1
    writer.park()
    writer.park()  # twice: harmless
    writer.close()
    assert writer.closed


def test_a_stream_opened_with_its_partitions_parked_holds_no_partition_files(tmp_path: object) -> None:
    """300 partitions (about 1,500 files open otherwise) opened and created one at a time; each is
    written after ``unpark``, parked again, and a clean close of the parked stream is trusted by
    the next open (no partition checked again)."""
    path = os.path.join(str(tmp_path), "stream")
    stream = StreamWriter.open(path, partitions=300, park_partitions=True)
    try:
        assert open_descriptors(path) < 20  # the stream's own files, not its partitions'
        assert all(partition.parked for partition in stream.partitions)
        for partition in stream.partitions:
            partition.unpark()
            partition.append([encode_record(b"p%d" % partition.partition, b"k", T0)], [T0])
            partition.park()
        assert open_descriptors(path) < 20
    finally:
        stream.close()
    assert open_descriptors(path) == 0
    assert [partition_values(path, p) for p in (0, 150, 299)] == [[b"p0"], [b"p150"], [b"p299"]]
    reopened = StreamWriter.open(path, park_partitions=True)
    try:
        assert reopened.recovery.clean_partitions == tuple(range(300))
        assert [p.next_offset for p in reopened.partitions] == [1] * 300
    finally:
        reopened.close()


def test_a_shared_writer_does_not_park(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "stream")
    with pytest.raises(adiskq.InvalidArgumentError, match="one writer"):
        StreamWriter.open(path, shared=True, park_partitions=True)
    assert not os.path.exists(os.path.join(path, "settings.json"))
