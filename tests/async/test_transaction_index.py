"""The ``.txnindex`` of aborted Kafka transactions and what the gateway's Fetch takes from the store:
an abort marker's transaction is indexed (a commit's is not), ``aborted_transactions`` answers
from the files, the last stable offset stops at the first record of an open transaction, recovery
rebuilds a missing or torn file and drops a torn marker's entry, ``adiskq check`` finds a wrong
file and ``--repair`` fixes it, vacuum deletes it with its segment, and a writer SIGKILLed between
a transaction's records and its marker leaves a transaction readers wait at and the gateway aborts.

Local stream only: the Kafka gateway's transactions in a stream's files; a Consumer of a
kafka:// topic reads Kafka's own with read_committed (README's capability table: Consumer)."""

from __future__ import annotations

import glob
import os

import anyio
import pytest
from support.cli import invoke
from support.crash import run_and_kill

import adiskq
from adiskq._async import partition_writes
from adiskq._async.partition_writes import AbortedTransaction
from adiskq._storage import txn_index
from adiskq._storage.partition_reader import PartitionReader

pytestmark = pytest.mark.anyio

A = (1000, 0)
B = (2000, 1)


def txnindex_files(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "parts", "000000", "*.txnindex")))


def entries(path: str) -> list[AbortedTransaction]:
    found = []
    for name in txnindex_files(path):
        with open(name, "rb") as file:
            found += txn_index.parse_entries(file.read())
    return found


def as_if_crashed(path: str) -> None:
    """Drop the clean-close record: the next open checks the active segment record by record."""
    os.unlink(os.path.join(path, "recovery.json"))


def values(path: str) -> list[bytes]:
    """What a reader is given now, without waiting (at an open transaction it would wait)."""
    reader = PartitionReader(os.path.join(path, "parts", "000000"), 0)
    found: list[bytes] = []
    with reader.cursor(0) as cursor:
        while batch := cursor.read(3):
            found += [message.value for message in batch]
    return found


async def write_history(path: str) -> None:
    """0 plain, 1-2 A (aborted at 5), 3 B (committed at 4), 6 A again (open)."""
    async with adiskq.Producer(path) as producer:
        await producer.push(b"p0")
        await partition_writes.write(producer, 0, [adiskq.Record(b"a1"), adiskq.Record(b"a2")], transaction=A)
        assert partition_writes.last_stable_offset(producer, 0) == 1
        await partition_writes.write(producer, 0, [adiskq.Record(b"b3")], transaction=B)
        assert partition_writes.open_transactions(producer, 0) == {A[0]: 1, B[0]: 3}
        assert await partition_writes.write_marker(producer, 0, *B, commit=True, coordinator_epoch=0) == 4
        assert partition_writes.last_stable_offset(producer, 0) == 1
        assert await partition_writes.write_marker(producer, 0, *A, commit=False, coordinator_epoch=0) == 5
        assert partition_writes.last_stable_offset(producer, 0) == 6  # the end: nothing open
        await partition_writes.write(producer, 0, [adiskq.Record(b"a6")], transaction=A)
        assert partition_writes.last_stable_offset(producer, 0) == 6
        assert partition_writes.aborted_transactions(producer, 0, 0, 6) == [AbortedTransaction(A[0], 1, 5)]
        assert partition_writes.aborted_transactions(producer, 0, 2, 2) == [AbortedTransaction(A[0], 1, 5)]
        assert partition_writes.aborted_transactions(producer, 0, 6, 9) == []
        assert partition_writes.aborted_transactions(producer, 0, 0, 0) == []


async def test_an_abort_is_indexed_and_answered_and_an_open_transaction_holds_the_stable_offset(
    stream_path: str,
) -> None:
    await write_history(stream_path)
    assert entries(stream_path) == [AbortedTransaction(A[0], 1, 5)]
    assert values(stream_path) == [b"p0", b"b3"]  # a6's transaction is still open
    assert invoke("check", stream_path).exit_code == 0


