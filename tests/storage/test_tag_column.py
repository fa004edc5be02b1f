"""The ``.tagindex`` column: one tag hash per message beside the index, written, recovered and checked."""

from __future__ import annotations

import functools
import os
import pathlib
import struct

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.cli import invoke

import adiskq
from adiskq._sansio import tags
from adiskq._sansio.core import encode_record
from adiskq._storage.cursors import PartitionCursor
from adiskq._storage.stream import StreamReader, StreamWriter

PART = os.path.join("parts", "000000")
TAGS = ["created", None, "paid", "créé", None, "paid", "x" * 255]


def _file(stream: str, base: int, extension: str) -> str:
    return os.path.join(stream, PART, f"{base:020d}.{extension}")


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _expected_column(tag_list: list[str | None]) -> bytes:
    return b"".join(struct.pack("<I", 0 if tag is None else tags.tag_hash(tag)) for tag in tag_list)


def _write(stream: str, tag_list: list[str | None], *, single: bool = False, **options: object) -> None:
    writer = StreamWriter.open(stream, **options)  # type: ignore[arg-type]
    try:
        partition = writer.partitions[0]
        records = [encode_record(b"v%d" % i, b"k", i, None, 0, tag) for i, tag in enumerate(tag_list)]
        if single:
            for i, record in enumerate(records):
                partition.append([record], [i])
        else:
            partition.append(records, list(range(len(records))))
    finally:
        writer.close()


def test_a_batch_writes_one_tag_hash_per_message(stream_path: str) -> None:
    """Each message's .tagindex entry is the CRC-32 of its tag, 0 for a message without one."""
    _write(stream_path, TAGS)
    assert _read(_file(stream_path, 0, "tagindex")) == _expected_column(TAGS)
    assert [adiskq.read(stream_path, 0, offset).tag for offset in range(len(TAGS))] == TAGS


def test_single_pushes_write_the_same_column_once_flushed(stream_path: str) -> None:
    """Single pushes buffer their tag entries like their time entries; a close writes them all."""
    _write(stream_path, TAGS * 40, single=True)
    assert _read(_file(stream_path, 0, "tagindex")) == _expected_column(TAGS * 40)


def test_a_tag_whose_crc_is_zero_is_stored_as_one() -> None:
    """0 always means "no tag", so the one hash value a tag could share with it is moved to 1."""
    assert tags.tag_hash("created") != 0
    raw = tags.tag_column([encode_record(b"v", b"k", 0, None, 0, "t")])
    assert struct.unpack("<I", raw)[0] == tags.tag_hash("t")
    assert all(tags.tag_hash(chr(c)) for c in range(32, 2000))


def test_recovery_rebuilds_a_missing_short_or_wrong_tag_column(stream_path: str) -> None:
    """The active segment's .tagindex is rebuilt from the records: deleted, cut short or overwritten."""
    _write(stream_path, TAGS)
    path = _file(stream_path, 0, "tagindex")
    for damage in ("delete", "cut", "overwrite"):
        if damage == "delete":
            os.unlink(path)
        elif damage == "cut":
            os.truncate(path, 6)
        else:
            with open(path, "r+b") as file:
                file.seek(8)
                file.write(b"\xff\xff\xff\xff")
        writer = StreamWriter.open(stream_path, trust_clean_close=False)
        writer.close()
        assert any("tagindex" in str(repair) for repair in writer.recovery.repairs), damage
        assert _read(path) == _expected_column(TAGS)


def test_a_segment_from_before_tags_gets_its_column_on_the_next_open(stream_path: str) -> None:
    """A format-1 active segment (no .tagindex) gets one built from its records when a producer opens it."""
    _write(stream_path, [None, None, "a"])
    os.unlink(_file(stream_path, 0, "tagindex"))
    assert adiskq.read(stream_path, 0, 2).tag == "a"  # readers never needed the column
    StreamWriter.open(stream_path).close()
    assert _read(_file(stream_path, 0, "tagindex")) == _expected_column([None, None, "a"])


def test_check_reports_a_wrong_tag_entry_and_repair_rebuilds_a_sealed_column(stream_path: str) -> None:
    """`check` compares every tag entry with its record; `--repair` rebuilds a sealed segment's column."""
    _write(stream_path, TAGS * 20, segment_size_bytes=1024)
    _write(stream_path, ["more"])
    path = _file(stream_path, 0, "tagindex")
    assert invoke("check", stream_path).exit_code == 0
    with open(path, "r+b") as file:
        file.seek(4)
        file.write(b"\x01\x02\x03\x04")
    result = invoke("check", stream_path)
    assert result.exit_code == 1
    assert f"{path}:4" in result.output
    assert "does not hold its record's tag hash" in result.output
    assert invoke("check", "--repair", stream_path).exit_code == 0
    assert invoke("check", stream_path).exit_code == 0


