"""Crash recovery on producer open: the valid prefix survives, the rest is repaired."""

from __future__ import annotations

import os

import pytest
from support.cli import flip_byte
from support.storage import append, encode, expected_messages, fields, read_all, reopen, write_stream

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter

PART = os.path.join("parts", "000000")
RECORDS = fields(6)


def _file(stream: str, base: int, extension: str) -> str:
    return os.path.join(stream, PART, f"{base:020d}.{extension}")


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as file:
        file.write(data)


def _record_ends(batch: list[tuple[bytes, bytes, int, dict[str, bytes]]]) -> list[int]:
    records, _ = encode(batch)
    ends, total = [], 0
    for record in records:
        total += len(record)
        ends.append(total)
    return ends


def _check_prefix(stream: str, kept: int) -> None:
    """Readers see exactly the first ``kept`` records, and the next append gets offset ``kept``."""
    partition = os.path.join(stream, PART)
    assert read_all(partition) == expected_messages(RECORDS[:kept])
    writer = StreamWriter.open(stream)
    try:
        assert append(writer.partitions[0], fields(1, 100)) == kept
    finally:
        writer.close()
    assert read_all(partition) == expected_messages(RECORDS[:kept]) + expected_messages(fields(1, 100), 0, kept)


@pytest.fixture
def stream(stream_path: str) -> str:
    """A one-partition stream holding RECORDS in one segment, closed cleanly."""
    write_stream(stream_path, [RECORDS[:3], RECORDS[3:]])
    return stream_path


def test_clean_reopen_repairs_nothing(stream: str) -> None:
    """A stream closed cleanly reopens with an empty recovery report."""
    report = reopen(stream)
    assert not report
    assert adiskq.stats(stream).last_recovery == report
    _check_prefix(stream, len(RECORDS))


def test_data_cut_at_every_byte_of_the_last_records(stream: str) -> None:
    """Cutting .data anywhere in the last two records keeps exactly the whole records before the cut."""
    originals = {ext: _read(_file(stream, 0, ext)) for ext in ("data", "index", "timeindex")}
    ends = _record_ends(RECORDS)
    for cut in range(ends[-3], ends[-1]):
        for ext, data in originals.items():
            _write(_file(stream, 0, ext), data)
        with open(_file(stream, 0, "data"), "r+b") as file:
            file.truncate(cut)
        kept = sum(1 for end in ends if end <= cut)
        writer = StreamWriter.open(stream)
        try:
            assert writer.recovery, f"cut at {cut}: nothing reported"
            assert adiskq.stats(stream).last_recovery == writer.recovery
            assert os.path.getsize(_file(stream, 0, "data")) == ends[kept - 1]
            assert os.path.getsize(_file(stream, 0, "index")) == kept * 24
            assert os.path.getsize(_file(stream, 0, "timeindex")) == kept * 16
            assert read_all(os.path.join(stream, PART)) == expected_messages(RECORDS[:kept]), f"cut at {cut}"
            assert append(writer.partitions[0], fields(1, 100)) == kept
        finally:
            writer.close()


def test_torn_record_is_reported_with_its_position(stream: str) -> None:
    """A torn last record is cut, and the report names the byte where valid data ends."""
    ends = _record_ends(RECORDS)
    with open(_file(stream, 0, "data"), "r+b") as file:
        file.truncate(ends[-1] - 3)
    report = reopen(stream)
    cuts = [r for r in report.repairs if "torn tail" in r.action]
    assert len(cuts) == 1
    assert (cuts[0].partition, cuts[0].segment, cuts[0].position) == (0, 0, ends[-2])
    assert "incomplete" in cuts[0].action
    assert "at byte" in str(cuts[0])
    _check_prefix(stream, len(RECORDS) - 1)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff",
        b"\xff" * 100,
        b"\x07\x00\x00\x00",
        b"\x30\x00\x00\x00\x00\x00\x00\x00\x01" + b"z" * 60,
        os.urandom(4096),
    ],
    ids=["one-byte", "ff", "small-size", "bad-magic", "random"],
)
def test_garbage_after_the_last_record_is_cut(stream: str, garbage: bytes) -> None:
    """Bytes appended after the last record are cut, and every record survives."""
    size = os.path.getsize(_file(stream, 0, "data"))
    with open(_file(stream, 0, "data"), "ab") as file:
        file.write(garbage)
    report = reopen(stream)
    assert [r.position for r in report.repairs] == [size]
    assert os.path.getsize(_file(stream, 0, "data")) == size
    _check_prefix(stream, len(RECORDS))


