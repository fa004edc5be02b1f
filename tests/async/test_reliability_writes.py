"""Write-path faults that once lost or retracted data: each test pins one fix.

Local stream only: faults of a stream's files (README's capability table: push_many, flush="sync")."""

from __future__ import annotations

import errno
from typing import Any

import anyio
import pytest
from support.cli import invoke
from support.faults import DiskFaults

import adiskq
from adiskq._sansio.naming import fnv1_32
from adiskq._storage.stream import StreamWriter

pytestmark = pytest.mark.anyio

# Partition 0's first segment, matched by the end of the file's path.
P0_DATA = "/parts/000000/00000000000000000000.data"


def key_for(partition: int, partitions: int = 2) -> str:
    """A key that FNV-1 places in ``partition``."""
    i = 0
    while fnv1_32(f"k{i}".encode()) % partitions != partition:
        i += 1
    return f"k{i}"


def values_of(path: str, partition: int) -> list[bytes]:
    """Every value of one partition, in offset order."""
    stats = adiskq.stats(path).partitions[partition]
    return [adiskq.read(path, partition, offset).value for offset in range(stats.oldest_offset, stats.next_offset)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_push_many_whose_first_share_fails_commits_the_others_and_says_which(
    stream_path: str, faults: DiskFaults, flush: str
) -> None:
    """A failed share no longer strands the later ones: they commit, the error lists them, close returns."""
    k0, k1 = key_for(0), key_for(1)
    async with adiskq.Producer(stream_path, partitions=2, flush=flush) as producer:  # type: ignore[arg-type]
        faults.failing[P0_DATA] = errno.EFBIG
        with pytest.raises(adiskq.PartialWriteError) as caught:
            # Partition 0's share is large, so it is batched even with flush="async".
            await producer.push_many([adiskq.Record(b"a" * 300_000, key=k0), adiskq.Record(b"b", key=k1)])
        assert caught.value.errno == errno.EFBIG
        assert isinstance(caught.value, OSError)
        assert caught.value.receipts == [None, adiskq.Receipt(1, 0)]
        faults.failing.clear()
        with anyio.fail_after(10):
            later = await producer.push(b"later", key=k1)
        assert later == adiskq.Receipt(1, 1)
    assert values_of(stream_path, 0) == []
    assert values_of(stream_path, 1) == [b"b", b"later"]


@pytest.mark.timeout(60)
async def test_push_many_that_wrote_nothing_raises_the_plain_error(stream_path: str, faults: DiskFaults) -> None:
    """When the first share fails before any other was written, the call fails whole with the disk's OSError."""
    k0, k1 = key_for(0), key_for(1)
    async with adiskq.Producer(stream_path, partitions=2) as producer:
        faults.failing[P0_DATA] = errno.ENOSPC
        with pytest.raises(OSError, match="No space") as caught:
            await producer.push_many([adiskq.Record(b"a", key=k0), adiskq.Record(b"b", key=k1)])
        assert not isinstance(caught.value, adiskq.PartialWriteError)
        assert caught.value.errno == errno.ENOSPC
        faults.failing.clear()
        assert await producer.push(b"later", key=k1) == adiskq.Receipt(1, 0)
    assert values_of(stream_path, 0) == []
    assert values_of(stream_path, 1) == [b"later"]


@pytest.mark.timeout(60)
async def test_a_failed_share_is_never_committed_by_a_later_push(stream_path: str, faults: DiskFaults) -> None:
    """With flush="sync", a later push to a partition commits its own record only, not a failed call's."""
    k0, k1 = key_for(0), key_for(1)
    async with adiskq.Producer(stream_path, partitions=2, flush="sync") as producer:
        faults.failing[P0_DATA] = errno.EFBIG
        with pytest.raises(adiskq.PartialWriteError, match="wrote 1 of 2"):
            await producer.push_many([adiskq.Record(b"a", key=k0), adiskq.Record(b"b", key=k1)])
        faults.failing.clear()
        await producer.push(b"later", key=k0)
        await producer.push(b"later", key=k1)
    assert values_of(stream_path, 0) == [b"later"]
    assert values_of(stream_path, 1) == [b"b", b"later"]


async def test_an_open_cancelled_as_the_stream_opens_releases_the_lock(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while its thread opens the stream, a Producer closes it: the next producer opens at once."""
    real_open = StreamWriter.open
    with anyio.CancelScope() as scope:

        def open_then_cancel(*args: Any, **kwargs: Any) -> StreamWriter:
            stream = real_open(*args, **kwargs)
            anyio.from_thread.run_sync(scope.cancel)  # lands at the checkpoint as the thread returns
            return stream

        monkeypatch.setattr(StreamWriter, "open", open_then_cancel)
        async with adiskq.Producer(stream_path):
            await anyio.sleep_forever()  # if the open returns, the cancellation lands here
    assert scope.cancelled_caught
    monkeypatch.undo()
    assert adiskq.stats(stream_path).owner is None
    async with adiskq.Producer(stream_path) as producer:
        assert await producer.push(b"x") == adiskq.Receipt(0, 0)


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_index_entries_a_reader_could_see_are_never_taken_back(
    stream_path: str, faults: DiskFaults, flush: str
) -> None:
    """ENOSPC part-way through an .index write keeps the whole entries written; only the rest fails."""
    async with adiskq.Producer(stream_path, flush=flush) as producer:  # type: ignore[arg-type]
        faults.failing[".index"] = errno.ENOSPC
        faults.short_write_then_fail = True  # half the entries reach .index, then the disk is full
        with pytest.raises(adiskq.PartialWriteError, match="wrote 5 of 10") as caught:
            await producer.push_many([b"a%d" % i for i in range(10)])
        # What readers could see while the write failed is still there, with the same content.
        seen = [adiskq.read(stream_path, 0, offset).value for offset in range(5)]
        faults.failing.clear()
        after = await producer.push(b"after")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.receipts == [adiskq.Receipt(0, i) for i in range(5)] + [None] * 5
    assert seen == [b"a%d" % i for i in range(5)]
    assert after == adiskq.Receipt(0, 5)
    assert values_of(stream_path, 0) == [*seen, b"after"]
    assert invoke("check", stream_path).exit_code == 0  # every file agrees with the others


async def test_pushes_of_a_batch_cut_by_a_failed_index_write_succeed_up_to_the_cut(
    stream_path: str, faults: DiskFaults
) -> None:
    """Concurrent sync pushes sharing a batch: those whose entry reached .index return, the rest raise."""
    async with adiskq.Producer(stream_path, flush="sync") as producer:
        await producer.push(b"first")
        faults.failing[".index"] = errno.ENOSPC
        faults.short_write_then_fail = True
        # The first push leads a batch of its own (it fails whole); the others gather behind it in
        # one batch, whose index write is the one cut short.
        faults.short_write_min_bytes = 2 * 24
        results: dict[int, adiskq.Receipt | OSError] = {}

        async def push(i: int) -> None:
            try:
                results[i] = await producer.push(b"%d" % i)
            except OSError as error:
                results[i] = error

        async with anyio.create_task_group() as group:
            for i in range(8):
                group.start_soon(push, i)
        faults.failing.clear()
    committed = {i: r for i, r in results.items() if isinstance(r, adiskq.Receipt)}
    assert committed  # the batch was cut in two, not failed whole
    assert len(committed) < len(results)
    assert values_of(stream_path, 0)[1:] == [b"%d" % i for i in sorted(committed, key=lambda i: committed[i].offset)]
    assert sorted(r.offset for r in committed.values()) == list(range(1, 1 + len(committed)))


@pytest.mark.parametrize("way", ["now", "awaited", "awaited, fsync", "records", "records now"])
async def test_a_run_cut_by_a_failed_index_write_reports_its_first_records(
    stream_path: str, faults: DiskFaults, way: str
) -> None:
    """The Kafka gateway's writes (``partition_writes``: a run encoded ahead, written at once or
    awaited, or records to encode) report a part-way ``.index`` failure as every write does:
    ``PartialWriteError`` with the receipts of the records kept, and nothing taken back."""
    from adiskq._async import partition_writes
    from adiskq.kafka._records import decode_produce, records_from_batches
    from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

    batch = encode_batch(
        base_offset=0,
        records=[KafkaRecord(i, 1_700_000_000_000 + i, b"k", b"v%d" % i, []) for i in range(10)],
        base_timestamp_ms=1_700_000_000_000,
    )
    records = records_from_batches(decode_produce(batch))
    if way.startswith("records"):
        records = [adiskq.Record(b"v%d" % i, key=b"k", timestamp=i) for i in range(10)]
    flush = "sync" if way == "awaited, fsync" else "async"
    async with adiskq.Producer(stream_path, flush=flush) as producer:  # type: ignore[arg-type]

        async def write() -> None:
            if way.endswith("now"):
                assert partition_writes.write_now(producer, 0, records) is not None
            else:
                await partition_writes.write(producer, 0, records)

        faults.failing[".index"] = errno.ENOSPC
        faults.short_write_then_fail = True  # half the entries reach .index, then the disk is full
        with pytest.raises(adiskq.PartialWriteError, match="wrote 5 of 10") as caught:
            await write()
        faults.failing.clear()
        after = await producer.push(b"after")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.receipts == [adiskq.Receipt(0, i) for i in range(5)] + [None] * 5
    assert after == adiskq.Receipt(0, 5)
    assert values_of(stream_path, 0) == [b"v%d" % i for i in range(5)] + [b"after"]
    assert invoke("check", stream_path).exit_code == 0
