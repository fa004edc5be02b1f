"""Rot inside committed data: recovery keeps every record, readers raise at the damage
and read on past it when asked to.

Local stream only: damage in a stream's files (README's capability table: local stream options)."""

from __future__ import annotations

import os

import pytest

import adiskq

pytestmark = pytest.mark.anyio


def _flip_last_byte_of(path: str, offset: int, count: int) -> None:
    """Flip the last byte of one record (records all have one size here)."""
    data = os.path.join(path, "parts", "000000", "00000000000000000000.data")
    record_size = os.path.getsize(data) // count
    with open(data, "r+b") as file:
        file.seek(offset * record_size + record_size - 1)
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 1]))


async def _rotten_stream(path: str, damaged_offset: int, count: int = 100) -> None:
    """A stream of ``count`` synced messages, one of them rotten, reopened once (after a crash-like
    loss of the clean-close record) so recovery has looked at it."""
    async with adiskq.Producer(path, flush="sync") as producer:
        receipts = [await producer.push(b"message %d" % i, key="k") for i in range(count)]
    assert receipts[-1].offset == count - 1
    os.unlink(os.path.join(path, "recovery.json"))
    _flip_last_byte_of(path, damaged_offset, count)
    async with adiskq.Producer(path) as producer:
        assert producer.recovery is not None
        assert any("kept every committed record" in r.action for r in producer.recovery.repairs)


async def test_a_consumer_raises_at_the_damaged_record_and_reads_on_past_it(stream_path: str) -> None:
    """Every acknowledged message survives rot in record 5: reading 5 raises, start=6 reads the rest."""
    await _rotten_stream(stream_path, 5)
    stats = adiskq.stats(stream_path)
    assert stats.partitions[0].next_offset == 100
    assert stats.last_recovery is not None
    assert any("kept every committed record" in r.action for r in stats.last_recovery.repairs)
    seen: list[int] = []

    async def read_all(consumer: adiskq.Consumer) -> None:
        async for message in consumer:
            seen.append(message.offset)  # noqa: PERF401 - what was delivered before the error counts

    async with adiskq.Consumer(stream_path, end="close") as consumer:
        with pytest.raises(adiskq.CorruptRecordError) as caught:
            await read_all(consumer)
    assert caught.value.offset == 5
    assert seen == [0, 1, 2, 3, 4]
    async with adiskq.Consumer(stream_path, start=caught.value.offset + 1, end="close") as consumer:
        rest = [message.value async for message in consumer]
    assert rest == [b"message %d" % i for i in range(6, 100)]