def test_zero_filled_tail_is_cut(stream: str) -> None:
    """A tail of zeros (what a file system may leave after a power cut) is cut."""
    with open(_file(stream, 0, "data"), "ab") as file:
        file.write(bytes(8192))
    report = reopen(stream)
    assert "below the minimum" in report.repairs[0].action
    _check_prefix(stream, len(RECORDS))


def test_zeroed_last_records_are_cut(stream: str) -> None:
    """The last records zeroed in place (a power cut: the size reached the disk, the data did not) are cut."""
    ends = _record_ends(RECORDS)
    with open(_file(stream, 0, "data"), "r+b") as file:
        file.seek(ends[-3])
        file.write(bytes(ends[-1] - ends[-3]))
    reopen(stream)
    _check_prefix(stream, len(RECORDS) - 2)


@pytest.mark.parametrize("where", ["value", "size field"])
def test_rot_inside_committed_data_keeps_every_record(stream: str, where: str) -> None:
    """A bad record followed by valid ones is rot, not a torn tail: nothing is cut, the bad one raises."""
    ends = _record_ends(RECORDS)
    flip_byte(_file(stream, 0, "data"), ends[1] - 1 if where == "value" else ends[0] + 3)
    report = reopen(stream)
    assert "kept every committed record" in report.repairs[0].action
    assert "keep their offsets (1;" in report.repairs[0].action
    assert [r.action.split()[-1] for r in report.repairs[1:]] == ["data"]  # the damaged record's tag: unknown
    assert report.repairs[0].position == ends[0]
    with pytest.raises(adiskq.CorruptRecordError) as caught:
        adiskq.read(stream, 0, 1)
    assert caught.value.position == ends[0]
    assert caught.value.offset == 1
    expected = expected_messages(RECORDS)
    assert [adiskq.read(stream, 0, offset) for offset in (0, 2, 3, 4, 5)] == [expected[i] for i in (0, 2, 3, 4, 5)]
    writer = StreamWriter.open(stream)
    try:
        assert append(writer.partitions[0], fields(1, 100)) == len(RECORDS)
    finally:
        writer.close()
    assert adiskq.stats(stream).last_recovery is not None


def test_a_torn_record_whose_value_holds_a_record_is_still_a_torn_tail(stream: str) -> None:
    """A record torn just after an encoded record inside its value: that inner record is no message."""
    inner = encode_record(b"inner value", b"inner key", 7)
    outer = encode_record(b"<" + inner + b">" * 50, b"outer key", 8)
    torn = outer[: outer.index(inner) + len(inner)]  # the write stopped right after the inner record
    with open(_file(stream, 0, "data"), "ab") as data:
        data.write(torn)
    report = reopen(stream)
    assert "torn tail" in report.repairs[0].action
    assert report.repairs[0].position == _record_ends(RECORDS)[-1]
    _check_prefix(stream, len(RECORDS))


@pytest.mark.parametrize("missing", [["index"], ["timeindex"], ["index", "timeindex"]])
def test_missing_index_files_are_rebuilt(stream: str, missing: list[str]) -> None:
    """A deleted .index or .timeindex of the last segment is rebuilt from the data."""
    expected = {ext: _read(_file(stream, 0, ext)) for ext in ("index", "timeindex")}
    for ext in missing:
        os.unlink(_file(stream, 0, ext))
    report = reopen(stream)
    assert sorted(r.action.split()[2] for r in report.repairs) == sorted(f".{ext}" for ext in missing)
    assert {ext: _read(_file(stream, 0, ext)) for ext in ("index", "timeindex")} == expected
    _check_prefix(stream, len(RECORDS))


@pytest.mark.parametrize("ext", ["index", "timeindex"])
def test_partial_index_entry_is_completed(stream: str, ext: str) -> None:
    """An index file cut inside an entry gets the entry dropped and rebuilt."""
    expected = _read(_file(stream, 0, ext))
    with open(_file(stream, 0, ext), "r+b") as file:
        file.truncate(len(expected) - 5)
    report = reopen(stream)
    assert "partial" in report.repairs[0].action
    assert "rebuilt 1" in report.repairs[0].action
    assert _read(_file(stream, 0, ext)) == expected
    _check_prefix(stream, len(RECORDS))


@pytest.mark.parametrize("ext", ["index", "timeindex"])
def test_missing_index_entries_are_rebuilt(stream: str, ext: str) -> None:
    """Index entries lost in a crash (data written, entries not) are rebuilt from the records."""
    expected = _read(_file(stream, 0, ext))
    entry = 24 if ext == "index" else 16
    with open(_file(stream, 0, ext), "r+b") as file:
        file.truncate(entry * 2)
    report = reopen(stream)
    assert f"rebuilt {len(RECORDS) - 2} {ext} entries" in report.repairs[0].action
    assert _read(_file(stream, 0, ext)) == expected
    _check_prefix(stream, len(RECORDS))