def test_check_accepts_a_segment_without_a_tag_column(stream_path: str) -> None:
    """A sealed segment written before tags has no .tagindex: not a problem (readers use the records)."""
    _write(stream_path, TAGS * 20, segment_size_bytes=1024)
    _write(stream_path, ["more"])
    os.unlink(_file(stream_path, 0, "tagindex"))
    assert invoke("check", stream_path).exit_code == 0


@given(st.lists(st.booleans(), max_size=60), st.integers(min_value=1, max_value=70))
def test_the_spans_of_a_filtered_read_are_its_candidates_records_merged_where_they_touch(
    wanted: list[bool], max_count: int
) -> None:
    """A filtered read fetches exactly the candidates' records (up to max_count of them), one span
    (one pread) for each stretch of consecutive ones."""
    sizes = [30 + i % 7 for i in range(len(wanted))]
    positions = [sum(sizes[:i]) for i in range(len(wanted))]
    entries = b"".join(struct.pack("<QQQ", 100 + i, positions[i], sizes[i]) for i in range(len(wanted)))
    column = b"".join(struct.pack("<I", 7 if w else 9) for w in wanted)
    chosen = tags.matching_records(column, entries, (7,), 100, max_count, -1)
    assert not isinstance(chosen, int)
    taken = [i for i, w in enumerate(wanted) if w][:max_count]
    assert chosen.offsets == [100 + i for i in taken]
    assert chosen.passed == (taken[-1] + 1 if len(taken) == max_count else len(wanted))
    spans: list[list[int]] = []
    for i in taken:
        if spans and spans[-1][1] == i:
            spans[-1][1] = i + 1
        else:
            spans.append([i, i + 1])
    assert chosen.positions == [positions[a] for a, _ in spans]
    assert chosen.sizes == [sum(sizes[a:b]) for a, b in spans]
    assert chosen.total == sum(sizes[i] for i in taken)


@given(st.lists(st.one_of(st.none(), st.sampled_from(["created", "paid", "créé", "x" * 255])), max_size=30))
def test_the_entries_a_producer_computes_from_its_tags_are_the_records_column(tag_list: list[str | None]) -> None:
    """A producer's .tagindex entries come from the tags at hand: the same bytes as the records' column."""
    records = [encode_record(b"v", b"k", 0, None, 0, tag) for tag in tag_list]
    assert b"".join(tags.tag_entries(tag_list)) == tags.tag_column(records)
    assert [tags.tag_entry(tag) for tag in tag_list] == tags.tag_entries(tag_list)


def test_the_cache_of_entries_starts_over_past_its_bound() -> None:
    """More distinct tags than the cache holds: still every entry right."""
    many = [f"tag-{i}" for i in range(10_000)]
    assert tags.tag_entries(many) == [struct.pack("<I", tags.tag_hash(tag)) for tag in many]
    assert tags.tag_entry(None) == tags.NO_TAG_ENTRY


@pytest.mark.anyio
async def test_every_push_path_writes_the_tag_column_of_its_records(stream_path: str) -> None:
    """Single pushes (inline and batched), push_many over several partitions, with headers and
    without: check finds every .tagindex entry equal to its record's tag hash."""
    async with adiskq.Producer(stream_path, partitions=3) as producer:
        await producer.push(b"one", tag="created")
        await producer.push(b"two")
        async with anyio.create_task_group() as group:  # concurrent pushes share batches
            for i in range(20):
                group.start_soon(functools.partial(producer.push, b"c%d" % i, key=f"k{i}", tag=TAGS[i % len(TAGS)]))
        await producer.push_many([adiskq.Record(b"m%d" % i, key=f"k{i}", tag=TAGS[i % len(TAGS)]) for i in range(300)])
        await producer.push_many(
            [adiskq.Record(b"h%d" % i, key=f"k{i}", headers={"h": b"1"}, tag=TAGS[i % len(TAGS)]) for i in range(50)]
        )
        await producer.push_many([b"plain"] * 10)
    result = invoke("check", stream_path)
    assert result.exit_code == 0, result.output
    stream = StreamReader.open(stream_path)
    total = 0
    for partition in range(3):
        with stream.partition(partition).cursor(0) as cursor:
            partition_tags = [m.tag for m in cursor.read(10_000)]
        total += len(partition_tags)
        column = _read(os.path.join(stream_path, "parts", f"{partition:06d}", f"{0:020d}.tagindex"))
        assert column == _expected_column(partition_tags)
    assert total == 2 + 20 + 300 + 50 + 10


