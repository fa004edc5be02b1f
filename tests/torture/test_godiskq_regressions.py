"""go-diskq's known failures, each pinned so adiskq never has it."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys

import anyio
import pytest

import adiskq

pytestmark = pytest.mark.anyio

HOLD_THE_LOCK = """
import sys, anyio, adiskq
async def main():
    async with adiskq.Producer(sys.argv[1]) as producer:
        await producer.push(b"x")
        print("open", flush=True)
        await anyio.sleep_forever()
anyio.run(main)
"""


def kill_a_lock_holder(stream_path: str) -> None:
    """Start a producer in another process, check it holds the lock, and SIGKILL it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_LOCK, stream_path], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "open"
    assert adiskq.stats(stream_path).owner is not None
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=30)


def plant_strays(folder: str) -> None:
    """Files and a folder that are not segment files, in a partition folder."""
    for stray in ("notes.txt", "00000000000000000000.data.bak", ".DS_Store", "123.index"):
        with open(os.path.join(folder, stray), "w") as file:
            file.write("not a segment")
    os.mkdir(os.path.join(folder, "subfolder"))


def damage_settings(stream_path: str) -> None:
    """Make settings.json unreadable as JSON."""
    with open(os.path.join(stream_path, "settings.json"), "w") as settings:
        settings.write("{not json")


async def test_a_crashed_producer_leaves_no_stale_owner(stream_path: str) -> None:
    """go-diskq's owner file outlived a crashed producer; here the next producer opens at once."""
    kill_a_lock_holder(stream_path)
    with anyio.fail_after(10):
        async with adiskq.Producer(stream_path) as producer:
            assert (await producer.push(b"y")).offset == 1


async def test_a_stray_file_in_a_partition_folder_is_ignored(stream_path: str) -> None:
    """A file that is not a segment file never breaks opening, reading or vacuum."""
    async with adiskq.Producer(stream_path, segment_size_bytes=1024) as producer:
        for i in range(40):
            await producer.push(b"%d" % i + b"x" * 60, key="k")
    folder = os.path.join(stream_path, "parts", "000000")
    plant_strays(folder)
    async with adiskq.Producer(stream_path) as producer:
        assert not producer.recovery.repairs  # type: ignore[union-attr]
        await producer.vacuum(adiskq.Retention(max_bytes=1))
        last = await producer.push(b"after", key="k")
    assert adiskq.read(stream_path, 0, last.offset).value == b"after"
    assert "notes.txt" in await anyio.to_thread.run_sync(os.listdir, folder)


async def test_an_empty_payload_reads_back(stream_path: str) -> None:
    """go-diskq could not read back a message with an empty payload."""
    async with adiskq.Producer(stream_path) as producer:
        receipts = [await producer.push(b""), await producer.push(b"", key=""), await producer.push(b"x")]
    assert [adiskq.read(stream_path, *r).value for r in receipts] == [b"", b"", b"x"]


async def test_time_lookup_in_a_segment_holding_one_message(stream_path: str) -> None:
    """go-diskq's time lookup was wrong when a segment held one message."""
    when = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)
    async with adiskq.Producer(stream_path, segment_size_bytes=1024) as producer:
        first = await producer.push(b"x" * 2000, key="k", timestamp=when)  # fills its segment alone
        second = await producer.push(b"y", key="k", timestamp=when + dt.timedelta(hours=1))
    assert adiskq.stats(stream_path).partitions[0].segments == 2
    assert adiskq.offset_for_time(stream_path, 0, when - dt.timedelta(seconds=1)) == first.offset
    assert adiskq.offset_for_time(stream_path, 0, when) == first.offset
    assert adiskq.offset_for_time(stream_path, 0, when + dt.timedelta(seconds=1)) == second.offset
    assert adiskq.offset_for_time(stream_path, 0, when + dt.timedelta(hours=2)) == second.offset + 1


async def test_opening_a_damaged_stream_fails_fast_instead_of_hanging(stream_path: str) -> None:
    """go-diskq could hang on open after an error; here a damaged stream raises within seconds."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"x")
    damage_settings(stream_path)
    with anyio.fail_after(10):
        with pytest.raises(adiskq.CorruptStreamError, match=r"settings\.json"):
            async with adiskq.Producer(stream_path):
                pass
        with pytest.raises(adiskq.Error):
            adiskq.stats(stream_path)


async def test_no_duplicates_or_gaps_across_segment_rolls(stream_path: str) -> None:
    """go-diskq re-delivered tens of thousands of messages after rolls; followers here see each once."""
    total = 6000
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}

    async def follow(reader: int) -> None:
        async with adiskq.Consumer(stream_path, 0, start="oldest", end=total) as consumer:
            seen[reader].extend([message.offset async for message in consumer])

    async with adiskq.Producer(stream_path, segment_size_bytes=4096) as producer, anyio.create_task_group() as group:
        for reader in seen:
            group.start_soon(follow, reader)
        for i in range(0, total, 50):
            await producer.push_many([adiskq.Record(b"%06d" % (i + j) + b"x" * 80, key="k") for j in range(50)])
    assert adiskq.stats(stream_path).partitions[0].segments > 100
    for offsets in seen.values():
        assert offsets == list(range(total))


async def test_a_data_file_appearing_before_its_index_does_not_kill_a_follower(stream_path: str) -> None:
    """go-diskq's consumers died with ENOENT when a new .data appeared before its .index."""
    async with adiskq.Producer(stream_path, segment_size_bytes=1024) as producer:
        first = await producer.push(b"a" * 1100, key="k")  # fills the segment: the next push rolls
        async with adiskq.Consumer(stream_path, 0, start="oldest") as consumer:
            assert (await consumer.__anext__()).offset == first.offset
            early = os.path.join(stream_path, "parts", "000000", f"{first.offset + 1:020d}.data")
            await anyio.Path(early).touch()  # what a roll looks like halfway through
            with anyio.move_on_after(0.2):
                await consumer.__anext__()  # nothing to read: it waits, it does not die
            await producer.push(b"b", key="k")
            with anyio.fail_after(10):
                message = await consumer.__anext__()
    assert (message.offset, message.value) == (first.offset + 1, b"b")


async def test_a_named_group_that_consumed_everything_resumes(stream_path: str) -> None:
    """go-diskq's marked group hung after consuming everything; here it resumes with what is new."""
    async with adiskq.Producer(stream_path, partitions=2) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, key=b"%d" % i) for i in range(20)])
    async with adiskq.ConsumerGroup(stream_path, name="billing", end="close") as group:
        async for message in group:
            group.commit(message)
    with anyio.fail_after(10):
        async with adiskq.ConsumerGroup(stream_path, name="billing", end="close") as group:
            assert [message async for message in group] == []
    async with adiskq.Producer(stream_path) as producer:
        late = await producer.push(b"late", key="k")
    with anyio.fail_after(10):
        async with adiskq.ConsumerGroup(stream_path, name="billing") as group:
            message = await group.__anext__()
    assert (message.partition, message.offset, message.value) == (late.partition, late.offset, b"late")