def test_index_entries_past_valid_data_are_dropped(stream: str) -> None:
    """Entries for records that the data no longer holds are dropped."""
    ends = _record_ends(RECORDS)
    with open(_file(stream, 0, "data"), "r+b") as file:
        file.truncate(ends[2])
    report = reopen(stream)
    actions = " / ".join(r.action for r in report.repairs)
    assert f"dropped {len(RECORDS) - 3} index entries" in actions
    assert f"dropped {len(RECORDS) - 3} timeindex entries" in actions
    _check_prefix(stream, 3)


def test_index_entry_that_disagrees_with_the_data_is_replaced(stream: str) -> None:
    """A damaged index entry (wrong position) is replaced by the one the data implies."""
    expected = _read(_file(stream, 0, "index"))
    with open(_file(stream, 0, "index"), "r+b") as file:
        file.seek(24 * 2 + 8)
        file.write((12345).to_bytes(8, "little"))
    reopen(stream)
    assert _read(_file(stream, 0, "index")) == expected
    _check_prefix(stream, len(RECORDS))


@pytest.mark.parametrize(
    ("where", "name", "is_dir"),
    [
        (PART, "notes.txt", False),
        (PART, "00000000000000000000.data.bak", False),
        (PART, "0000.data", False),
        (PART, "99999999999999999999.index.tmp", False),
        (PART, "lost+found", True),
        (PART, "00000000000000000100.data", True),  # a folder with a segment-like name
        ("parts", "README", False),
        ("parts", "000001x", True),
        ("", "backup.tar", False),
    ],
)
def test_stray_files_are_ignored(stream: str, where: str, name: str, is_dir: bool) -> None:
    """Files and folders that are not segments are left alone, and never stop an open."""
    stray = os.path.join(stream, where, name)
    if is_dir:
        os.mkdir(stray)
    else:
        _write(stray, b"not ours")
    report = reopen(stream)
    assert not report
    assert os.path.isdir(stray) if is_dir else _read(stray) == b"not ours"
    _check_prefix(stream, len(RECORDS))
    assert adiskq.stats(stream).partitions[0].next_offset == len(RECORDS) + 1


# -- crashes in the middle of a roll and of a vacuum ---------------------------------------------


def _two_segments(stream_path: str) -> tuple[str, int]:
    """A stream whose first segment is sealed; returns the stream and the second segment's base."""
    write_stream(stream_path, [fields(4), fields(4, 4)], segment_size_bytes=1024)
    writer = StreamWriter.open(stream_path)
    try:
        writer.partitions[0].roll()
        base = writer.partitions[0].active.base_offset
    finally:
        writer.close()
    assert base == 8
    return stream_path, base


@pytest.mark.parametrize(
    "left",
    [[], ["data"], ["data", "timeindex"], ["timeindex"], ["index"], ["data", "index"]],
    ids=["none", "data", "data+timeindex", "timeindex", "index", "data+index"],
)
def test_crash_in_the_middle_of_a_roll(stream_path: str, left: list[str]) -> None:
    """A new segment with only some of its (empty) files is completed; nothing is lost."""
    stream, base = _two_segments(stream_path)
    for ext in ("data", "index", "timeindex"):
        if ext not in left:
            os.unlink(_file(stream, base, ext))
    report = reopen(stream)
    if "index" not in left:
        assert all(r.segment in (0, base) for r in report.repairs)
    writer = StreamWriter.open(stream)
    try:
        assert append(writer.partitions[0], fields(1, 100)) == 8
    finally:
        writer.close()
    assert read_all(os.path.join(stream, PART)) == expected_messages(fields(8) + fields(1, 100))


def test_crash_in_a_roll_with_a_torn_first_record(stream_path: str) -> None:
    """A new segment whose first record is torn is cut back to empty, and its offsets continue."""
    stream, base = _two_segments(stream_path)
    records, _ = encode(fields(1, 8))
    _write(_file(stream, base, "data"), records[0][:-2])
    report = reopen(stream)
    assert [(r.segment, r.position) for r in report.repairs] == [(base, 0)]
    assert os.path.getsize(_file(stream, base, "data")) == 0
    assert read_all(os.path.join(stream, PART)) == expected_messages(fields(8))


