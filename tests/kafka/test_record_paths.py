"""A Produce's two ways to stored records: straight from the request's bytes, or step by step.

The gateway decodes a request's batches straight to adiskq's stored records when it can
(``decode_produce``) and record by record through ``KafkaRecord`` and ``Record`` otherwise; both
must store the same messages, and every refusal must still come from the step by step path with its
message and the record's index.
"""

from __future__ import annotations

import time

import pytest

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._sansio.kafka_batch import decode_batches
from adiskq._sansio.kafka_codec import ATTRIBUTES_AT, CRC_AT, LOG_APPEND_TIME, KafkaRecord, crc32c, encode_batch
from adiskq._sansio.kafka_mapping import NULLS_HEADER, StoredRecords
from adiskq.kafka._records import (
    RecordRefusedError,
    decode_produce,
    records_from_batches,
    write_records,
    write_records_now,
)

RECORDS = [
    KafkaRecord(0, 1_700_000_000_000, b"k0", b"v0", [("h", b"1"), ("a", b"")]),
    KafkaRecord(1, 1_700_000_000_001, None, b"v1", []),
    KafkaRecord(2, -1, b"k2", None, [("é", b"x")]),
    KafkaRecord(3, 1_700_000_000_003, b"", b"", []),
]


def request_of(*batches: list[KafkaRecord], compression: int = 0, attributes: int = 0) -> bytes:
    """A partition's records field: one batch per list, the last one compressed with ``compression``."""
    parts = []
    for number, records in enumerate(batches):
        last = number == len(batches) - 1
        encoded = bytearray(
            encode_batch(base_offset=0, records=records, base_timestamp_ms=0, compression=compression if last else 0)
        )
        parts.append(bytes(encoded))
    data = b"".join(parts)
    if attributes:  # a LogAppendTime batch: the attribute set and the CRC made right again
        raw = bytearray(data)
        raw[ATTRIBUTES_AT + 1] |= attributes
        raw[CRC_AT : CRC_AT + 4] = crc32c(bytes(raw[ATTRIBUTES_AT:])).to_bytes(4, "big")
        data = bytes(raw)
    return data


def step_by_step(data: bytes) -> list[bytes]:
    """The stored records the step by step path makes of ``data`` (timestamps of now left out)."""
    return [
        encode_record(record.value, record.key, record.timestamp, record.headers)  # type: ignore[arg-type]
        for record in records_from_batches(decode_batches(data))  # type: ignore[union-attr]
    ]


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_plain_batches_are_stored_as_the_step_by_step_path_stores_them(compression: int) -> None:
    """Two batches (the last compressed or not): the same stored bytes, a record's timestamp of now aside."""
    data = request_of(
        RECORDS[:2], [r._replace(offset_delta=i) for i, r in enumerate(RECORDS[2:])], compression=compression
    )
    found = records_from_batches(decode_produce(data))
    assert isinstance(found, StoredRecords)
    slow = step_by_step(data)
    assert len(found) == len(slow) == 4
    for index in (0, 1, 3):  # record 2 has no timestamp: stamped with the time of each decode
        assert found.records[index] == slow[index]
    assert found.timestamps[1] == 1_700_000_000_001_000_000
    assert abs(found.timestamps[2] - time.time_ns()) < 60 * 10**9


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([("a", b"1"), ("a", b"2")], "header 'a' is repeated"),
        ([("a", None)], "header 'a' has a null value"),
        ([(NULLS_HEADER, b"key")], f"header {NULLS_HEADER!r} is reserved"),
    ],
)
def test_a_refused_record_is_named_by_the_step_by_step_path(
    headers: list[tuple[str, bytes | None]], message: str
) -> None:
    """The request goes the step by step way, which refuses the record with its message and index."""
    data = request_of(RECORDS[:2], [RECORDS[0], RECORDS[1]._replace(headers=headers)])
    with pytest.raises(RecordRefusedError, match=message) as refused:
        records_from_batches(decode_produce(data))
    assert refused.value.index == 3


def test_a_log_append_time_batch_is_stamped_with_the_time_of_the_write() -> None:
    """A batch whose timestamps the broker sets takes the step by step path: every record stamped now."""
    data = request_of(RECORDS[:2], attributes=LOG_APPEND_TIME)
    found = records_from_batches(decode_produce(data))
    assert isinstance(found, list)
    assert all(abs(record.timestamp - time.time_ns()) < 60 * 10**9 for record in found)  # type: ignore[operator]


