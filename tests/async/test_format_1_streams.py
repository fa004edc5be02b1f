"""A stream in format adiskq/1 (written before tags) under a current producer: written as it is,
a tag refused with how to move the stream, and tags accepted once `adiskq upgrade` moved it.

Local stream only: stream formats and `adiskq upgrade` are a folder's files (README's capability
table: local stream options)."""

from __future__ import annotations

import json
import os

import pytest

import adiskq
from adiskq._storage.upgrade import upgrade_stream

pytestmark = pytest.mark.anyio


def stored_format(path: str) -> object:
    with open(os.path.join(path, "settings.json")) as file:
        return json.load(file)["format"]


async def format_1_stream(path: str) -> None:
    """A stream with one untagged message, its settings put back to format adiskq/1."""
    async with adiskq.Producer(path) as producer:
        await producer.push(b"old", key="k")
    settings_path = os.path.join(path, "settings.json")
    with open(settings_path) as file:  # noqa: ASYNC230 - a test's setup
        data = json.load(file)
    with open(settings_path, "w") as file:  # noqa: ASYNC230 - a test's setup
        json.dump(data | {"format": "adiskq/1"}, file)


async def test_a_producer_leaves_a_format_1_stream_in_its_format_and_refuses_tags(stream_path: str) -> None:
    """Opening and pushing untagged messages keeps adiskq/1; push(tag=) and a tagged push_many raise
    SettingsMismatchError naming `adiskq upgrade PATH`, and write nothing."""
    await format_1_stream(stream_path)
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"untagged", key="k")
        await producer.push_many([adiskq.Record(b"untagged too", key="k")])
        for push in (
            lambda: producer.push(b"tagged", key="k", tag="created"),
            lambda: producer.push_many([b"plain", adiskq.Record(b"tagged", tag="created")]),
        ):
            with pytest.raises(adiskq.SettingsMismatchError, match=f"`adiskq upgrade {stream_path}`"):
                await push()
    assert stored_format(stream_path) == "adiskq/1"
    assert adiskq.stats(stream_path).message_count == 3


async def test_tags_are_written_once_the_stream_was_upgraded(stream_path: str) -> None:
    """After the explicit move, the same producer code writes tags, read back by a filtered consumer."""
    await format_1_stream(stream_path)
    done = upgrade_stream(stream_path)
    assert (done.before, done.after, done.readers) == ("adiskq/1", "adiskq/5", ())
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"tagged", key="k", tag="created")
    async with adiskq.Consumer(stream_path, end="close", tags={"created"}) as consumer:
        assert [m.value async for m in consumer] == [b"tagged"]
