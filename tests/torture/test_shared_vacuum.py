"""Shared writers and vacuum together: three shared producers in their own processes push (4 KiB
segments, so they roll all the time) while another shared writer vacuums the old segments every few
milliseconds and now and then appends (its view of the partition is then stale: the others rolled
past the segment it last wrote, and its own vacuum deleted it). No append may fail for it (it
follows the roll), and every acknowledged message still kept reads back at its offset.
"""

from __future__ import annotations

import os

import pytest
from support import shared as shared_support

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._sansio.values import Retention
from adiskq._storage.stream import StreamWriter


def vacuum_beside_writers(stream_path: str, count: int) -> None:
    StreamWriter.open(stream_path, partitions=3, segment_size_bytes=4096, shared=True).close()
    writers = [
        shared_support.Writer(stream_path, flush, backend, name, count)
        for name, flush, backend in (("a", "async", "asyncio"), ("b", "sync", "trio"), ("c", "async", "trio"))
    ]
    vacuums = 0
    own: list[str] = []  # the vacuuming writer's own appends, as receipt lines
    try:
        vacuumer = StreamWriter.open(stream_path, shared=True)
        try:
            while any(writer.child.poll() is None for writer in writers):
                vacuumer.vacuum(Retention(max_bytes=8192))
                vacuums += 1
                if vacuums % 10 == 0:
                    value = b"vacuumer-%d" % vacuums
                    with vacuumer.appending([0]):
                        offset = vacuumer.partitions[0].append([encode_record(value, b"v", 1)], [1])
                    own.append(f"0 {offset} {value.decode()}\n")
        finally:
            vacuumer.close()
        lines = own + [line for writer in writers for line in writer.finish()]
        codes = [writer.child.returncode for writer in writers]
    finally:
        for writer in writers:
            if writer.child.poll() is None:
                writer.kill()
    assert codes == [0, 0, 0], f"a writer failed beside the vacuum: exit codes {codes}"
    assert vacuums > 0
    acknowledged = shared_support.receipts(lines)
    assert len(acknowledged) == len(own) + 3 * 3 * count + 3 * 3 * 2 * (count // 7)  # every push returned
    stats = {p.partition: p for p in adiskq.stats(stream_path).partitions}
    assert any(p.oldest_offset > 0 for p in stats.values())  # the vacuum removed segments
    for (partition, offset), value in acknowledged.items():
        if offset >= stats[partition].oldest_offset:
            assert adiskq.read(stream_path, partition, offset).value == value


def test_shared_writers_beside_a_vacuum_never_fail(tmp_path: object) -> None:
    """Three shared writer processes pushing while another vacuums (a short run)."""
    vacuum_beside_writers(os.path.join(os.fspath(tmp_path), "stream"), 300)


@pytest.mark.slow
def test_shared_writers_beside_a_vacuum_never_fail_long(tmp_path: object) -> None:
    """The same, long."""
    vacuum_beside_writers(os.path.join(os.fspath(tmp_path), "stream"), 5000)
