"""The key index through crashes and damage: rebuilt by the producer, never trusted into a wrong answer."""

from __future__ import annotations

import json
import os

import pytest
from support.crash import run_and_kill
from support.storage import snapshot
from support.unprivileged import as_nobody

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage import keyindex
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.stream import StreamWriter

KEYS = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon"]


def everything(path: str) -> list[adiskq.Message]:
    """Every message a reader can see, partition by partition, in offset order."""
    messages: list[adiskq.Message] = []
    for partition in adiskq.stats(path).partitions:
        reader = PartitionReader(os.path.join(path, "parts", f"{partition.partition:06d}"), partition.partition)
        with reader.cursor(partition.oldest_offset) as cursor:
            while batch := cursor.read(500):
                messages.extend(batch)
    return messages


def assert_finds_everything(path: str, keys: list[bytes]) -> None:
    """find() of each key returns exactly the messages with that key, in offset order."""
    stored = everything(path)
    for key in keys:
        assert adiskq.find(path, key) == [m for m in stored if m.key == key], key


def build(path: str, count: int = 300, *, key_index: bool = True) -> None:
    """A one-partition stream of several 1 KiB segments, keys taking turns; closed cleanly."""
    writer = StreamWriter.open(path, segment_size_bytes=1024, key_index=key_index)
    try:
        partition = writer.partitions[0]
        for start in range(0, count, 10):
            records = [encode_record(b"value-%d" % i, KEYS[i % 5], 1_000 + i) for i in range(start, start + 10)]
            partition.append(records, [1_000 + i for i in range(start, start + 10)])
        for i in range(count, count + 7):  # single pushes, their entries still buffered at close
            partition.active.append_one(encode_record(b"value-%d" % i, KEYS[i % 5], 1_000 + i), 1_000 + i)
    finally:
        writer.close()


def segment_file(path: str, base: int, extension: str = "keyindex") -> str:
    return os.path.join(path, "parts", "000000", f"{base:020d}.{extension}")


def bases(path: str) -> list[int]:
    return PartitionReader(os.path.join(path, "parts", "000000"), 0).segment_bases()


def reopen(path: str) -> list[adiskq.SegmentRepair]:
    """Open the stream as its producer and close it again; what the open repaired."""
    writer = StreamWriter.open(path)
    writer.close()
    return list(writer.recovery.repairs)


