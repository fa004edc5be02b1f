"""Corruption in sealed segments: readers raise CorruptRecordError (file, position), never wrong bytes,
and never hang. A fuzz test throws random and mutated segment files at the reader and at recovery."""

from __future__ import annotations

import os
import random
import shutil

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import flip_byte

import adiskq
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.stream import StreamWriter

SEGMENT = 2048
MESSAGES = 120


async def write_stream(path: str) -> list[bytes]:
    """A one-partition stream of several sealed segments; returns the values in offset order."""
    values = [b"value %03d " % i + bytes([i % 251]) * (i % 40) for i in range(MESSAGES)]
    async with adiskq.Producer(path, segment_size_bytes=SEGMENT) as producer:
        for i, value in enumerate(values):
            await producer.push(value, key=b"k%d" % (i % 7), headers={"n": b"%d" % i} if i % 3 else None)
    return values


def segment_files(path: str, extension: str) -> list[str]:
    """The files of one kind in partition 0, oldest segment first."""
    folder = os.path.join(path, "parts", "000000")
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith("." + extension))


def pick_a_byte(path: str, rng: random.Random) -> tuple[str, int]:
    """A random byte of a random sealed .data file."""
    victim = rng.choice(segment_files(path, "data")[:-1])
    return victim, rng.randrange(os.path.getsize(victim))


def halve(path: str) -> None:
    """Cut a file to half its size."""
    os.truncate(path, os.path.getsize(path) // 2)


async def read_until_error(path: str) -> tuple[list[adiskq.Message], BaseException | None]:
    """Everything a consumer returns from the oldest message on, and the error that stopped it."""
    seen: list[adiskq.Message] = []
    try:
        with anyio.fail_after(20):
            async with adiskq.Consumer(path, start="oldest", end="close") as consumer:
                seen.extend([message async for message in consumer])
    except adiskq.Error as error:
        return seen, error
    return seen, None


@pytest.mark.anyio
@pytest.mark.parametrize("seed", range(6))
async def test_a_flipped_byte_in_a_sealed_segment_raises_never_returns_wrong_bytes(stream_path: str, seed: int) -> None:
    """A consumer meeting a damaged record raises CorruptRecordError with the file and position."""
    values = await write_stream(stream_path)
    rng = random.Random(seed)
    victim, position = pick_a_byte(stream_path, rng)
    flip_byte(victim, position)
    seen, error = await read_until_error(stream_path)
    assert [m.value for m in seen] == values[: len(seen)], "a consumer returned altered bytes"
    assert isinstance(error, adiskq.CorruptRecordError)
    assert error.path == victim
    assert error.position is not None
    assert error.position <= position


@pytest.mark.anyio
async def test_a_cut_sealed_segment_raises_where_the_data_ends(stream_path: str) -> None:
    """A sealed .data cut short is reported at the byte where the data ends."""
    values = await write_stream(stream_path)
    victim = segment_files(stream_path, "data")[1]
    halve(victim)
    seen, error = await read_until_error(stream_path)
    assert [m.value for m in seen] == values[: len(seen)]
    assert isinstance(error, adiskq.CorruptRecordError)
    assert error.path == victim


@pytest.mark.anyio
@pytest.mark.parametrize("field", [0, 8, 16], ids=["offset", "position", "size"])
async def test_a_damaged_index_entry_is_reported_not_followed(stream_path: str, field: int) -> None:
    """A damaged index entry never makes a reader return another offset's record: reading from it
    raises CorruptRecordError, and reading past it returns the right bytes or raises."""
    values = await write_stream(stream_path)
    index = segment_files(stream_path, "index")[0]
    flip_byte(index, 24 * 3 + field)  # a field of the fourth entry (offset 3)
    with pytest.raises(adiskq.CorruptRecordError):
        adiskq.read(stream_path, 0, 3)
    seen, _ = await read_until_error(stream_path)
    assert [m.value for m in seen] == values[: len(seen)]


def read_everything(path: str) -> list[adiskq.Message]:
    """Every message of partition 0 through the storage cursor."""
    reader = PartitionReader(os.path.join(path, "parts", "000000"), 0)
    messages = []
    with reader.cursor(reader.bounds()[0]) as cursor:
        while batch := cursor.read(64):
            messages.extend(batch)
    return messages


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[bytes]]:
    """One valid stream the fuzz test copies and damages."""
    path = str(tmp_path_factory.mktemp("pristine") / "stream")
    return path, anyio.run(write_stream, path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    target=st.sampled_from(["data", "index", "timeindex"]),
    segment=st.integers(min_value=0, max_value=10),
    edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=8)), max_size=4),
    cut=st.one_of(st.none(), st.floats(0, 1)),
    garbage=st.binary(max_size=64),
)
def test_fuzzed_segment_files_never_crash_or_mislead_readers_or_recovery(
    pristine: tuple[str, list[bytes]],
    tmp_path_factory: pytest.TempPathFactory,
    target: str,
    segment: int,
    edits: list[tuple[float, bytes]],
    cut: float | None,
    garbage: bytes,
) -> None:
    """Mutated segment files give valid messages or an adiskq.Error, never another exception or hang;
    recovery either repairs the stream into a readable prefix or refuses with an adiskq.Error."""
    source, values = pristine
    path = str(tmp_path_factory.mktemp("fuzz") / "stream")
    shutil.copytree(source, path)
    files = segment_files(path, target)
    victim = files[segment % len(files)]
    with open(victim, "r+b") as file:
        data = bytearray(file.read())
        for where, replacement in edits:
            at = int(where * len(data)) if data else 0
            data[at : at + len(replacement)] = replacement
        if cut is not None:
            del data[int(cut * len(data)) :]
        data += garbage
        file.seek(0)
        file.truncate()
        file.write(data)
    try:
        for message in read_everything(path):
            assert message.value == values[message.offset]
    except adiskq.Error:
        pass
    try:
        writer = StreamWriter.open(path)
    except adiskq.Error:
        return
    writer.close()
    try:
        survivors = read_everything(path)
    except adiskq.CorruptRecordError:
        return  # damage inside a sealed segment stays damage: recovery only cuts the active tail
    for message in survivors:
        assert message.value == values[message.offset]
