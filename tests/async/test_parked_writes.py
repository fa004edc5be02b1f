"""A producer opened with its partitions parked (``partition_writes.opened(..., parked=True)``, the
Kafka gateway's): a parked partition's files are opened by the write that comes for it, ``park``
closes an idle one's again, and a write that comes while a park is under way waits for it and
then opens them again; nothing acknowledged is lost, and the close is clean.

Local stream only: parked partitions are a stream's open files (README's capability table: local
stream options)."""

from __future__ import annotations

import anyio
import pytest
from support.storage import open_descriptors, partition_values

import adiskq
from adiskq._async import partition_writes

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_parked_partitions_open_for_the_write_that_comes_and_close_again(stream_path: str, flush: str) -> None:
    producer = await partition_writes.opened(
        adiskq.Producer(stream_path, partitions=50, flush=flush),  # type: ignore[arg-type]
        parked=True,
    )
    try:
        assert all(partition_writes.is_parked(producer, p) for p in range(50))
        held = open_descriptors(stream_path)  # the producer's own files, none of its partitions'
        assert partition_writes.write_now(producer, 7, [adiskq.Record(b"a")]) is None  # nothing written
        assert await partition_writes.write(producer, 7, [adiskq.Record(b"a")]) == 0
        assert not partition_writes.is_parked(producer, 7)
        assert open_descriptors(stream_path) == held + 5
        if flush == "async":
            assert partition_writes.write_now(producer, 7, [adiskq.Record(b"b")]) == 1
        else:
            assert await partition_writes.write(producer, 7, [adiskq.Record(b"b")]) == 1
        assert await partition_writes.park(producer, 7)
        assert partition_writes.is_parked(producer, 7)
        assert open_descriptors(stream_path) == held
        assert partition_values(stream_path, 7) == [b"a", b"b"]  # fsynced and readable while parked
        assert await partition_writes.write(producer, 7, [adiskq.Record(b"c")]) == 2
    finally:
        await producer.aclose()
    assert open_descriptors(stream_path) == 0
    assert partition_values(stream_path, 7) == [b"a", b"b", b"c"]
    async with adiskq.Producer(stream_path) as reopened:
        assert reopened.recovery is not None
        assert reopened.recovery.clean_partitions == tuple(range(50))  # the close was clean
        assert await partition_writes.write(reopened, 7, [adiskq.Record(b"d")]) == 3


async def test_a_write_that_comes_while_its_partition_is_parked_waits_then_opens_it(stream_path: str) -> None:
    producer = await partition_writes.opened(adiskq.Producer(stream_path, partitions=2), parked=True)
    try:
        offsets = []
        for round_ in range(20):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(partition_writes.park, producer, 1)
                await anyio.wait_all_tasks_blocked()  # the park is in its worker thread, or done
                assert partition_writes.is_parked(producer, 1)
                assert partition_writes.write_now(producer, 1, [adiskq.Record(b"%d" % round_)]) is None
                offsets.append(await partition_writes.write(producer, 1, [adiskq.Record(b"%d" % round_)]))
    finally:
        await producer.aclose()
    assert offsets == list(range(20))
    assert partition_values(stream_path, 1) == [b"%d" % i for i in range(20)]
