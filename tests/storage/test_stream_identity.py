"""A stream's identity (format adiskq/4, or in a format-5 stream): given once, kept by every later
write of settings.json, refused by a reader that does not know the format, and refused while
something has the stream open."""

from __future__ import annotations

import json
import os
import re

import pytest

import adiskq
from adiskq._errors import CorruptStreamError, NotAStreamError, StreamLockedError
from adiskq._storage.settings import IDENTITY_FORMAT, load_settings
from adiskq._storage.upgrade import give_identity

pytestmark = pytest.mark.anyio


def _as_format(path: str, stored_format: str) -> None:
    """Leave the stream's settings.json in ``stored_format``, as an older adiskq wrote it."""
    stored = _settings(path) | {"format": stored_format}
    with open(os.path.join(path, "settings.json"), "w") as file:
        json.dump(stored, file)


def _settings(path: str) -> dict[str, object]:
    with open(os.path.join(path, "settings.json")) as file:
        loaded = json.load(file)
    assert isinstance(loaded, dict)
    return loaded


async def test_an_identity_is_given_once_and_kept_when_the_partitions_grow(stream_path: str) -> None:
    async with adiskq.Producer(stream_path, partitions=2) as producer:
        await producer.push(b"before", key="k")
    _as_format(stream_path, "adiskq/2")
    stream_id, done = give_identity(stream_path)
    assert stream_id is not None
    assert re.fullmatch(r"[0-9a-f]{32}", stream_id)
    assert (done.before, done.after) == ("adiskq/2", IDENTITY_FORMAT)
    assert give_identity(stream_path)[0] == stream_id  # a second call changes nothing
    async with adiskq.Producer(stream_path, partitions=4) as producer:  # rewrites settings.json
        await producer.push(b"after", key="k", tag="t")
    stored = _settings(stream_path)
    assert (stored["format"], stored["stream_id"], stored["partition_count"]) == (IDENTITY_FORMAT, stream_id, 4)
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        assert sorted([m.value async for m in consumer]) == [b"after", b"before"]


async def test_a_format_5_stream_keeps_its_format_with_its_identity(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"x")
    stream_id, done = give_identity(stream_path)
    assert (done.before, done.after) == ("adiskq/5", "adiskq/5")
    assert _settings(stream_path)["stream_id"] == stream_id
    assert load_settings(stream_path) is not None


async def test_a_compressed_stream_keeps_its_compression_and_compact_segments(stream_path: str) -> None:
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        await producer.push_many([adiskq.Record(b"value %d" % i) for i in range(3000)])
    _as_format(stream_path, "adiskq/3")
    give_identity(stream_path)
    settings = load_settings(stream_path)
    assert settings is not None
    assert (settings.format, settings.compression, settings.compact_segments) == (IDENTITY_FORMAT, "zstd", True)
    async with adiskq.Producer(stream_path, compression="zstd") as producer:
        await producer.push(b"more")
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        values = [m.value async for m in consumer]
    assert values == [b"value %d" % i for i in range(3000)] + [b"more"]


async def test_no_identity_is_given_while_a_producer_has_the_stream_open(stream_path: str) -> None:
    async with adiskq.Producer(stream_path, shared=True) as producer:
        await producer.push(b"x")
        with pytest.raises(StreamLockedError):
            give_identity(stream_path)
    assert "stream_id" not in _settings(stream_path)


async def test_no_identity_is_given_while_a_group_member_reads(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"x")
    async with adiskq.ConsumerGroup(stream_path, "billing"):
        stream_id, done = give_identity(stream_path)
    assert stream_id is None
    assert [name for name, _ in done.readers] == ["billing"]
    assert "stream_id" not in _settings(stream_path)


def _write_settings(path: str, **changes: object) -> None:
    os.makedirs(path, exist_ok=True)
    stored = {"format": "adiskq/2", "partition_count": 1, **changes}
    with open(os.path.join(path, "settings.json"), "w") as file:
        json.dump(stored, file)


def test_format_4_without_a_well_formed_identity_is_damage(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "s")
    for bad in (None, "ABC", "0" * 31, 12):
        _write_settings(path, format=IDENTITY_FORMAT, **({} if bad is None else {"stream_id": bad}))
        with pytest.raises(CorruptStreamError, match="stream_id of 32 lowercase hex digits"):
            load_settings(path)


def test_an_identity_in_an_older_format_is_refused_as_a_newer_adiskq_s(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "s")
    _write_settings(path, stream_id="0" * 32)
    with pytest.raises(NotAStreamError, match="a newer adiskq wrote it"):
        load_settings(path)


def test_a_format_this_adiskq_does_not_know_is_refused_by_name(tmp_path: os.PathLike[str]) -> None:
    # What an adiskq before format 5 does with one (its READABLE_FORMATS end at adiskq/4): the same check.
    path = os.path.join(tmp_path, "s")
    _write_settings(path, format="adiskq/6", stream_id="0" * 32)
    with pytest.raises(NotAStreamError, match="'adiskq/6'"):
        load_settings(path)