@pytest.mark.parametrize("damage", ["missing", "torn", "marker torn off"])
async def test_recovery_makes_the_txnindex_what_the_data_says(stream_path: str, damage: str) -> None:
    await write_history(stream_path)
    (name,) = txnindex_files(stream_path)
    data_file = name.removesuffix(".txnindex") + ".data"
    if damage == "missing":
        os.unlink(name)
    elif damage == "torn":
        _damage(name, append=b"\x01\x02\x03")
    else:  # the abort marker's record and all after it torn off, as a crash mid-write leaves them
        sizes = [len(record) for record in _records(data_file)]
        _damage(data_file, cut_at=sum(sizes[:5]) + 3)
    check = invoke("check", stream_path)
    assert check.exit_code != 0
    assert ".txnindex" in check.output or damage == "marker torn off"
    as_if_crashed(stream_path)
    async with adiskq.Producer(stream_path) as producer:
        repairs = [str(repair) for repair in producer.recovery.repairs] if producer.recovery else []
        assert any("txnindex" in repair for repair in repairs), repairs
        if damage == "marker torn off":
            # A's transaction is open again (its marker is gone): readers hold its records back.
            assert partition_writes.open_transactions(producer, 0) == {A[0]: 1}
            assert partition_writes.aborted_transactions(producer, 0, 0, 9) == []
    if damage == "marker torn off":
        assert txnindex_files(stream_path) == []
        assert values(stream_path) == [b"p0"]
    else:
        assert entries(stream_path) == [AbortedTransaction(A[0], 1, 5)]
    assert invoke("check", stream_path).exit_code == 0


def _damage(path: str, *, append: bytes = b"", cut_at: int | None = None, overwrite: bytes = b"") -> None:
    with open(path, "r+b") as file:
        if overwrite:
            file.write(overwrite)
        if cut_at is not None:
            file.truncate(cut_at)
        if append:
            file.seek(0, os.SEEK_END)
            file.write(append)


def _records(data_file: str) -> list[bytes]:
    from adiskq._sansio import codec

    with open(data_file, "rb") as file:
        buf = file.read()
    found = []
    position = 0
    while position < len(buf):
        decoded = codec.decode_record(buf, position)
        assert decoded is not codec.NEED_MORE
        found.append(buf[position : decoded.end])
        position = decoded.end
    return found


async def test_check_repairs_a_sealed_segment_s_txnindex_and_vacuum_deletes_it(stream_path: str) -> None:
    async with adiskq.Producer(stream_path, segment_size_bytes=4096) as producer:
        await partition_writes.write(producer, 0, [adiskq.Record(b"x" * 100)], transaction=A)
        await partition_writes.write_marker(producer, 0, *A, commit=False, coordinator_epoch=0)
        while len(glob.glob(os.path.join(stream_path, "parts", "000000", "*.data"))) < 3:
            await producer.push(b"y" * 1000)
    (name,) = txnindex_files(stream_path)
    _damage(name, overwrite=b"\xff")  # the producer id's first byte
    check = invoke("check", stream_path)
    assert check.exit_code != 0
    assert "is not what the segment's abort markers say" in check.output
    assert invoke("check", "--repair", stream_path).exit_code == 0
    assert entries(stream_path) == [AbortedTransaction(A[0], 0, 1)]
    assert invoke("check", stream_path).exit_code == 0
    async with adiskq.Producer(stream_path) as producer:
        report = await producer.vacuum(adiskq.Retention(max_bytes=1))
    assert (0, 0) in report.removed_segments
    assert txnindex_files(stream_path) == []


async def test_a_writer_killed_between_its_records_and_their_marker(stream_path: str) -> None:
    lines = run_and_kill("tests.support.transaction_writer", [stream_path, "asyncio"], 6)
    written = [line.split() for line in lines]
    first_transactional = int(written[0][1])
    plains = [int(offset) for kind, offset in written if kind == "plain"]
    assert written[0][0] == "txn"
    # The transaction is open in the data: readers stop at its first record, nothing after it shows.
    assert values(stream_path) == [b"before"]
    with pytest.raises(adiskq.OffsetOutOfRangeError, match="still open"):
        adiskq.read(stream_path, 0, first_transactional)
    assert adiskq.read(stream_path, 0, plains[0]).value == b"p0"  # asked for by its offset: no transaction's
    async with adiskq.Producer(stream_path) as producer:
        opened = partition_writes.open_transactions(producer, 0)
        assert opened == {77: first_transactional}
        # What the gateway's start does with a transaction its coordinator left open: abort it.
        async with adiskq.Consumer(stream_path, start="oldest") as consumer:
            got: list[bytes] = []

            async def read_on() -> None:
                async for batch in consumer.batches():
                    got.extend(message.value for message in batch)
                    if len(got) > len(plains):
                        return

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(read_on)
                    await anyio.wait_all_tasks_blocked()
                    await partition_writes.write_marker(producer, 0, 77, 0, commit=False, coordinator_epoch=0)
        assert partition_writes.open_transactions(producer, 0) == {}
    assert got[0] == b"before"
    assert all(not value.startswith(b"t") for value in got)
    assert got[1:] == [b"p%d" % n for n in range(len(got) - 1)]
    assert entries(stream_path)[0].first_offset == first_transactional
    assert invoke("check", stream_path).exit_code == 0
