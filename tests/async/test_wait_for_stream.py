"""``wait_for_stream=True``: a reader opened before its stream exists waits for a producer to
create it (woken by inotify on the nearest existing folder), then reads it from its first message.

Local stream only: wait_for_stream=True is refused on Kafka (README's capability table: create the
topic first).
"""

from __future__ import annotations

import os
import pathlib

import anyio
import pytest
from support.blocked import wait_all_tasks_blocked

import adiskq
from adiskq._async import notify as notify_module

pytestmark = pytest.mark.anyio


@pytest.fixture
def no_backup_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backup poll made an hour long: only an inotify event can wake a wait within the test."""
    monkeypatch.setattr(notify_module, "BACKUP_POLL_SECONDS", 3600.0)


async def test_a_consumer_waits_for_a_stream_under_missing_folders(
    tmp_path: pathlib.Path, no_backup_poll: None
) -> None:
    """The stream's folder and the one above it are missing; the consumer reads the first push."""
    path = os.fspath(tmp_path / "later" / "deeper" / "orders")
    async with adiskq.Consumer(path, wait_for_stream=True) as consumer:
        got: list[bytes] = []
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:

                async def read_two() -> None:
                    got.extend([(await consumer.__anext__()).value, (await consumer.__anext__()).value])

                tasks.start_soon(read_two)
                await wait_all_tasks_blocked()
                os.makedirs(os.path.dirname(path))
                await wait_all_tasks_blocked()
                async with adiskq.Producer(path) as producer:
                    await producer.push(b"first")
                    await producer.push(b"second")
    assert got == [b"first", b"second"]


async def test_a_group_waits_for_its_stream(tmp_path: pathlib.Path, no_backup_poll: None) -> None:
    """A named ConsumerGroup with ``wait_for_stream`` reads the new stream's messages and commits."""
    path = os.fspath(tmp_path / "orders")
    async with adiskq.ConsumerGroup(path, "billing", wait_for_stream=True, start="oldest") as group:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                got: list[adiskq.Message] = []

                async def read_one() -> None:
                    got.append(await group.__anext__())

                tasks.start_soon(read_one)
                await wait_all_tasks_blocked()
                async with adiskq.Producer(path, partitions=2) as producer:
                    await producer.push(b"hello", key="k")
        group.commit(got[0])
        assert got[0].value == b"hello"
        assert group.assignment == (0, 1)


async def test_without_wait_for_stream_a_missing_stream_raises(tmp_path: pathlib.Path) -> None:
    """The default stays: a missing stream is StreamNotFoundError at open."""
    with pytest.raises(adiskq.StreamNotFoundError):
        async with adiskq.Consumer(os.fspath(tmp_path / "nothing")):
            pass


async def test_closing_ends_a_wait_for_the_stream(tmp_path: pathlib.Path, no_backup_poll: None) -> None:
    """``aclose()`` from another task ends the wait with ClosedError."""
    consumer = adiskq.Consumer(os.fspath(tmp_path / "never"), wait_for_stream=True)
    async with consumer:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tasks:
                failures: list[BaseException] = []

                async def read() -> None:
                    try:
                        await consumer.__anext__()
                    except adiskq.ClosedError as error:
                        failures.append(error)

                tasks.start_soon(read)
                await wait_all_tasks_blocked()
                await consumer.aclose()
    assert len(failures) == 1


async def test_a_cancelled_wait_for_the_stream_leaves_no_watch(tmp_path: pathlib.Path) -> None:
    """A wait cancelled by its scope drops its inotify watch; the consumer can wait again."""
    path = os.fspath(tmp_path / "orders")
    async with adiskq.Consumer(path, wait_for_stream=True) as consumer:
        with anyio.move_on_after(0.05):
            await consumer.__anext__()
        watched = set(notify_module.get_notifier()._by_path)
        assert os.fspath(tmp_path) not in watched
        async with adiskq.Producer(path) as producer:
            await producer.push(b"x")
        with anyio.fail_after(10):
            assert (await consumer.__anext__()).value == b"x"
