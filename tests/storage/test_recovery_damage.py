"""Recovery of damage in the active segment: an indexed offset is never given to another message,
what cannot be numbered is set aside (never deleted), and ``check`` says beforehand what happens."""

from __future__ import annotations

import os
import struct
import time

import pytest
from support.cli import flip_byte
from support.storage import reopen

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._sansio.core import scan_columns
from adiskq._storage.check import check_stream
from adiskq._storage.recovery_plan import damaged_file_name
from adiskq._storage.stream import StreamReader, StreamWriter

PART = os.path.join("parts", "000000")
COUNT = 10


def _file(stream: str, extension: str) -> str:
    return os.path.join(stream, PART, f"{0:020d}.{extension}")


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _entries(stream: str) -> list[tuple[int, int, int]]:
    raw = _read(_file(stream, "index"))
    return [struct.unpack_from("<QQQ", raw, at) for at in range(0, len(raw), 24)]


def _outcome(stream: str, offset: int) -> bytes | int:
    """The value at ``offset``, or the offset a CorruptRecordError names."""
    try:
        return adiskq.read(stream, 0, offset).value
    except adiskq.CorruptRecordError as error:
        return -1 if error.offset is None else error.offset


def _check(stream: str) -> list[str]:
    return [f"{problem.what} | fix: {problem.fix}" for problem in check_stream(StreamReader.open(stream)).problems]


def _push_one(stream: str) -> int:
    """The offset the next push gets."""
    writer = StreamWriter.open(stream)
    try:
        return writer.partitions[0].append([encode_record(b"after the repair", b"k", 5)], [5])
    finally:
        writer.close()


@pytest.fixture
def stream(stream_path: str) -> str:
    """A one-partition stream of COUNT messages of 115 bytes each, closed after a crash (no clean-close record)."""
    writer = StreamWriter.open(stream_path)
    try:
        records = [encode_record(b"message-%02d" % i + b"." * 80, b"k", 1_000 + i) for i in range(COUNT)]
        writer.partitions[0].append(records, [1_000 + i for i in range(COUNT)])
    finally:
        writer.close()
    os.unlink(os.path.join(stream_path, "recovery.json"))
    return stream_path


def _values() -> list[bytes]:
    return [b"message-%02d" % i + b"." * 80 for i in range(COUNT)]


def test_two_adjacent_damaged_records_keep_their_offsets(stream: str) -> None:
    """One bad sector across records 3 and 4: each keeps its offset, no later message is renumbered."""
    entries = _entries(stream)
    start, end = entries[3][1] + 30, entries[4][1] + entries[4][2] - 10
    with open(_file(stream, "data"), "r+b") as file:
        file.seek(start)
        file.write(bytes(end - start))
    report = reopen(stream)
    (kept,) = [r for r in report.repairs if "kept every committed record" in r.action]
    assert "2 damaged record(s) keep their offsets (3, 4;" in kept.action
    assert kept.position == entries[3][1]
    values = _values()
    assert [_outcome(stream, offset) for offset in range(COUNT)] == [*values[:3], 3, 4, *values[5:]]
    assert _push_one(stream) == COUNT


def test_check_says_two_adjacent_damaged_records_are_kept(stream: str) -> None:
    """Before the repair, check names both damaged offsets, says nothing is cut, and the repair agrees."""
    entries = _entries(stream)
    with open(_file(stream, "data"), "r+b") as file:
        file.seek(entries[3][1] + 30)
        file.write(bytes(entries[4][1] + entries[4][2] - 10 - entries[3][1] - 30))
    lines = _check(stream)
    assert any("repairing cuts nothing here, 2 damaged record(s) keep their offsets (3, 4;" in line for line in lines)
    assert not [line for line in lines if "cuts the data" in line or "sets aside" in line]
    assert not [r for r in reopen(stream).repairs if "cut" in r.action.split(":")[0]]
    assert adiskq.stats(stream).partitions[0].next_offset == COUNT


