"""Library readers and Kafka transactions: a Consumer, a ConsumerGroup, ``read`` and ``find`` deliver
a committed transaction's records where they stand, never an aborted one's and never a marker; at
a transaction still open they stop (nothing after it is delivered before it) and go on, woken by
the marker's write, once it commits or aborts. Offsets keep their numbers: a partition that had
transactions has gaps where its markers and aborted records are.

Local stream only: the Kafka gateway's transactions in a stream's files; a Consumer of a
kafka:// topic reads Kafka's own with read_committed (README's capability table: Consumer)."""

from __future__ import annotations

import json

import anyio
import pytest
from support.cli import invoke

import adiskq
from adiskq._async import partition_writes

pytestmark = pytest.mark.anyio

A = (1000, 0)
B = (2000, 3)
WAKE_UP_SECONDS = 10.0  # a wake-up arrives far sooner; the bound only keeps a failure from hanging


def records(*values: bytes, key: bytes = b"k") -> list[adiskq.Record]:
    return [adiskq.Record(value, key=key) for value in values]


async def read_all(path: str, **options: object) -> list[tuple[int, bytes]]:
    async with adiskq.Consumer(path, end="close", **options) as consumer:  # type: ignore[arg-type]
        return [(message.offset, message.value) async for message in consumer]


async def test_committed_records_are_delivered_and_aborted_ones_and_markers_never(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"p0")  # 0
        await partition_writes.write(producer, 0, records(b"a1", b"a2"), transaction=A)  # 1, 2
        await producer.push(b"p3")  # 3
        await partition_writes.write(producer, 0, records(b"b4"), transaction=B)  # 4
        await partition_writes.write(producer, 0, records(b"a5"), transaction=A)  # 5
        await partition_writes.write_marker(producer, 0, *B, commit=False, coordinator_epoch=0)  # 6
        await partition_writes.write_marker(producer, 0, *A, commit=True, coordinator_epoch=0)  # 7
        await partition_writes.write(producer, 0, records(b"b8"), transaction=B)  # 8: B's next transaction
        await partition_writes.write_marker(producer, 0, *B, commit=True, coordinator_epoch=0)  # 9
        await producer.push(b"p10")  # 10
    expected = [(0, b"p0"), (1, b"a1"), (2, b"a2"), (3, b"p3"), (5, b"a5"), (8, b"b8"), (10, b"p10")]
    assert await read_all(stream_path) == expected
    for batch_size in (1, 2, 3):  # every cut of the batches through the transactions
        async with adiskq.Consumer(stream_path, end="close") as consumer:
            got = [(m.offset, m.value) async for batch in consumer.batches(batch_size) for m in batch]
        assert got == expected
    async with adiskq.ConsumerGroup(stream_path, "g", start="oldest") as group:
        seen: list[tuple[int, bytes]] = []
        while len(seen) < len(expected):
            with anyio.fail_after(WAKE_UP_SECONDS):
                message = await group.__anext__()
            seen.append((message.offset, message.value))
            group.commit(message)
    assert seen == expected
    assert adiskq.read(stream_path, 0, 5).value == b"a5"
    for hidden in (4, 6, 7, 9):
        with pytest.raises(adiskq.OffsetOutOfRangeError, match="marker, or a record of a transaction"):
            adiskq.read(stream_path, 0, hidden)
    assert [m.offset for m in adiskq.find(stream_path, b"k")] == [1, 2, 5, 8]


async def test_a_reader_stops_at_an_open_transaction_and_goes_on_at_its_commit(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer, adiskq.Consumer(stream_path) as consumer:
        await producer.push(b"before")  # 0
        await partition_writes.write(producer, 0, records(b"t1", b"t2"), transaction=A)  # 1, 2
        await producer.push(b"after")  # 3: after the open transaction, so held back with it
        batches = consumer.batches()
        with anyio.fail_after(WAKE_UP_SECONDS):
            assert [m.value for m in await batches.__anext__()] == [b"before"]
        with anyio.move_on_after(0.3) as waiting:  # the consumer waits at offset 1
            await batches.__anext__()
        assert waiting.cancelled_caught
        with pytest.raises(adiskq.OffsetOutOfRangeError, match="still open"):
            adiskq.read(stream_path, 0, 1)
        assert adiskq.find(stream_path, b"k") == []
        got: list[tuple[int, bytes]] = []

        async def read_on() -> None:
            while len(got) < 3:
                got.extend((m.offset, m.value) for m in await batches.__anext__())

        with anyio.fail_after(WAKE_UP_SECONDS):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_on)
                await anyio.wait_all_tasks_blocked()
                await partition_writes.write_marker(producer, 0, *A, commit=True, coordinator_epoch=1)
        assert got == [(1, b"t1"), (2, b"t2"), (3, b"after")]


async def test_a_reader_waiting_at_an_aborted_transaction_skips_it(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer, adiskq.Consumer(stream_path) as consumer:
        await partition_writes.write(producer, 0, records(b"t0", b"t1"), transaction=A)  # 0, 1
        await producer.push(b"p2")  # 2
        got: list[tuple[int, bytes]] = []

        async def read_on() -> None:
            async for batch in consumer.batches():
                got.extend((m.offset, m.value) for m in batch)
                return

        with anyio.fail_after(WAKE_UP_SECONDS):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(read_on)
                await anyio.wait_all_tasks_blocked()
                assert got == []
                await partition_writes.write_marker(producer, 0, *A, commit=False, coordinator_epoch=1)
        assert got == [(2, b"p2")]
        assert await read_all(stream_path) == [(2, b"p2")]


async def test_the_command_line_reads_committed_records_and_stops_at_an_open_transaction(stream_path: str) -> None:
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"p0")  # 0
        await partition_writes.write(producer, 0, records(b"a1"), transaction=A)  # 1
        await partition_writes.write(producer, 0, records(b"b2"), transaction=B)  # 2
        await partition_writes.write_marker(producer, 0, *B, commit=False, coordinator_epoch=0)  # 3
        await partition_writes.write_marker(producer, 0, *A, commit=True, coordinator_epoch=0)  # 4
        await partition_writes.write(producer, 0, records(b"a5"), transaction=A)  # 5: open
        await producer.push(b"p6")  # 6
    result = invoke("read", stream_path)
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.output.splitlines()]
    # Up to the open transaction, and no further: "the end of what is there now" for a reader.
    assert [(line["offset"], line["value"]) for line in printed] == [(0, "p0"), (1, "a1")]


async def test_markers_far_from_their_records_are_found_across_scan_steps(stream_path: str) -> None:
    """A marker thousands of records after its transaction's first (past a step of the scan that
    looks for it), with a second transaction open across the first one's marker: each resolved."""
    plain = [adiskq.Record(b"p%05d" % i, key=b"k") for i in range(6000)]
    async with adiskq.Producer(stream_path, segment_size_bytes=64 * 1024) as producer:
        await partition_writes.write(producer, 0, records(b"a0"), transaction=A)  # 0
        await producer.push_many(plain[:5000])  # 1..5000
        await partition_writes.write(producer, 0, records(b"b5001"), transaction=B)  # 5001
        await partition_writes.write_marker(producer, 0, *A, commit=True, coordinator_epoch=0)  # 5002
        await producer.push_many(plain[5000:])  # 5003..6002
        await partition_writes.write_marker(producer, 0, *B, commit=False, coordinator_epoch=0)  # 6003
    got = await read_all(stream_path)
    assert [value for _, value in got] == [b"a0"] + [record.value for record in plain]
    assert [offset for offset, _ in got] == [0, *range(1, 5001), *range(5003, 6003)]