@pytest.mark.parametrize("left", [["data", "timeindex"], ["data"]])
def test_an_oldest_segment_that_lost_its_index_is_rebuilt_not_deleted(stream_path: str, left: list[str]) -> None:
    """A sealed segment at the old end without .index (an interrupted vacuum, or a lost file) keeps
    its data: recovery rebuilds its index files and never deletes data."""
    stream, _ = _two_segments(stream_path)
    for ext in ("index", "timeindex", "data"):
        if ext not in left:
            os.unlink(_file(stream, 0, ext))
    report = reopen(stream)
    assert {r.segment for r in report.repairs} == {0}
    assert adiskq.stats(stream).partitions[0].oldest_offset == 0
    assert read_all(os.path.join(stream, PART)) == expected_messages(fields(8))


def test_leftovers_of_an_interrupted_vacuum_without_data_are_removed(stream_path: str) -> None:
    """Index files an interrupted vacuum left behind without their .data hold nothing and go."""
    stream, base = _two_segments(stream_path)
    for ext in ("index", "data"):
        os.unlink(_file(stream, 0, ext))
    report = reopen(stream)
    assert [(r.segment, r.action) for r in report.repairs] == [
        (0, "removed index files an interrupted vacuum left without data")
    ]
    assert not any(os.path.exists(_file(stream, 0, ext)) for ext in ("data", "index", "timeindex"))
    assert adiskq.stats(stream).partitions[0].oldest_offset == base
    assert read_all(os.path.join(stream, PART)) == expected_messages(fields(0))


def test_a_sealed_segment_that_lost_its_data_in_the_middle_is_refused(stream_path: str) -> None:
    """A missing .data between other segments is reported, not papered over with an empty segment."""
    stream, base = _two_segments(stream_path)
    writer = StreamWriter.open(stream)
    try:
        records, stamps = encode(fields(2, base))
        writer.partitions[0].append(records, stamps)
        writer.partitions[0].roll()  # segment `base` is sealed between two others now
    finally:
        writer.close()
    os.unlink(_file(stream, base, "data"))
    with pytest.raises(adiskq.CorruptStreamError, match=r"lost its \.data"):
        reopen(stream)


def test_sealed_segment_missing_its_timeindex_is_rebuilt(stream_path: str) -> None:
    """A sealed segment that still has its .index but lost its .timeindex gets it rebuilt."""
    stream, _ = _two_segments(stream_path)
    expected = _read(_file(stream, 0, "timeindex"))
    os.unlink(_file(stream, 0, "timeindex"))
    report = reopen(stream)
    assert [r.segment for r in report.repairs] == [0]
    assert _read(_file(stream, 0, "timeindex")) == expected
    assert adiskq.offset_for_time(stream, 0, fields(8)[5][2]) == 5


def test_middle_segment_missing_its_index_is_rebuilt(stream_path: str) -> None:
    """A sealed segment between others that lost its .index is rebuilt, not deleted."""
    write_stream(stream_path, [fields(4)], segment_size_bytes=1024)
    for batch in (fields(4, 4), fields(4, 8)):
        writer = StreamWriter.open(stream_path)
        try:
            writer.partitions[0].roll()
            append(writer.partitions[0], batch)
        finally:
            writer.close()
    expected = _read(_file(stream_path, 4, "index"))
    os.unlink(_file(stream_path, 4, "index"))
    report = reopen(stream_path)
    assert [r.segment for r in report.repairs] == [4]
    assert _read(_file(stream_path, 4, "index")) == expected
    assert read_all(os.path.join(stream_path, PART)) == expected_messages(fields(12))


def test_every_partition_is_recovered_and_reported(stream_path: str) -> None:
    """Damage in several partitions is repaired in each, and the report names each partition."""
    writer = StreamWriter.open(stream_path, partitions=3)
    try:
        for partition in writer.partitions:
            append(partition, fields(3))
    finally:
        writer.close()
    for number in (0, 2):
        path = os.path.join(stream_path, "parts", f"{number:06d}", f"{0:020d}.data")
        with open(path, "ab") as file:
            file.write(b"\xff" * 9)
    report = reopen(stream_path)
    assert sorted(r.partition for r in report.repairs) == [0, 2]
    assert adiskq.stats(stream_path).last_recovery == report


def test_report_of_a_later_clean_open_replaces_the_old_one(stream: str) -> None:
    """stats().last_recovery describes the last producer open, even when it repaired nothing."""
    with open(_file(stream, 0, "data"), "ab") as file:
        file.write(b"\xff" * 9)
    assert reopen(stream)
    assert adiskq.stats(stream).last_recovery
    clean = reopen(stream)
    assert adiskq.stats(stream).last_recovery == clean
    assert not clean