def test_a_damaged_newest_record_keeps_its_offset(stream: str) -> None:
    """A bit flip in the newest indexed record is damage, not a torn tail: kept, and its offset not reused."""
    flip_byte(_file(stream, "data"), os.path.getsize(_file(stream, "data")) - 3)
    lines = _check(stream)
    assert any("repairing cuts nothing here, 1 damaged record(s) keep their offsets (9;" in line for line in lines)
    assert not [line for line in lines if "cuts the data" in line]
    report = reopen(stream)
    assert [r.action.split(":")[0] for r in report.repairs][:1] == ["kept every committed record"]
    assert _outcome(stream, COUNT - 1) == COUNT - 1
    assert _push_one(stream) == COUNT
    assert adiskq.read(stream, 0, COUNT).value == b"after the repair"


def test_records_zeroed_in_place_before_the_newest_keep_their_offsets(stream: str) -> None:
    """Records zeroed in place with a sound record after them stay damaged at their offsets."""
    entries = _entries(stream)
    with open(_file(stream, "data"), "r+b") as file:
        file.seek(entries[-3][1])
        file.write(bytes(2 * entries[-1][2]))
    reopen(stream)
    assert [_outcome(stream, offset) for offset in range(COUNT - 3, COUNT)] == [COUNT - 3, COUNT - 2, _values()[-1]]
    assert _push_one(stream) == COUNT


def test_a_newest_record_zeroed_to_the_end_of_the_data_is_a_power_cut(stream: str) -> None:
    """Zeros from inside the newest record to the end of .data are a power cut's unwritten data, not rot: cut."""
    entries = _entries(stream)
    with open(_file(stream, "data"), "r+b") as file:
        file.seek(entries[-1][1] + 40)
        file.write(bytes(entries[-1][2] - 40))
    lines = _check(stream)
    assert any("repairing cuts the data here" in line and "(offsets 9..9)" in line for line in lines)
    report = reopen(stream)
    assert report.repairs[0].action.startswith("cut ")
    assert _push_one(stream) == COUNT - 1


def test_without_index_the_records_after_damage_are_set_aside_not_deleted(stream: str) -> None:
    """.index lost and a size field zeroed: the bytes from there on go to a file beside the segment, as check said."""
    data = _read(_file(stream, "data"))
    damaged_at = 3 * (len(data) // COUNT)
    os.unlink(_file(stream, "index"))
    with open(_file(stream, "data"), "r+b") as file:
        file.seek(damaged_at)
        file.write(bytes(4))
    damaged = _read(_file(stream, "data"))
    aside = os.path.join(stream, PART, damaged_file_name(0, damaged_at))
    lines = _check(stream)
    promise = f"repairing sets aside {len(data) - damaged_at} bytes of .data from here"
    assert any(line.startswith(promise) and aside in line and "fix: recovery" in line for line in lines)
    report = reopen(stream)
    (set_aside,) = [r for r in report.repairs if r.action.startswith("set aside")]
    assert f"set aside {len(data) - damaged_at} bytes of .data from byte {damaged_at}" in set_aside.action
    assert aside in set_aside.action
    assert _read(aside) == damaged[damaged_at:]
    salvaged = scan_columns(_read(aside), len(data) // COUNT)  # the valid records after the damaged one
    assert len(salvaged.positions) == COUNT - 4
    assert os.path.getsize(_file(stream, "data")) == damaged_at
    assert [adiskq.read(stream, 0, offset).value for offset in range(3)] == _values()[:3]
    assert _push_one(stream) == 3
    assert _check(stream) == []  # the set-aside file is the user's, not a problem of the stream


def _crafted_value(size: int) -> bytes:
    """A value whose bytes look like record headers every 8 bytes: a size field that fits, then the magic."""
    claimed = ((size // 2) & ~0xFF) | 0xAD
    unit = struct.pack("<I", claimed) + bytes(4)
    return (unit * (size // 8 + 1))[:size]


def test_a_torn_record_that_looks_like_headers_is_recovered_in_linear_time(stream: str) -> None:
    """A torn 2 MiB record whose value looks like record headers: the next open is quick (it took 22 s)."""
    record = encode_record(_crafted_value(2 << 20), b"k", 0)
    size = os.path.getsize(_file(stream, "data"))
    with open(_file(stream, "data"), "ab") as file:
        file.write(record[: len(record) * 9 // 10])
    started = time.perf_counter()
    report = reopen(stream)
    elapsed = time.perf_counter() - started
    assert report.repairs[0].action.startswith("cut ")
    assert os.path.getsize(_file(stream, "data")) == size
    assert elapsed < 3, f"recovery took {elapsed:.1f} s"
