"""A full disk, for real: a small tmpfs mounted for the test (as root), with fault injection elsewhere.

The producers here turn off ``refuse_writes_above`` to meet ENOSPC itself (test_disk_usage_level.py
tests the refusal that comes first by default). Pushes fail with ENOSPC and a note saying what to
do, nothing acknowledged is lost, the stream reopens on the full disk, vacuum frees space and
writing resumes.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import anyio
import pytest
from support.small_disk import fill, mounted_small_disk, use_up_space

import adiskq
from adiskq._storage.offsets import load_offsets, save_offsets

pytestmark = pytest.mark.anyio


@pytest.fixture
def small_disk(tmp_path: object) -> Iterator[str]:
    """A 384 KiB file system of its own: a tmpfs mounted as root (CI runs as root)."""
    with mounted_small_disk(str(tmp_path)) as mount_point:
        yield mount_point


def values(path: str) -> list[bytes]:
    """Every retained value of partition 0, in order."""
    partition = adiskq.stats(path).partitions[0]
    return [adiskq.read(path, 0, offset).value for offset in range(partition.oldest_offset, partition.next_offset)]


@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_a_full_disk_fails_pushes_clearly_and_loses_nothing(small_disk: str, flush: str) -> None:
    """ENOSPC fails the push with what to do in its message; every acknowledged push reads back."""
    path = os.path.join(small_disk, "stream")
    acknowledged: list[bytes] = []
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, flush=flush, refuse_writes_above=None) as producer:  # type: ignore[arg-type]
        error = await fill(producer, acknowledged)
        assert error.errno == errno.ENOSPC
        assert "disk is full" in str(error)
        # The failed push was cut back. The same push again fails the same way when it was the
        # record or its index entry that found no room; when it was the time, tag and key index
        # entries that single pushes buffer (written 128 at a time), the retry writes only its
        # record and index entry and may fit in the slack of those files' last pages. Either way it
        # is all or nothing: an acknowledged retry reads back, a failed one left no trace.
        retry = b"%06d" % len(acknowledged) + b"x" * 250
        failed_with = None
        try:
            await producer.push(retry, key="k")
        except OSError as again:
            failed_with = again.errno
        else:
            acknowledged.append(retry)
        assert failed_with in (None, errno.ENOSPC)
    assert values(path) == acknowledged


async def test_the_stream_reopens_on_a_full_disk_and_vacuum_frees_space(small_disk: str) -> None:
    """On a full disk a producer still opens and vacuums; pushes then succeed again."""
    path = os.path.join(small_disk, "stream")
    acknowledged: list[bytes] = []
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, refuse_writes_above=None) as producer:
        await fill(producer, acknowledged)
    async with adiskq.Producer(path, refuse_writes_above=None) as producer:
        assert values(path) == acknowledged
        report = await producer.vacuum(adiskq.Retention(max_bytes=64 * 1024))
        assert report.removed_bytes > 0
        receipt = await producer.push(b"after vacuum", key="k")
    assert adiskq.read(path, 0, receipt.offset).value == b"after vacuum"
    assert values(path)[-1] == b"after vacuum"
    kept = values(path)[:-1]
    assert kept == acknowledged[len(acknowledged) - len(kept) :]


async def test_group_offsets_survive_a_failed_commit_on_a_full_disk(small_disk: str) -> None:
    """A commit that cannot be written fails with ENOSPC; the last committed offsets stay intact."""
    path = os.path.join(small_disk, "stream")
    acknowledged: list[bytes] = []
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, refuse_writes_above=None) as producer:
        await producer.push(b"first", key="k")
        save_offsets(path, "billing", {0: 1})
        await fill(producer, acknowledged)
    use_up_space(small_disk)
    with pytest.raises(OSError, match="No space") as caught:
        save_offsets(path, "billing", {0: 999_999_999_999_999_999 * 10**20})
    assert caught.value.errno == errno.ENOSPC
    assert load_offsets(path, "billing") == {0: 1}
    leftovers = [name for name in os.listdir(os.path.join(path, "groups", "billing")) if name.endswith(".tmp")]
    assert leftovers == []


async def test_consumers_keep_reading_a_stream_on_a_full_disk(small_disk: str) -> None:
    """A full disk does not stop readers: the sync API reads everything acknowledged."""
    path = os.path.join(small_disk, "stream")
    acknowledged: list[bytes] = []
    async with adiskq.Producer(path, segment_size_bytes=16 * 1024, refuse_writes_above=None) as producer:
        await fill(producer, acknowledged)
        assert await anyio.to_thread.run_sync(values, path) == acknowledged
