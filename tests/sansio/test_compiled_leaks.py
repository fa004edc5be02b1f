"""The compiled core leaks no references: a million records encoded and decoded (and a hundred
thousand errors raised, and tens of thousands of appends through each of append_record's paths)
leave the process's memory where it was."""

from __future__ import annotations

import contextlib
import errno
import os

import pytest
from support.memory import growth_over

from adiskq._sansio import codec as reference
from adiskq._sansio import core
from adiskq._sansio.native import NATIVE
from adiskq._sansio.run_entries import place_entries
from adiskq._sansio.values import Headers, Record
from adiskq._storage.append import append_one, append_record

ROUND = 100_000
VALUE = bytes(range(100))


def one_round() -> None:
    keys = [b"order-%06d" % i for i in range(ROUND)]
    stamps = list(range(ROUND))
    records = core.encode_batch([VALUE] * ROUND, keys, stamps)
    buffer = b"".join(records)
    messages = core.decode_messages(buffer, 0, 0, ROUND)
    assert len(messages) == ROUND
    scanned = core.scan_columns(buffer)
    assert len(scanned.positions) == ROUND
    encoded = core.encode_records([Record(VALUE, key="k", headers={"h": b"x"})] * 1000, 7, 4)
    assert encoded is None or len(encoded[0]) == 1000
    # a batch left to the Python path after 999 records were encoded (the last one's timestamp is out of range)
    stamped = [Record(VALUE, key=b"k", timestamp=5)] * 999 + [Record(VALUE, timestamp=2**70)]
    assert core.encode_records(stamped, 7, 4) is None
    core.receipts(0, 0, 1000)
    packs()
    # Records from the free list and past it (2,048 are kept), and Records that may cycle
    built = [Record(VALUE, key=b"%d" % i, tag="t" if i % 2 else None) for i in range(10_000)]
    built += [Record(VALUE, headers={"h": b"x"}) for _ in range(100)]
    del built
    for offset in range(1000):
        core.receipt(1, offset)
    if core.raw_encode_push is not None:  # one push's encoding: plain, keyless, tagged, refused, too large
        for key in keys[:200]:
            core.raw_encode_push(VALUE, key, 7, None, None, 4, 2**20)
            core.raw_encode_push(VALUE, None, 7, {"h": b"x"}, "t", 1, 2**20)
            core.raw_encode_push(bytearray(VALUE), key, 7, None, None, 4, 2**20)
            core.raw_encode_push(VALUE, key, 7, None, None, 4, 10)
    with_headers = core.encode_batch([VALUE] * 1000, keys[:1000], stamps[:1000], [{"type": b"x", "n": b"1"}] * 1000)
    assert len(core.decode_messages(b"".join(with_headers), 0, 0, 1000)) == 1000
    # Kafka's headers (a null value, a repeated name) after 500 decoded Messages: the compiled
    # decoder drops what it made and answers NotImplemented, for the reference to decode.
    plain = b"".join(with_headers[:500])
    for kafka_headers in (Headers([("h", None)]), Headers([("h", b"1"), ("h", b"2")])):
        tail = plain + reference.encode_record(VALUE, b"k", 1, kafka_headers)
        for _ in range(20):
            assert NATIVE is not None
            assert NATIVE.decode_messages(tail, 0, 0, 501, 2**30) is NotImplemented
    damaged = buffer[:5000] + b"\xff" + buffer[5001:6000]
    for _ in range(1000):
        with contextlib.suppress(reference.CorruptRecordError):
            core.decode_messages(damaged, 0, 0, 50)
        core.next_valid_record(damaged, 1)
    appends()


def packs() -> None:
    """pack_records a hundred times (taken, refused at its last record, over the size given) and
    place_entries of what it packed (placed, and refused at its last tag entry, after the placed
    columns were made): a leaked buffer a call would be megabytes a round."""
    batch = [Record(VALUE, key="k", tag="t"), Record(VALUE)] * 50
    refused = [Record(VALUE, key=b"k", timestamp=5)] * 99 + [Record(VALUE, timestamp=2**70)]
    for _ in range(100):
        packed = core.pack_records(batch, 7, 2**30)
        if packed is not None:
            columns = packed.data, packed.index_entries, packed.time_entries
            assert place_entries(*columns, packed.tag_entries, 10, 20)
            with pytest.raises(ValueError, match="tag entry"):  # the last record, untagged, given a tag
                place_entries(*columns, packed.tag_entries[:-4] + b"\x01\0\0\0", 10, 20)
        assert core.pack_records(refused, 7, 2**30) is None
        assert core.pack_records(batch, 7, 5_000) is None


def appends() -> None:
    """append_record and append_one by write(2), through a replaced write, and failing at the entry."""
    calls = 0

    def failing_entry(fd: int, data: bytes) -> int:
        nonlocal calls
        calls += 1
        if calls % 2 == 0:
            raise OSError(errno.ENOSPC, "full")
        return os.write(fd, data)

    sink = os.open(os.devnull, os.O_WRONLY)
    try:
        for offset in range(3000):
            append_record(os.write, sink, sink, VALUE, offset, offset * 100)
            append_record(lambda fd, data: os.write(fd, data), sink, sink, VALUE, offset, offset * 100)
            with contextlib.suppress(OSError):
                append_record(failing_entry, sink, sink, VALUE, offset, offset * 100)
            times: list[bytes] = []
            tags: list[bytes] = []
            append_one(os.write, sink, sink, VALUE, offset, 0, offset, times, b"tags", tags, 7, [])
            with contextlib.suppress(OSError):
                append_one(failing_entry, sink, sink, VALUE, offset, 0, offset, times, b"tags", tags, 7, None)
            with contextlib.suppress(OverflowError):
                append_one(os.write, sink, sink, VALUE, offset, 0, offset, times, b"tags", tags, -1, None)
    finally:
        os.close(sink)


def test_a_million_records_leave_memory_flat() -> None:
    grown = growth_over(one_round, rounds=10)
    # A leaked bytes object or int per record would be 30 MiB or more; allocator noise is far less.
    assert grown < 4 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB over a million records"
