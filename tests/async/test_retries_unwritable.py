"""Dead letters and retries that cannot be stored: found when the group opens if they can be, and
otherwise the message is kept (the partition's commit stays below it), never lost.

Local stream only: retries and dead letters a stream's folder cannot store (README's capability
table: retry(); a Kafka group's dead letters go to a topic)."""

from __future__ import annotations

import os
import pathlib
import shutil

import anyio
import pytest

import adiskq
from adiskq._storage.retries import retry_stream_path

pytestmark = pytest.mark.anyio

NAME = "billing"


async def push(path: str, values: list[bytes]) -> None:
    async with adiskq.Producer(path) as producer:
        for value in values:
            await producer.push(value)


async def left_for_the_group(path: str) -> list[bytes]:
    async with adiskq.ConsumerGroup(path, NAME, end="close") as group:
        with anyio.fail_after(10):
            return [m.value async for m in group]


async def test_a_dead_letter_path_that_cannot_hold_a_stream_is_refused_at_open(
    stream_path: str, tmp_path: pathlib.Path
) -> None:
    """A dead_letter_path that is a file, or under one, fails the group's open with an error naming
    dead_letter_path; one that is missing is created then."""
    await push(stream_path, [b"m"])
    a_file = tmp_path / "not-a-folder"
    a_file.write_bytes(b"")
    for bad in (a_file, a_file / "dead"):
        group = adiskq.ConsumerGroup(stream_path, NAME, dead_letter_path=bad)
        with pytest.raises(adiskq.InvalidArgumentError, match=r"dead_letter_path=.*(is a file|cannot be created)"):
            await group.__aenter__()
    fresh = tmp_path / "dead" / "letters"
    async with adiskq.ConsumerGroup(stream_path, NAME, dead_letter_path=fresh):
        assert fresh.is_dir()


async def test_a_retry_stream_that_is_not_one_is_refused_at_open(stream_path: str) -> None:
    """Something else where the group keeps its retries fails the open, naming the folder."""
    await push(stream_path, [b"m"])
    retries = retry_stream_path(stream_path, NAME)
    os.makedirs(os.path.dirname(retries))
    pathlib.Path(retries).write_bytes(b"")  # noqa: ASYNC240 - a test sets the scene
    with pytest.raises(adiskq.NotAStreamError, match="retry stream: it is a file"):
        await adiskq.ConsumerGroup(stream_path, NAME).__aenter__()


async def test_a_failed_dead_letter_keeps_the_message_until_one_succeeds(
    stream_path: str, tmp_path: pathlib.Path
) -> None:
    """dead_letter() that cannot store raises MessageKeptError naming dead_letter_path; a loop that
    goes on and commits later messages does not commit past it, so the next member gets it again;
    a dead_letter() of it that succeeds then lets the commit pass."""
    dead = tmp_path / "dead"
    await push(stream_path, [b"poison", b"good"])
    async with adiskq.ConsumerGroup(stream_path, NAME, dead_letter_path=dead) as group:
        with anyio.fail_after(10):
            poison = await group.__anext__()
            shutil.rmtree(dead)
            dead.write_bytes(b"")  # the folder became a file after the group opened
            with pytest.raises(adiskq.MessageKeptError, match=r"dead_letter_path=.*The message is kept") as caught:
                await group.dead_letter(poison, reason="bad")
            assert (caught.value.partition, caught.value.offset, caught.value.parameter) == (0, 0, "dead_letter_path")
            assert isinstance(caught.value, OSError)
            group.commit(await group.__anext__())  # the loop goes on
    assert await left_for_the_group(stream_path) == [b"poison", b"good"]
    dead.unlink()
    async with adiskq.ConsumerGroup(stream_path, NAME, dead_letter_path=dead) as group:
        with anyio.fail_after(10):
            poison = await group.__anext__()
            shutil.rmtree(dead)
            dead.write_bytes(b"")
            with pytest.raises(adiskq.MessageKeptError):
                await group.dead_letter(poison, reason="bad")
            group.commit(await group.__anext__())
            assert group.committed == {0: 0}  # held below the poison message
            dead.unlink()
            await group.dead_letter(poison, reason="bad")  # now it can be stored
            assert group.committed == {0: 2}
    assert await left_for_the_group(stream_path) == []


async def test_a_failed_retry_keeps_the_message(stream_path: str) -> None:
    """retry() that cannot store raises MessageKeptError; the loop's later commits do not cover
    the message, and the next member delivers it again."""
    await push(stream_path, [b"flaky", b"good"])
    retries = retry_stream_path(stream_path, NAME)
    async with adiskq.ConsumerGroup(stream_path, NAME) as group:
        with anyio.fail_after(10):
            flaky = await group.__anext__()
            pathlib.Path(retries).write_bytes(b"")  # noqa: ASYNC240 - taken meanwhile
            with pytest.raises(adiskq.MessageKeptError, match=r"retry stream.*The message is kept"):
                await group.retry(flaky, delay=0)
            group.commit(await group.__anext__())
    os.unlink(retries)
    assert await left_for_the_group(stream_path) == [b"flaky", b"good"]
