"""``Producer(path, shared=True)``: several producers, in one process or several, write one stream.

Local stream only: shared=True is how several producers share a stream's lock; on Kafka it is always
so (README's capability table).
"""

from __future__ import annotations

import collections

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from support import shared as shared_support

import adiskq
from adiskq._storage.flocks import partition_lock

pytestmark = pytest.mark.anyio


def order_per_key_kept(lines: list[str]) -> bool:
    """Each writer task's messages (one key) got increasing offsets, in the order acknowledged."""
    last: dict[str, tuple[int, int]] = {}
    for line in lines:
        partition, offset, value = line.split()
        task = value.rsplit("-s", 1)[0]
        previous = last.get(task)
        if previous is not None and (previous[0] != int(partition) or previous[1] >= int(offset)):
            return False
        last[task] = (int(partition), int(offset))
    return True


async def test_shared_producers_in_one_process_get_contiguous_offsets(stream_path: str) -> None:
    """Two shared producers pushing at once (single pushes, batches, sync and async flush): every
    receipt is a distinct offset, the offsets are contiguous, and each producer's order per key holds."""
    lines: list[str] = []
    async with (
        adiskq.Producer(stream_path, partitions=3, segment_size_bytes=2048, shared=True) as a,
        adiskq.Producer(stream_path, shared=True, flush="sync") as b,
    ):

        async def pusher(producer: adiskq.Producer, name: str, count: int) -> None:
            for i in range(count):
                if i % 10 == 9:
                    records = [adiskq.Record(f"{name}-s{i}-b{j}".encode(), key=name) for j in range(3)]
                    for j, (p, o) in enumerate(await producer.push_many(records)):
                        lines.append(f"{p} {o} {name}-s{i}-b{j}")
                else:
                    p, o = await producer.push(f"{name}-s{i}".encode(), key=name)
                    lines.append(f"{p} {o} {name}-s{i}")

        async with anyio.create_task_group() as group:
            for task in range(4):
                group.start_soon(pusher, a, f"a{task}", 300)
                group.start_soon(pusher, b, f"b{task}", 60)
    acknowledged = shared_support.receipts(lines)
    stored = shared_support.check_stream(stream_path, acknowledged)
    assert len(stored) == len(acknowledged)
    assert order_per_key_kept([line for line in lines if "-b" not in line.split()[2]])


async def test_a_shared_producer_lets_go_of_the_partition_lock_at_the_next_turn(stream_path: str) -> None:
    """A shared producer holds a partition's lock only while it writes: once its task yields, another
    process can take it, and a push then waits for it instead of writing beside its holder."""
    async with adiskq.Producer(stream_path, partitions=1, shared=True) as producer:
        await producer.push(b"x")
        other = partition_lock(stream_path, 0)
        try:
            with anyio.fail_after(5):  # the producer's task is waiting here: its lock must come free
                await anyio.to_thread.run_sync(other.acquire, abandon_on_cancel=True)
            written: list[int] = []

            async def push_y() -> None:
                written.append((await producer.push(b"y")).offset)

            async with anyio.create_task_group() as group:
                group.start_soon(push_y)
                for _ in range(10):
                    await anyio.lowlevel.checkpoint()
                assert written == []  # waiting for the lock
                other.release()
        finally:
            other.close()
    assert written == [1]
    assert adiskq.read(stream_path, 0, 1).value == b"y"


async def test_shared_and_exclusive_producers_exclude_each_other(stream_path: str) -> None:
    """The second kind to open gets StreamLockedError naming the holder and saying what to pass."""
    async with adiskq.Producer(stream_path, shared=True):
        with pytest.raises(adiskq.StreamLockedError, match="shared=True"):
            async with adiskq.Producer(stream_path):
                pass
    async with adiskq.Producer(stream_path):
        with pytest.raises(adiskq.StreamLockedError, match="shared=True"):
            async with adiskq.Producer(stream_path, shared=True):
                pass


async def test_a_consumer_in_the_process_follows_every_shared_producer(stream_path: str) -> None:
    """A consumer in the writers' process is woken by either producer's pushes."""
    async with (
        adiskq.Producer(stream_path, partitions=1, shared=True) as a,
        adiskq.Producer(stream_path, shared=True) as b,
        adiskq.Consumer(stream_path, 0, start="oldest") as consumer,
    ):
        seen: list[bytes] = []
        for i in range(20):
            await (a if i % 2 else b).push(b"%d" % i)
            with anyio.fail_after(5):
                seen.append((await consumer.__anext__()).value)
    assert seen == [b"%d" % i for i in range(20)]


async def test_closing_one_shared_producer_leaves_the_others_writing(stream_path: str) -> None:
    """One shared producer closing (and its lock dropped) does not disturb the others."""
    async with adiskq.Producer(stream_path, partitions=2, shared=True) as staying:
        async with adiskq.Producer(stream_path, shared=True) as leaving:
            for i in range(50):
                await leaving.push(b"l%d" % i, key=b"k%d" % (i % 4))
        for i in range(50):
            await staying.push(b"s%d" % i, key=b"k%d" % (i % 4))
        assert [w.shared for w in adiskq.stats(stream_path).writers] == [True]
    counts = collections.Counter(p.next_offset for p in adiskq.stats(stream_path).partitions)
    assert sum(n * c for n, c in counts.items()) == 100


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_shared_producers_in_several_processes_get_contiguous_offsets(stream_path: str, flush: str) -> None:
    """Three processes, each with three tasks pushing: every acknowledged message reads back at its
    offset, once, offsets are contiguous, and each task's messages keep their order."""
    writers = [
        shared_support.Writer(stream_path, flush, "asyncio" if n % 2 else "trio", f"w{n}", count=120) for n in range(3)
    ]
    lines = [line for writer in writers for line in writer.finish()]
    assert all(writer.child.returncode == 0 for writer in writers)
    acknowledged = shared_support.receipts(lines)
    assert len(acknowledged) == 3 * 3 * (120 + 120 // 7 * 2)
    stored = shared_support.check_stream(stream_path, acknowledged)
    assert len(stored) == len(acknowledged)
    for writer in writers:
        assert order_per_key_kept(writer.lines)


async def test_a_push_after_another_producer_vacuumed_its_old_segment_is_written(stream_path: str) -> None:
    """A shared producer whose last write went to a segment that another producer has since rolled
    past and vacuumed away pushes again without error, at the next offset."""
    async with (
        adiskq.Producer(stream_path, partitions=1, segment_size_bytes=1024, shared=True) as idle,
        adiskq.Producer(stream_path, shared=True) as busy,
    ):
        await idle.push(b"first")
        for i in range(50):
            await busy.push(b"%03d" % i + b"." * 100)
        report = await busy.vacuum(adiskq.Retention(max_bytes=1024))
        assert (0, 0) in report.removed_segments  # the segment the idle producer wrote last is gone
        receipt = await idle.push(b"after")
    assert receipt == adiskq.Receipt(0, 51)
    assert adiskq.read(stream_path, 0, 51).value == b"after"