@pytest.mark.parametrize(
    ("share", "wanted"),
    [(2, {"t0"}), (20, {"t3"}), (1, {"t0"}), (3, {"t1", "t2"})],
    ids=["dense", "sparse", "every-message", "two-tags"],
)
@pytest.mark.parametrize("max_count", [1, 7, 1000])
@pytest.mark.parametrize("max_bytes", [None, 1, 200])
def test_filtered_reads_deliver_every_wanted_message_once_within_their_limits(
    tmp_path: pathlib.Path, share: int, wanted: set[str], max_count: int, max_bytes: int | None
) -> None:
    """However dense the wanted tags (a stretch read whole, spans read one by one, every message
    wanted) and whatever the limits, reading on from where each read stopped delivers exactly the
    wanted messages, in order, each read at most max_count of them and, past its first, within
    max_bytes of records."""
    stream = str(tmp_path / "s")
    tag_list: list[str | None] = [f"t{i % share}" for i in range(300)]
    _write(stream, tag_list, segment_size_bytes=4096)
    reader = StreamReader.open(stream).partition(0)
    got: list[int] = []
    with reader.cursor(0) as cursor:
        while True:
            messages, passed = cursor.read_tagged(max_count, 64, tags.TagFilter(wanted), max_bytes)
            if not passed:
                break
            assert len(messages) <= max_count
            if max_bytes is not None and len(messages) > 1:
                sizes = [len(encode_record(m.value, m.key, m.timestamp_ns, None, 0, m.tag)) for m in messages]
                assert sum(sizes[:-1]) < max_bytes
            assert all(m.offset < cursor.position for m in messages)
            got += [m.offset for m in messages]
    assert got == [i for i, tag in enumerate(tag_list) if tag in wanted]


def _damage(stream: str, offset: int, where: str) -> None:
    """Flip the last byte of the record at ``offset``, or make its ``.index`` size field huge."""
    (_, position, size) = struct.unpack_from("<QQQ", _read(_file(stream, 0, "index")), offset * 24)
    if where == "record":
        with open(_file(stream, 0, "data"), "r+b") as data:
            data.seek(position + size - 1)
            byte = data.read(1)
            data.seek(-1, os.SEEK_CUR)
            data.write(bytes([byte[0] ^ 1]))
    else:
        with open(_file(stream, 0, "index"), "r+b") as index:
            index.seek(offset * 24 + 16)
            index.write(struct.pack("<Q", 1 << 62))


def _read_until_damage(
    cursor: PartitionCursor, tag_filter: tags.TagFilter
) -> tuple[list[int], adiskq.CorruptRecordError]:
    """The offsets filtered reads deliver until one raises, and its error."""
    got: list[int] = []
    while True:
        try:
            messages, passed = cursor.read_tagged(1000, 256, tag_filter)
        except adiskq.CorruptRecordError as error:
            return got, error
        assert passed
        got += [m.offset for m in messages]


@pytest.mark.parametrize("where", ["record", "index size"])
@pytest.mark.parametrize("share", [2, 20], ids=["dense", "sparse"])
def test_filtered_reads_deliver_what_comes_before_damage_then_raise_at_it(
    tmp_path: pathlib.Path, where: str, share: int
) -> None:
    """A damaged wanted record (or its .index size): reads deliver every wanted message before it,
    then raise CorruptRecordError naming its offset, and read on from the offset after it."""
    stream = str(tmp_path / "s")
    tag_list: list[str | None] = [f"t{i % share}" for i in range(300)]
    _write(stream, tag_list)
    _damage(stream, 160, where)
    reader = StreamReader.open(stream).partition(0)
    with reader.cursor(0) as cursor:
        got, error = _read_until_damage(cursor, tags.TagFilter({"t0"}))
        assert error.offset == 160
        assert cursor.position == 160
    wanted = [i for i, tag in enumerate(tag_list) if tag == "t0"]
    assert got == [i for i in wanted if i < 160]
    rest: list[int] = []
    with reader.cursor(161) as cursor:
        while (read := cursor.read_tagged(1000, 256, tags.TagFilter({"t0"})))[1]:
            rest += [m.offset for m in read[0]]
    assert rest == [i for i in wanted if i > 160]
