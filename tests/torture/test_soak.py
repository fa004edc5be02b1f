"""Soak: a producer at full speed, ten consumers and a named group, vacuum every second, rolls every
hundred or so messages. Memory stays flat, no file descriptor leaks, and every consumer sees every
retained message once, in order, with gaps only where it reported retention took messages first.

The short version runs in every suite; the long one with ``pytest -m slow``.
"""

from __future__ import annotations

import os
import statistics
import time

import anyio
import psutil
import pytest

import adiskq
from adiskq._sansio.naming import partition_for_key

pytestmark = pytest.mark.anyio

PARTITIONS = 3
PADDING = b"." * 90


def value_for(partition: int, offset: int) -> bytes:
    """The value the soak writes at (partition, offset), so readers can check it without a ledger."""
    return b"%d:%d:" % (partition, offset) + PADDING


def keys_by_partition() -> dict[int, list[bytes]]:
    """A few keys that land on each partition."""
    keys: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    i = 0
    while min(map(len, keys.values())) < 8:
        key = b"key-%d" % i
        keys[partition_for_key(key, PARTITIONS)].append(key)
        i += 1
    return keys


def open_fds() -> dict[int, str]:
    """What each file descriptor of this process refers to."""
    targets = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            targets[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except FileNotFoundError:  # the listing's own descriptor, closed by now
            continue
    return targets


class Reading:
    """What one reader saw of one partition: checked as it goes, so the test keeps no ledger."""

    def __init__(self) -> None:
        self.last = -1
        self.count = 0
        self.gaps: list[tuple[int, int]] = []

    def see(self, message: adiskq.Message) -> None:
        assert message.offset > self.last, f"offset {message.offset} came again (after {self.last})"
        if message.offset != self.last + 1 and self.last >= 0:
            self.gaps.append((self.last + 1, message.offset))
        assert message.value == value_for(message.partition, message.offset), "wrong bytes"
        self.last = message.offset
        self.count += 1


def gaps_are_reported(gaps: list[tuple[int, int]], skipped: list[tuple[int, int]]) -> bool:
    """Every gap a reader saw lies within ranges it reported as taken by retention."""
    return all(any(first <= gap_first and gap_last <= last for first, last in skipped) for gap_first, gap_last in gaps)


@pytest.mark.parametrize("seconds", [pytest.param(5, id="short"), pytest.param(180, marks=pytest.mark.slow, id="long")])
async def test_soak(stream_path: str, seconds: float) -> None:
    """Full speed for a while: flat memory, no fd leak, every retained message seen once by everyone."""
    process = psutil.Process()
    fds_before = open_fds()
    keys = keys_by_partition()
    targets: dict[int, int] = {}  # the final next offsets, known before the last batches are pushed
    finished = anyio.Event()
    rss: list[int] = []
    consumers: list[tuple[adiskq.Consumer, Reading]] = []
    group_readings = {p: Reading() for p in range(PARTITIONS)}
    group_skips: list[tuple[int, int, int]] = []
    retention = adiskq.Retention(max_bytes=96 * 1024)

    async def push_batch(producer: adiskq.Producer, partition: int, start: int) -> None:
        records = [adiskq.Record(value_for(partition, start + i), key=keys[partition][i % 8]) for i in range(50)]
        receipts = await producer.push_many(records)
        assert receipts[0] == (partition, start)
        assert receipts[-1] == (partition, start + 49)

    async def produce(producer: adiskq.Producer) -> None:
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + seconds
        round_ = 0
        while time.monotonic() < deadline:
            partition = round_ % PARTITIONS
            await push_batch(producer, partition, next_offset[partition])
            next_offset[partition] += 50
            round_ += 1
        targets.update({p: offset + 50 for p, offset in next_offset.items()})
        for partition, offset in next_offset.items():  # readers learn they are done from these
            await push_batch(producer, partition, offset)
        finished.set()

    async def consume(consumer: adiskq.Consumer, reading: Reading, done: anyio.Event) -> None:
        async with consumer:
            async for batch in consumer.batches(max_messages=200):
                for message in batch:
                    reading.see(message)
                if targets and consumer.position == targets[consumer.partition]:
                    done.set()
                    return

    async def follow_as_group(done: anyio.Event) -> None:
        async with adiskq.ConsumerGroup(stream_path, name="soak", commit_interval=0.2) as group:
            async for batch in group.batches(max_messages=200):
                for message in batch:
                    group_readings[message.partition].see(message)
                    group.commit(message)
                if targets and all(group.committed.get(p) == offset for p, offset in targets.items()):
                    group_skips.extend(group.skipped)
                    done.set()
                    return

    async def sample_memory() -> None:
        while not finished.is_set():
            rss.append(process.memory_info().rss)
            with anyio.move_on_after(0.1):
                await finished.wait()

    async with adiskq.Producer(
        stream_path, partitions=PARTITIONS, segment_size_bytes=16 * 1024, retention=retention, vacuum_interval=1.0
    ) as producer:
        consumers = [
            (adiskq.Consumer(stream_path, i % PARTITIONS, start="oldest", on_data_loss="skip"), Reading())
            for i in range(10)
        ]
        dones = [anyio.Event() for _ in range(len(consumers) + 1)]
        with anyio.fail_after(seconds + 60):
            async with anyio.create_task_group() as group:
                group.start_soon(produce, producer)
                group.start_soon(sample_memory)
                group.start_soon(follow_as_group, dones[-1])
                for (consumer, reading), done in zip(consumers, dones, strict=False):
                    group.start_soon(consume, consumer, reading, done)
        final = adiskq.stats(stream_path)

    assert all(done.is_set() for done in dones)
    assert final.partitions[0].segments < final.partitions[0].next_offset // 100, "retention kept everything"
    assert sum(p.oldest_offset for p in final.partitions) > 0, "vacuum never ran"
    for consumer, reading in consumers:
        assert reading.count > 0
        assert reading.last == final.partitions[consumer.partition].next_offset - 1
        assert gaps_are_reported(reading.gaps, consumer.skipped)
    for partition, reading in group_readings.items():
        skipped = [(first, last) for p, first, last in group_skips if p == partition]
        assert reading.last == final.partitions[partition].next_offset - 1
        assert gaps_are_reported(reading.gaps, skipped)
    # Memory is flat: the last quarter of the run uses no more than the second quarter, give or take.
    quarter = max(1, len(rss) // 4)
    assert statistics.median(rss[-quarter:]) <= statistics.median(rss[quarter : 2 * quarter]) + 24 * 2**20
    # The one inotify instance all consumers of a process share (and its epoll) lives as long as
    # the process, by design; nothing else may stay open.
    shared = {"anon_inode:inotify", "anon_inode:[eventpoll]"}
    new = [target for fd, target in open_fds().items() if fds_before.get(fd) != target]
    assert all(new.count(target) <= 1 for target in shared)
    assert not set(new) - shared, f"file descriptors leaked: {set(new) - shared}"
