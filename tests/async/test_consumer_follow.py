"""Consumers following a live producer: across segment rolls, in this process and from another one.

go-diskq re-delivers tens of thousands of messages after rolls (34,639 duplicates in 200,000 with
64 KiB segments); here every consumer must see every offset exactly once, in order.

Local stream only: following a producer across segment rolls is about a stream's files (README's
capability table: the local stream options do not map).
"""

from __future__ import annotations

import functools
import sys

import anyio
import anyio.lowlevel
import pytest
from support.consumer import Writer

import adiskq

pytestmark = pytest.mark.anyio

SEGMENT_BYTES = 64 * 1024

PRODUCE = """
import random, sys, anyio, adiskq
path, count = sys.argv[1], int(sys.argv[2])
async def main():
    rng = random.Random(7)
    async with adiskq.Producer(path, segment_size_bytes=65536) as producer:
        sent = 0
        while sent < count:
            size = min(count - sent, rng.choice((1, 1, 1, 2, 5, 40, 300)))
            if size == 1:
                await producer.push(b"%08d" % sent + b"." * 92, key="k")
            else:
                await producer.push_many(
                    [adiskq.Record(b"%08d" % i + b"." * 92, key="k") for i in range(sent, sent + size)]
                )
            sent += size
anyio.run(main)
"""

PUSH_ONE = """
import sys, anyio, adiskq
async def main():
    async with adiskq.Producer(sys.argv[1]) as producer:
        await producer.push(sys.argv[2].encode())
anyio.run(main)
"""


async def follow(path: str, count: int, offsets: list[int], **kwargs: object) -> None:
    """Read ``count`` messages with end="wait", checking that each value names its offset."""
    async with adiskq.Consumer(path, end="wait", **kwargs) as consumer:  # type: ignore[arg-type]
        async for batch in consumer.batches(max_messages=512):
            for message in batch:
                assert int(message.value[:8]) == message.offset
                offsets.append(message.offset)
            if len(offsets) >= count:
                return


async def test_consumers_follow_a_producer_in_another_process_across_many_rolls(stream_path: str) -> None:
    """Three consumers following another process's producer over ~300 rolls of 64 KiB segments see each offset once."""
    count = 200_000
    async with adiskq.Producer(stream_path, segment_size_bytes=SEGMENT_BYTES):
        pass
    seen: list[list[int]] = [[], [], []]
    producer = await anyio.open_process([sys.executable, "-c", PRODUCE, stream_path, str(count)])
    try:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for offsets in seen:
                    tg.start_soon(follow, stream_path, count, offsets)
            assert await producer.wait() == 0
    finally:
        if producer.returncode is None:
            producer.kill()
        await producer.aclose()
    for offsets in seen:
        assert offsets == list(range(count))
    segments = adiskq.stats(stream_path).partitions[0].segments
    assert segments >= 290


async def test_consumers_follow_a_producer_in_this_process_across_rolls(stream_path: str) -> None:
    """Consumers beside their producer (woken directly) see every offset once, in order, across rolls."""
    count = 20_000
    seen: list[list[int]] = [[], [], []]
    async with adiskq.Producer(stream_path, segment_size_bytes=SEGMENT_BYTES) as producer:

        async def produce() -> None:
            for start in range(0, count, 50):
                await producer.push(b"%08d" % start + b"." * 92, key="k")
                await producer.push_many(
                    [adiskq.Record(b"%08d" % i + b"." * 92, key="k") for i in range(start + 1, start + 50)]
                )

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for offsets in seen:
                    tg.start_soon(follow, stream_path, count, offsets)
                tg.start_soon(produce)
    for offsets in seen:
        assert offsets == list(range(count))


async def test_consumers_polling_only_follow_across_rolls(stream_path: str) -> None:
    """With nothing but the poll to wake them, consumers still see every offset once, in order."""
    count = 5_000
    seen: list[int] = []
    with Writer(stream_path, segment_size_bytes=SEGMENT_BYTES, notify=False) as writer:

        async def produce() -> None:
            for start in range(0, count, 100):
                writer.append([b"%08d" % i + b"." * 92 for i in range(start, start + 100)])
                await anyio.lowlevel.checkpoint()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(follow, stream_path, count, seen, poll_interval=0.001))
                tg.start_soon(produce)
    assert seen == list(range(count))


async def test_a_consumer_wakes_for_a_commit_from_another_process(stream_path: str) -> None:
    """A consumer waiting with a long poll is woken by inotify when another process commits."""
    with Writer(stream_path):
        pass
    async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
        assert consumer.uses_inotify
        with anyio.fail_after(10):
            result = await anyio.run_process([sys.executable, "-c", PUSH_ONE, stream_path, "hi"])
            assert result.returncode == 0
            message = await consumer.__anext__()
    assert message.value == b"hi"


async def test_a_consumer_wakes_for_a_new_segment_from_another_process(stream_path: str) -> None:
    """A consumer caught up at the end of a segment is woken when the next segment appears."""
    with Writer(stream_path, segment_size_bytes=1024) as writer:
        while writer.stream.partitions[0].active.data_size < 1024:
            writer.append([b"x" * 100])
        present = writer.next_offset()
    async with adiskq.Consumer(stream_path, start=present, poll_interval=60) as consumer:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.run_process, [sys.executable, "-c", PUSH_ONE, stream_path, "next"])
                message = await consumer.__anext__()
    assert (message.offset, message.value) == (present, b"next")
    assert adiskq.stats(stream_path).partitions[0].segments == 2


PRODUCE_WITH_RETENTION = """
import sys, anyio, adiskq
path, count = sys.argv[1], int(sys.argv[2])
async def main():
    retention = adiskq.Retention(max_bytes=256 * 1024)
    async with adiskq.Producer(path, segment_size_bytes=65536, retention=retention, vacuum_interval=0.02) as producer:
        for start in range(0, count, 20):
            records = [adiskq.Record(b"%08d" % i + b"." * 92, key="k") for i in range(start, start + 20)]
            await producer.push_many(records)
            await anyio.sleep(0)
anyio.run(main)
"""


async def test_a_slow_consumer_under_vacuum_skips_only_what_it_reports(stream_path: str) -> None:
    """Retention deleting segments under a slow follower: offsets only rise, and every gap is a reported skip."""
    count = 40_000
    async with adiskq.Producer(stream_path, segment_size_bytes=SEGMENT_BYTES):
        pass
    offsets: list[int] = []
    async with adiskq.Consumer(stream_path, end=count) as consumer:
        async with await anyio.open_process(
            [sys.executable, "-c", PRODUCE_WITH_RETENTION, stream_path, str(count)]
        ) as producer:
            with anyio.fail_after(120):
                async for batch in consumer.batches(max_messages=10):
                    for message in batch:
                        assert int(message.value[:8]) == message.offset
                        offsets.append(message.offset)
                    await anyio.sleep(0.001)  # a slow reader: retention overtakes it
                assert await producer.wait() == 0
        skipped = [(first, last) for _, first, last in consumer.skipped]
    assert skipped, "the producer's retention should have overtaken a reader this slow"
    covered = sorted([(o, o + 1) for o in offsets] + skipped)
    position = 0
    for first, last in covered:
        assert first == position, f"offset {position} neither read nor reported skipped"
        position = last
    assert position == count
