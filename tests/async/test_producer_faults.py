"""Producer faults: a failed write fails its pushes, leaves the stream consistent, and later pushes succeed.

Local stream only: faults of a stream's files; a Kafka push that fails is the client's answer
(README's capability table: push_many, PartialWriteError)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from support.cli import invoke
from support.faults import DiskFaults

import adiskq
from adiskq._sansio.entries import BUFFERED_ENTRIES

pytestmark = pytest.mark.anyio


def data_sizes(path: str) -> dict[str, int]:
    """Size of every segment file of the stream."""
    sizes = {}
    for folder, _, files in os.walk(os.path.join(path, "parts")):
        for name in files:
            sizes[os.path.join(folder, name)] = os.path.getsize(os.path.join(folder, name))
    return sizes


def values(path: str) -> list[bytes]:
    """Every value of partition 0, in order."""
    partition = adiskq.stats(path).partitions[0]
    return [adiskq.read(path, 0, offset).value for offset in range(partition.oldest_offset, partition.next_offset)]


@pytest.mark.parametrize("suffix", [".data", ".index"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
async def test_a_failed_write_fails_the_push_and_changes_nothing(
    stream_path: str, faults: DiskFaults, suffix: str, code: int
) -> None:
    """ENOSPC/EIO on any file fails the push with that OSError; the files are as before it."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"before")
        before = data_sizes(stream_path)
        faults.failing[suffix] = code
        with pytest.raises(OSError, match=os.strerror(code)) as caught:
            await producer.push(b"lost")
        assert caught.value.errno == code
        assert data_sizes(stream_path) == before
        faults.failing.clear()
        after = await producer.push(b"after")
    assert after.offset == 1
    assert values(stream_path) == [b"before", b"after"]


@pytest.mark.parametrize("suffix", [".timeindex", ".keyindex"])
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
async def test_a_failed_write_of_buffered_entries_fails_the_push_that_fills_the_buffer(
    stream_path: str, faults: DiskFaults, suffix: str, code: int
) -> None:
    """Single pushes write time and key index entries 128 at a time: a fault there fails that push only."""
    async with adiskq.Producer(stream_path) as producer:
        for i in range(BUFFERED_ENTRIES - 1):
            await producer.push(b"%d" % i)
        before = data_sizes(stream_path)
        faults.failing[suffix] = code
        with pytest.raises(OSError, match=os.strerror(code)):
            await producer.push(b"lost")
        assert data_sizes(stream_path) == before
        faults.failing.clear()
        after = await producer.push(b"after")
    assert after.offset == BUFFERED_ENTRIES - 1
    assert values(stream_path) == [b"%d" % i for i in range(BUFFERED_ENTRIES - 1)] + [b"after"]
    assert invoke("check", stream_path).exit_code == 0  # the files are whole and agree


async def test_a_short_write_then_a_full_disk_is_cut_back(stream_path: str, faults: DiskFaults) -> None:
    """Half a record written before the disk filled up is removed again."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"before")
        before = data_sizes(stream_path)
        faults.failing[".data"] = errno.ENOSPC
        faults.short_write_then_fail = True
        with pytest.raises(OSError, match="No space"):
            await producer.push(b"x" * 100)
        assert data_sizes(stream_path) == before
        faults.failing.clear()
        await producer.push(b"after")
    assert values(stream_path) == [b"before", b"after"]


async def test_a_full_disks_advice_is_in_the_errors_message(stream_path: str, faults: DiskFaults) -> None:
    """str(error) of an ENOSPC push carries what to do, so log.error("%s", error) keeps it."""
    async with adiskq.Producer(stream_path) as producer:
        faults.failing[".data"] = errno.ENOSPC
        with pytest.raises(OSError, match="No space") as caught:
            await producer.push(b"x" * 100)
    assert caught.value.errno == errno.ENOSPC
    assert "No space left on device; adiskq: the disk is full" in str(caught.value)
    assert "free space" in f"{caught.value}"


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_a_failed_batch_fails_every_push_in_it(stream_path: str, faults: DiskFaults, flush: str) -> None:
    """push_many on a full disk fails whole; pushes afterwards get the next offsets."""
    async with adiskq.Producer(stream_path, flush=flush) as producer:  # type: ignore[arg-type]
        await producer.push(b"before")
        faults.failing[".data"] = errno.ENOSPC
        with pytest.raises(OSError, match="No space"):
            await producer.push_many([b"a", b"b", b"c"])
        faults.failing.clear()
        receipts = await producer.push_many([b"d", b"e"])
    assert [r.offset for r in receipts] == [1, 2]
    assert values(stream_path) == [b"before", b"d", b"e"]


async def test_a_failed_fdatasync_fails_sync_pushes_and_writes_nothing(stream_path: str, faults: DiskFaults) -> None:
    """With flush="sync", an fdatasync error fails the batch and its data is cut back."""
    async with adiskq.Producer(stream_path, flush="sync") as producer:
        await producer.push(b"before")
        before = data_sizes(stream_path)
        faults.failing_syncs[".data"] = errno.EIO

        failures: list[OSError] = []

        async def push(value: bytes) -> None:
            try:
                await producer.push(value)
            except OSError as error:
                failures.append(error)

        async with anyio.create_task_group() as group:
            for i in range(10):
                group.start_soon(push, b"%d" % i)
        assert len(failures) == 10
        assert data_sizes(stream_path) == before
        faults.failing_syncs.clear()
        after = await producer.push(b"after")
    assert after.offset == 1


async def test_the_stream_reopens_clean_after_faults(stream_path: str, faults: DiskFaults) -> None:
    """After failed writes, reopening finds nothing to repair and every acknowledged push."""
    acknowledged: list[bytes] = []
    async with adiskq.Producer(stream_path) as producer:
        for i in range(30):
            faults.failing = {".index": errno.ENOSPC} if i % 3 == 1 else {}
            try:
                await producer.push(b"%d" % i)
            except OSError:
                continue
            acknowledged.append(b"%d" % i)
        faults.failing = {}
    async with adiskq.Producer(stream_path) as producer:
        assert producer.recovery is not None
        assert not producer.recovery.repairs
    assert values(stream_path) == acknowledged


def make_failing(call: Callable[..., Any]) -> Callable[..., Any]:
    """A stand-in for `call` that always fails with EIO."""

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EIO, "injected I/O error")

    return failing


async def test_a_failed_background_fsync_is_raised_by_flush(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """flush() reports an fsync failure instead of pretending the data is durable."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push(b"x")
        monkeypatch.setattr(os, "fdatasync", make_failing(os.fdatasync))
        with pytest.raises(OSError, match="injected"):
            await producer.flush()
        monkeypatch.undo()
        await producer.flush()
