"""Damage after a crash, at every record of the active segment: recovery never renumbers a message,
never cuts one an ``.index`` entry committed, sets aside what it cannot number, says beforehand what
it will do, and every reader (filtered by tag or not) meets the damage at the same offset.

The stream: a sealed segment and an active one of ``ACTIVE`` records (tags "a", "b" and none,
headers on some), left as a crash leaves it in two ways: after the last push was indexed (``closed``:
the clean-close record removed), and with the single pushes' buffered ``.tagindex`` entries lost
(``crashed``). Each damage shape is then applied at each record in turn:

* ``adjacent``: one bad stretch from inside record k to inside record k+1 (a bad sector);
* ``rot-size``, ``rot-crc``, ``rot-value``: one byte of record k flipped (its size field, its CRC, its
  value), the newest record (k = ``ACTIVE`` - 1) included;
* ``tag``: the tag bytes of a tagged record k flipped;
* ``no-index``: ``.index`` lost and record k's size field zeroed.

CI samples every fourth record; ``-m slow`` takes every one.
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest

import adiskq
from adiskq._sansio import tags as tags_format
from adiskq._sansio.codec import encode_record
from adiskq._storage.check import check_stream
from adiskq._storage.cursors import PartitionCursor
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.recovery_plan import damaged_file_name
from adiskq._storage.stream import StreamReader, StreamWriter

SEALED = 12
ACTIVE = 24
PART = os.path.join("parts", "000000")
TAGS = ["a", "b", None]
SHAPES = ["adjacent", "rot-size", "rot-crc", "rot-value", "tag", "no-index"]


def _tag(i: int) -> str | None:
    return TAGS[i % 3]


def _value(i: int) -> bytes:
    return b"value-%03d-" % i + b"x" * (i * 7 % 23)


def _build(path: str, state: str) -> None:
    """The stream of the module docstring, as the crash ``state`` left it."""
    records = [
        encode_record(_value(i), b"k%d" % (i % 4), 1_000 + i, {"n": b"%d" % i} if i % 5 == 0 else None, 0, _tag(i))
        for i in range(SEALED + ACTIVE)
    ]
    writer = StreamWriter.open(path, partitions=1, segment_size_bytes=4096)
    try:
        partition = writer.partitions[0]
        partition.append(records[:SEALED], list(range(1_000, 1_000 + SEALED)))
        partition.roll()
        for i in range(SEALED, SEALED + ACTIVE):
            partition.append([records[i]], [1_000 + i])
    finally:
        writer.close()
    os.unlink(os.path.join(path, "recovery.json"))
    if state == "crashed":  # the last half were single pushes whose buffered entries a crash lost
        kept = ACTIVE // 2
        for extension, width in (("timeindex", 16), ("tagindex", 4), ("keyindex", 4)):
            os.truncate(_active(path, extension), kept * width)


@pytest.fixture(scope="module", params=["closed", "crashed"])
def pristine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One crashed stream per state, copied by every case."""
    path = str(tmp_path_factory.mktemp(request.param) / "stream")
    _build(path, request.param)
    return path


def _active(path: str, extension: str) -> str:
    return os.path.join(path, PART, f"{SEALED:020d}.{extension}")


def _entries(path: str) -> list[tuple[int, int, int]]:
    with open(_active(path, "index"), "rb") as index:
        raw = index.read()
    return [struct.unpack_from("<QQQ", raw, at) for at in range(0, len(raw), 24)]


def _flip(path: str, position: int, width: int = 1) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        data = file.read(width)
        file.seek(position)
        file.write(bytes(b ^ 0xFF for b in data))


def _zero(path: str, start: int, end: int) -> None:
    with open(path, "r+b") as file:
        file.seek(start)
        file.write(bytes(end - start))