@pytest.mark.anyio
async def test_a_stream_that_compresses_stores_the_same_messages(tmp_path: object) -> None:
    """Records decoded straight to stored bytes, written to a compressed stream, read back as sent."""
    path = f"{tmp_path}/compressed"
    found = records_from_batches(decode_produce(request_of([r for r in RECORDS if r.timestamp_ms >= 0][:2])))
    assert isinstance(found, StoredRecords)
    async with adiskq.Producer(path, compression="zstd") as producer:
        assert await write_records(producer, 0, found) == 0  # the first record's offset
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        messages = [message async for message in consumer]
    assert [(m.key, m.value, dict(m.headers), m.timestamp_ns) for m in messages] == [
        (b"k0", b"v0", {"h": b"1", "a": b""}, 1_700_000_000_000_000_000),
        (b"", b"v1", {NULLS_HEADER: b"key"}, 1_700_000_000_001_000_000),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("compression", [None, "zstd"])
async def test_records_decoded_straight_are_written_at_once(tmp_path: object, compression: str | None) -> None:
    """The gateway's write without awaiting takes records decoded straight to stored bytes, on a
    plain stream and on one that compresses, and stores the messages as sent."""
    path = f"{tmp_path}/stream"
    found = records_from_batches(decode_produce(request_of([r for r in RECORDS if r.timestamp_ms >= 0][:2])))
    assert isinstance(found, StoredRecords)
    async with adiskq.Producer(path, compression=compression) as producer:
        await write_records(producer, 0, found)  # the first write takes the stream's lock
        assert write_records_now(producer, 0, found) == 2  # the first record's offset
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        messages = [message async for message in consumer]
    assert [(m.key, m.value, dict(m.headers), m.timestamp_ns) for m in messages[2:]] == [
        (b"k0", b"v0", {"h": b"1", "a": b""}, 1_700_000_000_000_000_000),
        (b"", b"v1", {NULLS_HEADER: b"key"}, 1_700_000_000_001_000_000),
    ]


@pytest.mark.anyio
async def test_records_decoded_straight_wait_for_the_fsync(tmp_path: object) -> None:
    """On a stream flushed with fsync the write without awaiting declines (None) and writes nothing:
    the gateway then writes them in the connection's task, answered after the fsync."""
    path = f"{tmp_path}/stream"
    found = records_from_batches(decode_produce(request_of([r for r in RECORDS if r.timestamp_ms >= 0][:2])))
    assert isinstance(found, StoredRecords)
    async with adiskq.Producer(path, flush="sync") as producer:
        await write_records(producer, 0, found)
        assert write_records_now(producer, 0, found) is None
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        assert [message.offset async for message in consumer] == [0, 1]


@pytest.mark.anyio
async def test_records_decoded_straight_are_written_without_a_receipt_a_record(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway answers a Produce with its first offset alone: writing its records, inline, at once
    or as a batch too large for the loop's thread, builds no receipt a record (which cost more than
    the write itself), and the messages are stored in order all the same."""
    from adiskq._async import producer as producer_module
    from adiskq._async.lane import INLINE_MAX_BYTES

    built: list[int] = []
    real_receipts = producer_module.receipts

    def counting_receipts(partition: int, first_offset: int, count: int) -> list[object]:
        built.append(count)
        return real_receipts(partition, first_offset, count)

    monkeypatch.setattr(producer_module, "receipts", counting_receipts)
    small = [KafkaRecord(i, 1_700_000_000_000, b"k%d" % i, b"v", []) for i in range(3)]
    large = [KafkaRecord(i, 1_700_000_000_000, b"k%d" % i, b"v" * 100, []) for i in range(3000)]
    found_small = records_from_batches(decode_produce(request_of(small)))
    found_large = records_from_batches(decode_produce(request_of(large)))
    assert isinstance(found_small, StoredRecords)
    assert isinstance(found_large, StoredRecords)
    assert found_large.total > INLINE_MAX_BYTES  # written from a worker thread, as a batch
    path = f"{tmp_path}/stream"
    async with adiskq.Producer(path) as producer:
        assert await write_records(producer, 0, found_small) == 0
        assert write_records_now(producer, 0, found_small) == 3
        assert await write_records(producer, 0, found_large) == 6
        assert write_records_now(producer, 0, found_small) == 3006
    assert built == []
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        keys = [message.key async for message in consumer]
    assert keys == [b"k0", b"k1", b"k2"] * 2 + [b"k%d" % i for i in range(3000)] + [b"k0", b"k1", b"k2"]
