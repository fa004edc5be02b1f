"""Damage met by readers that filter by tag: a damaged ``.index`` size field, and rot in a tagged
record after a crash. Every reader delivers the sound messages before the damage and then raises at it.

Local stream only: tag filters and a stream's files (README's capability table: tags= (tag
filters))."""

from __future__ import annotations

import glob
import os
import pathlib
import struct

import anyio
import pytest

import adiskq

pytestmark = pytest.mark.anyio


def _segment_file(path: str, extension: str) -> str:
    (found,) = glob.glob(os.path.join(path, "parts", "000000", f"*.{extension}"))
    return found


def _bytes(path: str) -> bytes:
    return pathlib.Path(path).read_bytes()


def _overwrite(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(data)


async def _read(path: str, tags: set[str] | None) -> tuple[list[int], adiskq.CorruptRecordError | None]:
    """The offsets a consumer from the oldest message delivers, and the error it ends with."""
    seen: list[int] = []
    try:
        async with adiskq.Consumer(path, start="oldest", end="close", tags=tags) as consumer:
            with anyio.fail_after(10):
                async for message in consumer:
                    seen.append(message.offset)  # noqa: PERF401 - what came before the error counts
    except adiskq.CorruptRecordError as error:
        return seen, error
    return seen, None


@pytest.mark.parametrize("size", [1 << 62, 2**64 - 1], ids=["2**62", "2**64-1"])
async def test_a_filtered_consumer_meets_a_damaged_index_size_as_damage(stream_path: str, size: int) -> None:
    """A damaged .index size: the filtered consumer delivers the wanted messages before it, then names the entry."""
    async with adiskq.Producer(stream_path, partitions=1) as producer:
        await producer.push_many(
            [adiskq.Record(b"v%03d" % i, key="k", tag="a" if i % 50 == 0 else "b") for i in range(200)]
        )
    _overwrite(_segment_file(stream_path, "index"), 100 * 24 + 16, struct.pack("<Q", size))
    seen, error = await _read(stream_path, {"a"})
    assert seen == [0, 50]
    assert error is not None
    assert (error.offset, error.path, error.position) == (100, _segment_file(stream_path, "index"), 100 * 24)
    plain, _ = await _read(stream_path, None)
    assert plain[:100] == list(range(100))


async def _crashed_with_rot(path: str) -> None:
    """50 single pushes tagged "a" whose buffered .tagindex entries a crash lost, and offset 10's tag byte rotted."""
    async with adiskq.Producer(path, partitions=1) as producer:
        for i in range(50):
            await producer.push(b"value-%03d" % i, key="k", tag="a")
    os.truncate(_segment_file(path, "tagindex"), 0)  # what the crash left: no entry written yet
    os.unlink(os.path.join(path, "recovery.json"))
    (_, position, _) = struct.unpack_from("<QQQ", _bytes(_segment_file(path, "index")), 10 * 24)
    tag_at = position + 4 + 4 + 1 + 1 + 8 + 4 + 1 + 2  # size, crc, magic, attributes, timestamp, key "k", tag_len
    data = _segment_file(path, "data")
    _overwrite(data, tag_at, bytes([_bytes(data)[tag_at] ^ 0xFF]))


@pytest.mark.parametrize("recovered", [False, True], ids=["before-recovery", "after-recovery"])
async def test_filtered_and_unfiltered_readers_meet_rot_after_a_crash_alike(stream_path: str, recovered: bool) -> None:
    """Rot in a tagged record after a crash: both readers deliver offsets 0..9, then raise at offset 10."""
    await _crashed_with_rot(stream_path)
    if recovered:
        async with adiskq.Producer(stream_path) as producer:
            assert producer.recovery is not None
            assert any("keep their offsets (10;" in repair.action for repair in producer.recovery.repairs)
    for tags in ({"a"}, None):
        seen, error = await _read(stream_path, tags)
        assert seen == list(range(10)), tags
        assert error is not None
        assert error.offset == 10
        async with adiskq.Consumer(stream_path, start=11, end="close", tags=tags) as consumer:
            with anyio.fail_after(10):
                assert [message.offset async for message in consumer] == list(range(11, 50))
