"""Shared writers at the storage layer: several ``StreamWriter``s append to one stream, each under
the partition's lock, following each other's rolls and repairing what a dead one left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support.stopped import stopped_holder

import adiskq
from adiskq import LockTimeoutError, SettingsMismatchError, StreamLockedError
from adiskq._sansio.codec import encode_record
from adiskq._sansio.naming import DATA, INDEX, TIMEINDEX
from adiskq._storage.check import repair_stream
from adiskq._storage.flocks import partition_lock, vacuum_lock
from adiskq._storage.segment_files import segment_path
from adiskq._storage.stream import StreamWriter


def append(writer: StreamWriter, partition: int, value: bytes) -> int:
    """Append one record the way shared writers do: under the partition's lock."""
    with writer.appending([partition]):
        return writer.partitions[partition].append([encode_record(value, b"k", 1)], [1])


def values(path: str, partition: int) -> list[bytes]:
    """Every value of a partition, offset by offset (each offset must read back)."""
    count = adiskq.stats(path).partitions[partition].next_offset
    return [adiskq.read(path, partition, offset).value for offset in range(count)]


def test_shared_writers_interleave_with_contiguous_offsets(stream_path: str) -> None:
    """Two shared writers appending in turn get offsets 0, 1, 2, ... between them, across rolls."""
    a = StreamWriter.open(stream_path, partitions=2, segment_size_bytes=1024, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    offsets = [append(a if i % 3 else b, i % 2, b"v%d" % i) for i in range(300)]
    a.close()
    b.close()
    assert offsets == [i // 2 for i in range(300)]
    assert values(stream_path, 0) == [b"v%d" % i for i in range(0, 300, 2)]
    assert adiskq.stats(stream_path).partitions[0].segments > 2  # rolls happened, made by either


def test_last_shared_writer_to_close_leaves_a_clean_close(stream_path: str) -> None:
    """Only the last shared writer's close records a clean close, so the next open skips its check."""
    a = StreamWriter.open(stream_path, partitions=2, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    append(a, 0, b"x")
    append(b, 1, b"y")
    a.close()
    b.close()
    reopened = StreamWriter.open(stream_path)
    assert reopened.recovery.clean_partitions == (0, 1)
    reopened.close()


def test_exclusive_writer_is_refused_while_shared_ones_write(stream_path: str) -> None:
    """The error names the shared holders (pid, host) and says to pass shared=True."""
    shared = StreamWriter.open(stream_path, shared=True)
    try:
        with pytest.raises(StreamLockedError) as caught:
            StreamWriter.open(stream_path)
    finally:
        shared.close()
    message = str(caught.value)
    assert f"pid {os.getpid()}" in message
    assert "shared=True" in message
    assert caught.value.held_shared is True


def test_shared_writer_is_refused_while_an_exclusive_one_writes(stream_path: str) -> None:
    """A shared writer cannot join an exclusive one; the error names it and says what to do."""
    exclusive = StreamWriter.open(stream_path)
    try:
        with pytest.raises(StreamLockedError) as caught:
            StreamWriter.open(stream_path, shared=True)
    finally:
        exclusive.close()
    assert f"pid {os.getpid()}" in str(caught.value)
    assert "shared=True" in str(caught.value)
    assert caught.value.held_shared is False
    StreamWriter.open(stream_path, shared=True).close()  # free again once it closed


def test_stats_lists_every_open_writer(stream_path: str) -> None:
    """``stats().writers`` names each open writer with its pid, host and whether it is shared."""
    a = StreamWriter.open(stream_path, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    try:
        writers = adiskq.stats(stream_path).writers
        assert len(writers) == 2
        assert all(w.pid == os.getpid() and w.shared for w in writers)
    finally:
        a.close()
    assert len(adiskq.stats(stream_path).writers) == 1
    b.close()
    assert adiskq.stats(stream_path).writers == ()
    exclusive = StreamWriter.open(stream_path)
    assert [w.shared for w in adiskq.stats(stream_path).writers] == [False]
    exclusive.close()


HOLDER = textwrap.dedent(
    """
    import sys
    from adiskq._storage.stream import StreamWriter
    writer = StreamWriter.open(sys.argv[1], partitions=1, shared=True)
    print("holding", flush=True)
    sys.stdin.read()
    """
)


def test_a_killed_shared_writer_leaves_no_stale_lock(stream_path: str) -> None:
    """After SIGKILL, the dead writer is not listed and an exclusive writer opens at once."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, stream_path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"holding"
    assert [w.pid for w in adiskq.stats(stream_path).writers] == [child.pid]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdin.close()  # type: ignore[union-attr]
    child.stdout.close()
    assert adiskq.stats(stream_path).writers == ()
    StreamWriter.open(stream_path).close()
    assert os.listdir(os.path.join(stream_path, "writers")) == []  # the dead one's entry was removed


def test_torn_tail_of_a_dead_writer_is_repaired_by_the_next_holder(stream_path: str) -> None:
    """Half a record and no index entry (a writer killed mid-append) are cut before the next append."""
    a = StreamWriter.open(stream_path, partitions=1, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    append(a, 0, b"first")
    directory = a.partitions[0].directory
    with open(segment_path(directory, 0, DATA), "ab") as data:  # the dead writer's torn record
        data.write(encode_record(b"torn", b"k", 1)[:9])
    with open(segment_path(directory, 0, TIMEINDEX), "ab") as timeindex:
        timeindex.write(b"\x01" * 16)
    assert append(b, 0, b"second") == 1
    assert append(a, 0, b"third") == 2
    a.close()
    b.close()
    assert values(stream_path, 0) == [b"first", b"second", b"third"]


def test_a_whole_unindexed_record_of_a_dead_writer_is_indexed_not_lost(stream_path: str) -> None:
    """A record written whole whose index entry the dead writer never wrote is kept (recovery's rule)."""
    a = StreamWriter.open(stream_path, partitions=1, shared=True)
    append(a, 0, b"first")
    directory = a.partitions[0].directory
    with open(segment_path(directory, 0, DATA), "ab") as data:
        data.write(encode_record(b"orphan", b"k", 1))
    b = StreamWriter.open(stream_path, shared=True)
    assert append(a, 0, b"next") == 2
    a.close()
    b.close()
    assert values(stream_path, 0) == [b"first", b"orphan", b"next"]


def test_a_roll_that_died_before_its_index_file_is_finished_by_the_next_holder(stream_path: str) -> None:
    """A new segment with only its .data (the roller killed) is completed and appended to."""
    a = StreamWriter.open(stream_path, partitions=1, segment_size_bytes=1024, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    append(a, 0, b"first")
    directory = a.partitions[0].directory
    a.partitions[0].active.sync()
    os.close(os.open(segment_path(directory, 1, DATA), os.O_CREAT | os.O_WRONLY, 0o644))
    assert append(b, 0, b"second") == 1
    assert os.path.exists(segment_path(directory, 1, INDEX))
    assert append(a, 0, b"third") == 2
    a.close()
    b.close()
    assert values(stream_path, 0) == [b"first", b"second", b"third"]


def test_shared_vacuum_deletes_sealed_segments_once(stream_path: str) -> None:
    """Either writer's vacuum deletes the sealed segments, whoever rolled them; the other's finds none."""
    retention = adiskq.Retention(max_bytes=2048)
    a = StreamWriter.open(stream_path, partitions=1, segment_size_bytes=1024, retention=retention, shared=True)
    b = StreamWriter.open(stream_path, shared=True)
    for i in range(200):
        append(a if i % 2 else b, 0, b"v%03d" % i)
    removed = a.vacuum()
    assert removed.removed_segments
    assert not b.vacuum().removed_segments
    assert append(b, 0, b"after") == 200
    a.close()
    b.close()
    stats = adiskq.stats(stream_path).partitions[0]
    assert stats.oldest_offset > 0
    assert adiskq.read(stream_path, 0, 200).value == b"after"


def test_vacuum_skips_while_another_writer_vacuums(stream_path: str) -> None:
    """One vacuum at a time: a shared writer whose vacuum finds the lock taken deletes nothing."""
    a = StreamWriter.open(stream_path, partitions=1, segment_size_bytes=1024, shared=True)
    for i in range(100):
        append(a, 0, b"v%03d" % i)
    other = vacuum_lock(stream_path)
    other.acquire()
    try:
        assert not a.vacuum(adiskq.Retention(max_bytes=1024)).removed_segments
    finally:
        other.close()
    assert a.vacuum(adiskq.Retention(max_bytes=1024)).removed_segments
    a.close()


def test_partition_count_cannot_grow_while_other_writers_are_open(stream_path: str) -> None:
    """Growing would place keys differently in each writer: refused, naming the others."""
    a = StreamWriter.open(stream_path, partitions=2, shared=True)
    try:
        with pytest.raises(SettingsMismatchError, match="other producers write it now"):
            StreamWriter.open(stream_path, partitions=3, shared=True)
    finally:
        a.close()
    grown = StreamWriter.open(stream_path, partitions=3, shared=True)  # alone, it may grow
    assert grown.settings.partition_count == 3
    grown.close()


def test_repair_refuses_while_a_shared_writer_is_open(stream_path: str) -> None:
    """``check --repair`` changes nothing while any writer is open, and names it."""
    writer = StreamWriter.open(stream_path, shared=True)
    try:
        with pytest.raises(StreamLockedError, match=f"pid {os.getpid()}"):
            repair_stream(stream_path, [])
    finally:
        writer.close()


def test_appending_waits_for_the_partition_lock(stream_path: str) -> None:
    """While something else holds a partition's lock, an append to it waits (no append without it)."""
    writer = StreamWriter.open(stream_path, partitions=2, shared=True)
    other = partition_lock(stream_path, 0)
    assert other.try_acquire()
    try:
        assert not writer.partitions[0].lock.try_acquire()  # type: ignore[union-attr]
        assert append(writer, 1, b"other partition") == 0  # partitions are independent
    finally:
        other.close()
    assert append(writer, 0, b"free again") == 0
    writer.close()


def test_appending_beside_a_stopped_holder_fails_after_the_lock_timeout(stream_path: str) -> None:
    """``appending`` (how Spark's writers append) waits at most ``lock_timeout`` for a partition's
    lock a stopped process holds, then raises ``LockTimeoutError`` naming it; closing is quick."""
    StreamWriter.open(stream_path, partitions=1, shared=True).close()
    writer = StreamWriter.open(stream_path, shared=True, lock_timeout=0.5)
    try:
        with stopped_holder(stream_path, "partition-0") as holder:
            started = time.monotonic()
            with (
                pytest.raises(LockTimeoutError, match=f"pid {holder.pid} on host .*stopped"),
                writer.appending([0]),
            ):
                pytest.fail("appended while a stopped process holds the partition's lock")
            assert time.monotonic() - started < 5
            started = time.monotonic()
            writer.close()
            assert time.monotonic() - started < 5
    finally:
        writer.close()