def _damage(path: str, shape: str, k: int) -> set[int]:
    """Apply ``shape`` at active record ``k``; the offsets that are damaged afterwards."""
    data = _active(path, "data")
    (_, position, size) = _entries(path)[k][0:3]
    if shape == "adjacent":
        (_, following, following_size) = _entries(path)[k + 1]
        _zero(data, position + size // 2, following + following_size // 2)
        return {SEALED + k, SEALED + k + 1}
    if shape == "tag":
        tag_at = position + 4 + 4 + 1 + 1 + 8 + 4 + len(b"k0") + 2
        _flip(data, tag_at)
        return {SEALED + k}
    if shape == "no-index":
        os.unlink(_active(path, "index"))
        _zero(data, position, position + 4)
        return set()
    at = {"rot-size": 1, "rot-crc": 5, "rot-value": size - 1}[shape]
    _flip(data, position + at)
    return {SEALED + k}


def _outcome(reader: PartitionReader, offset: int) -> bytes | str:
    try:
        return reader.read_one(offset).value
    except adiskq.CorruptRecordError as error:
        return f"damaged at {error.offset}"


def _filtered_until_damage(reader: PartitionReader, wanted: set[str]) -> tuple[list[int], int | None]:
    """What a reader filtering by ``wanted`` delivers from the oldest offset, and where it raises."""
    got: list[int] = []
    with PartitionCursor(reader, 0) as cursor:
        while True:
            try:
                messages, passed = cursor.read_tagged(1000, 64, tags_format.TagFilter(wanted))
            except adiskq.CorruptRecordError as error:
                return got, error.offset
            if not passed:
                return got, None
            got += [message.offset for message in messages]


def _predictions(path: str) -> list[str]:
    return [f"{p.what} | fix: {p.fix}" for p in check_stream(StreamReader.open(path)).problems]


def _check_case(pristine: str, work: str, shape: str, k: int) -> list[str]:
    """Damage a copy of ``pristine`` at record ``k``, recover it, and list every broken promise."""
    path = os.path.join(work, f"{shape}-{k}")
    shutil.copytree(pristine, path)
    with open(_active(path, "data"), "rb") as file:
        before = file.read()
    damaged = _damage(path, shape, k)
    with open(_active(path, "data"), "rb") as file:
        damaged_data = file.read()
    said = _predictions(path)
    problems: list[str] = []
    try:
        writer = StreamWriter.open(path)
    except adiskq.Error as error:
        return [f"the stream does not open: {error}"]
    next_offset = writer.partitions[0].next_offset
    writer.close()
    reader = PartitionReader(os.path.join(path, PART), 0)
    total = SEALED + ACTIVE
    if shape == "no-index":
        kept = os.path.getsize(_active(path, "data"))
        aside_path = os.path.join(path, PART, damaged_file_name(SEALED, kept))
        if next_offset != SEALED + k:
            problems.append(f"next offset {next_offset}, expected {SEALED + k}")
        if not os.path.exists(aside_path):
            return [*problems, f"nothing was set aside in {aside_path}"]
        with open(aside_path, "rb") as file:
            if before[:kept] + file.read() != damaged_data:
                problems.append("the kept and set-aside bytes are not the segment's bytes")
        if not any("sets aside" in line and aside_path in line for line in said):
            problems.append(f"check did not say it would set bytes aside: {said}")
        expected_values = {o: _value(o) for o in range(SEALED + k)}
        damaged = set()
    else:
        if next_offset != total:
            problems.append(f"next offset {next_offset}, expected {total}: a committed offset was cut or renumbered")
        if [line for line in said if "cuts the data" in line or "sets aside" in line]:
            problems.append(f"check said repair would cut committed data: {said}")
        expected_values = {o: _value(o) for o in range(total)}
    for offset, value in expected_values.items():
        got = _outcome(reader, offset)
        want: bytes | str = f"damaged at {offset}" if offset in damaged else value
        if got != want and not (offset in damaged and got == value):  # a flip a record survives is no damage
            problems.append(f"offset {offset}: {got!r}, expected {want!r}")
    first_damage = min((o for o in damaged if isinstance(_outcome(reader, o), str)), default=None)
    for wanted in ({"a"}, {"b"}):
        got, raised_at = _filtered_until_damage(reader, wanted)
        limit = first_damage if first_damage is not None else next_offset
        expected = [o for o in expected_values if o < limit and _tag(o) in wanted]
        if got != expected or raised_at != first_damage:
            problems.append(
                f"tags={wanted}: delivered {got}, raised at {raised_at}; expected {expected}, {first_damage}"
            )
    again = [line for line in _predictions(path) if "fix: recovery" in line]
    if again:
        problems.append(f"after the repair, check still finds work for it: {again}")
    writer = StreamWriter.open(path)
    try:
        offset = writer.partitions[0].append([encode_record(b"after", b"k", 9)], [9])
    finally:
        writer.close()
    if offset != next_offset:
        problems.append(f"the next push got offset {offset}, expected {next_offset}")
    return [f"{shape} at record {k}: {problem}" for problem in problems]


def _records(shape: str, step: int) -> list[int]:
    last = ACTIVE - 2 if shape == "adjacent" else ACTIVE - 1
    if shape == "tag":
        return [k for k in range(0, last + 1, step) if _tag(SEALED + k) is not None]
    chosen = list(range(0, last + 1, step))
    return chosen if last in chosen else [*chosen, last]  # the newest record always


def _sweep(pristine: str, work: str, shape: str, step: int) -> tuple[int, list[str]]:
    cases = _records(shape, step)
    problems: list[str] = []
    for k in cases:
        problems += _check_case(pristine, work, shape, k)
    return len(cases), problems


@pytest.mark.parametrize("shape", SHAPES)
def test_damage_at_sampled_records_keeps_every_promise(pristine: str, tmp_path: object, shape: str) -> None:
    """Each damage shape at every fourth record of the active segment (and the newest): every promise holds."""
    count, problems = _sweep(pristine, os.fspath(tmp_path), shape, 4)
    assert problems == [], f"{len(problems)} broken promises in {count} cases:\n" + "\n".join(problems[:30])


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_damage_at_every_record_keeps_every_promise(pristine: str, tmp_path: object, shape: str) -> None:
    """The full sweep: each damage shape at every record of the active segment."""
    count, problems = _sweep(pristine, os.fspath(tmp_path), shape, 1)
    print(f"damage sweep {shape}: {count} cases, {len(problems)} broken promises")
    assert problems == [], f"{len(problems)} broken promises in {count} cases:\n" + "\n".join(problems[:30])