def damage(path: str, how: str) -> None:
    if how == "missing":
        os.unlink(path)
        return
    with open(path, "rb") as file:
        raw = bytearray(file.read())
    if how == "truncated":
        raw = raw[: len(raw) // 2 - 1]
    elif how == "bit flip":
        raw[len(raw) // 3] ^= 0x40
    elif how == "garbage":
        raw += b"\xde\xad\xbe\xef" * 3
    with open(path, "wb") as file:
        file.write(raw)


# -- sealed segments -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["missing", "truncated", "bit flip", "garbage"])
def test_a_reader_never_trusts_a_damaged_sealed_key_index(stream_path: str, how: str) -> None:
    """find() gives the right answer anyway (it searches that segment's data) and changes no file."""
    build(stream_path)
    damage(segment_file(stream_path, bases(stream_path)[1]), how)
    before = snapshot(stream_path)
    assert_finds_everything(stream_path, KEYS)
    assert snapshot(stream_path) == before


def test_a_reader_with_read_permission_only_works_around_a_damaged_key_index(shared_dir: str) -> None:
    """As a user who may only read the stream, find() still answers right with a corrupt index."""
    stream = os.path.join(shared_dir, "stream")
    build(stream)
    damage(segment_file(stream, bases(stream)[0]), "bit flip")
    damage(segment_file(stream, bases(stream)[-1]), "truncated")
    expected = [[m for m in everything(stream) if m.key == key] for key in KEYS]
    assert as_nobody(lambda: [adiskq.find(stream, key) for key in KEYS]) == expected


@pytest.mark.parametrize("how", ["missing", "truncated", "garbage"])
def test_the_producer_rebuilds_a_missing_or_malformed_sealed_key_index(stream_path: str, how: str) -> None:
    """Opening the stream for writing rebuilds it from the data and says so."""
    build(stream_path)
    base = bases(stream_path)[1]
    damage(segment_file(stream_path, base), how)
    repairs = reopen(stream_path)
    assert [(r.segment, r.action.split(" (")[0]) for r in repairs] == [(base, "rebuilt the key index")]
    count = os.path.getsize(segment_file(stream_path, base, "index")) // 24
    assert keyindex.sealed_problem(segment_file(stream_path, base), count, check_crc=True) is None
    assert_finds_everything(stream_path, KEYS)


def test_a_deleted_key_index_is_the_way_to_rebuild_a_corrupt_one(stream_path: str) -> None:
    """A bit flip is found by readers (the CRC); deleting the file makes the next open rebuild it."""
    build(stream_path)
    path = segment_file(stream_path, bases(stream_path)[0])
    damage(path, "bit flip")
    assert reopen(stream_path) == []  # only readers check the CRC: the open stays cheap
    count = os.path.getsize(segment_file(stream_path, 0, "index")) // 24
    assert keyindex.sealed_index(os.path.dirname(path), 0, count) is None
    os.unlink(path)
    assert len(reopen(stream_path)) == 1
    assert keyindex.sealed_index(os.path.dirname(path), 0, count) is not None


def test_a_sealed_key_index_counting_other_messages_is_rebuilt(stream_path: str) -> None:
    """A key index sealed for fewer messages than the segment's .index holds is not used, then rebuilt."""
    build(stream_path)
    path = segment_file(stream_path, bases(stream_path)[1])
    with open(path, "rb") as file:
        raw = file.read()
    count = os.path.getsize(segment_file(stream_path, bases(stream_path)[1], "index")) // 24
    keyindex.write_sealed_file(path, raw[: (count - 1) * 4])  # sound, but for one message less
    assert_finds_everything(stream_path, KEYS)
    repairs = reopen(stream_path)
    assert [r.action for r in repairs] == [
        f"rebuilt the key index (it covers {count - 1} messages, the segment has {count}) from {count} records"
    ]
    assert_finds_everything(stream_path, KEYS)


# -- the active segment ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["missing", "truncated", "bit flip", "garbage"])
def test_the_producer_rebuilds_a_damaged_active_key_index(stream_path: str, how: str) -> None:
    """Any damage to the active segment's column is found against the data and rewritten."""
    build(stream_path)
    last = bases(stream_path)[-1]
    damage(segment_file(stream_path, last), how)
    repairs = reopen(stream_path)
    assert [r.segment for r in repairs] == [last]
    assert "keyindex" in repairs[0].action
    entries = os.path.getsize(segment_file(stream_path, last, "index")) // 24
    with open(segment_file(stream_path, last), "rb") as file:
        assert len(file.read()) == entries * 4
    assert_finds_everything(stream_path, KEYS)


@pytest.mark.parametrize("how", ["missing", "truncated", "garbage"])
def test_a_reader_searches_the_active_records_the_key_index_lacks(stream_path: str, how: str) -> None:
    """A short or missing active column (a crash, buffered single pushes) costs a search, not messages."""
    build(stream_path)
    damage(segment_file(stream_path, bases(stream_path)[-1]), how)
    assert_finds_everything(stream_path, KEYS)


def test_a_clean_close_writes_the_buffered_entries_and_the_next_open_trusts_them(stream_path: str) -> None:
    """After a clean close the active column is complete, recorded, and reopened without a check."""
    build(stream_path)
    last = bases(stream_path)[-1]
    entries = os.path.getsize(segment_file(stream_path, last, "index")) // 24
    assert os.path.getsize(segment_file(stream_path, last)) == entries * 4
    with open(os.path.join(stream_path, "recovery.json")) as file:
        clean = json.load(file)["clean_close"]["0"]
    assert clean["keyindex_file"][0] == entries * 4
    writer = StreamWriter.open(stream_path)
    try:
        assert writer.recovery.clean_partitions == (0,)
        assert writer.recovery.repairs == ()
    finally:
        writer.close()


def test_a_roll_interrupted_after_the_seal_is_finished_by_the_next_open(stream_path: str) -> None:
    """A crash between sealing the key index and creating the next segment: the seal is dropped."""
    build(stream_path)
    last = bases(stream_path)[-1]
    path = segment_file(stream_path, last)
    with open(path, "rb") as file:
        column = file.read()
    keyindex.write_sealed_file(path, column)
    os.unlink(os.path.join(stream_path, "recovery.json"))  # as after a crash
    assert_finds_everything(stream_path, KEYS)
    repairs = reopen(stream_path)
    assert [r.segment for r in repairs] == [last]
    assert "past its" in repairs[0].action
    assert os.path.getsize(path) == len(column)


# -- a stream without a key index --------------------------------------------------------------------


def test_a_stream_without_a_key_index_has_no_key_index_files(stream_path: str) -> None:
    """key_index=False writes no .keyindex at all, and find() still answers (from the data)."""
    build(stream_path, key_index=False)
    names = os.listdir(os.path.join(stream_path, "parts", "000000"))
    assert names
    assert not [name for name in names if name.endswith(".keyindex")]
    assert_finds_everything(stream_path, KEYS)


def test_turning_the_key_index_on_builds_it_for_every_segment(stream_path: str) -> None:
    """Opening with key_index=True indexes the segments written without one, once."""
    build(stream_path, key_index=False)
    writer = StreamWriter.open(stream_path, key_index=True)
    writer.close()
    assert len(writer.recovery.repairs) == len(bases(stream_path))
    assert reopen(stream_path) == []
    for base in bases(stream_path)[:-1]:
        count = os.path.getsize(segment_file(stream_path, base, "index")) // 24
        assert keyindex.sealed_problem(segment_file(stream_path, base), count, check_crc=True) is None
    assert_finds_everything(stream_path, KEYS)


def test_turning_the_key_index_off_removes_the_active_one(stream_path: str) -> None:
    """A stale active key index must not linger once the stream stops keeping one."""
    build(stream_path)
    last = bases(stream_path)[-1]
    writer = StreamWriter.open(stream_path, key_index=False)
    writer.partitions[0].append([encode_record(b"late", b"alpha", 5)], [5])
    writer.close()
    assert not os.path.exists(segment_file(stream_path, last))
    assert os.path.exists(segment_file(stream_path, bases(stream_path)[0]))  # sealed ones stay valid
    assert_finds_everything(stream_path, KEYS)


# -- a real crash ----------------------------------------------------------------------------------


def test_lookups_are_complete_after_a_sigkill_and_a_reopen(stream_path: str) -> None:
    """Kill a producer mid-stream, repeatedly: every acknowledged message is found by its key."""
    keys = [f"key-{i}".encode() for i in range(7)]
    acknowledged: dict[bytes, set[tuple[int, int]]] = {key: set() for key in keys}
    for round_, lines in enumerate([150, 37, 420, 5]):
        for line in run_and_kill("tests.support.keyed_producer", [stream_path, str(round_)], lines):
            partition, offset, key, _ = line.split()
            acknowledged[key.encode()].add((int(partition), int(offset)))
        # Before any recovery, a reader copes with whatever the kill left.
        assert_finds_everything(stream_path, keys)
        repairs = reopen(stream_path)
        assert_finds_everything(stream_path, keys)
        for key in keys:
            found = {(m.partition, m.offset) for m in adiskq.find(stream_path, key)}
            assert acknowledged[key] <= found, (key, repairs)
