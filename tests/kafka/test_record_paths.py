"""A Produce's two ways to stored records: straight from the request's bytes, or step by step.

The gateway decodes a request's batches straight to adiskq's stored records when it can
(``decode_produce``) and record by record through ``KafkaRecord`` and ``Record`` otherwise; both
must store the same messages, and every refusal must still come from the step by step path with its
message and the record's index.
"""

from __future__ import annotations

import time

import anyio
import pytest

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._sansio.entries import EncodedRun
from adiskq._sansio.run_entries import run_records, run_timestamps
from adiskq._sansio.values import Headers, Message
from adiskq.kafka._records import (
    batch_from_messages,
    decode_produce,
    decode_produce_reference,
    records_from_batches,
    write_records,
    write_records_now,
)
from adiskq.kafka.wire.batch import decode_batches
from adiskq.kafka.wire.codec import ATTRIBUTES_AT, CRC_AT, LOG_APPEND_TIME, KafkaRecord, crc32c, encode_batch
from adiskq.kafka.wire.mapping import NULLS_HEADER

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
    assert isinstance(found, EncodedRun)
    slow = step_by_step(data)
    assert found.record_count == len(slow) == 4
    stored = run_records(found.data, found.index_entries)
    for index in (0, 1, 3):  # record 2 has no timestamp: stamped with the time of each decode
        assert stored[index] == slow[index]
    timestamps = run_timestamps(found.time_entries)
    assert timestamps[1] == 1_700_000_000_001_000_000
    assert abs(timestamps[2] - time.time_ns()) < 60 * 10**9


@pytest.mark.parametrize(
    ("name", "stored"),
    [
        (NULLS_HEADER, NULLS_HEADER + "~"),
        (NULLS_HEADER + "~", NULLS_HEADER + "~~"),
        (NULLS_HEADER + "x", NULLS_HEADER + "x"),
    ],
)
def test_a_kafka_header_named_like_the_nulls_header_is_stored_escaped(name: str, stored: str) -> None:
    """A Kafka header called like the nulls header (or it and ``~`` marks) is stored with one ``~``
    more, by the step by step path, and served back as it came, beside a null key's own header."""
    data = request_of(RECORDS[:1], [RECORDS[0]._replace(key=None, headers=[(name, b"h"), ("z", b"")])])
    found = records_from_batches(decode_produce(data))
    assert isinstance(found, list)
    mine = found[-1]
    assert dict(mine.headers or {}) == {stored: b"h", "z": b"", NULLS_HEADER: b"key"}
    assert isinstance(mine.key, bytes)
    assert isinstance(mine.value, bytes)
    message = Message(0, 5, 0, mine.key, mine.value, dict(mine.headers or {}), None)
    served = decode_batches(batch_from_messages([message]))[0].records[0]
    assert (served.key, served.headers) == (None, [(name, b"h"), ("z", b"")])


def test_null_header_values_and_repeated_names_are_kept_as_headers_by_the_step_by_step_path() -> None:
    """Both decoders leave such a record to the step by step path, which keeps every header in
    order (a ``Headers``) and the other records as they are; a null key still adds its header."""
    kafka_headers = [("a", None), ("a", b"1"), ("b", b"2")]
    data = request_of(RECORDS[:2], [RECORDS[0], RECORDS[1]._replace(headers=kafka_headers)])
    for batches in (decode_produce(data), decode_produce_reference(data, time.time_ns())):
        records = records_from_batches(batches)
        assert isinstance(records, list)
        assert [record.headers for record in records] == [
            {"h": b"1", "a": b""},
            {NULLS_HEADER: b"key"},
            {"h": b"1", "a": b""},
            Headers([*kafka_headers, (NULLS_HEADER, b"key")]),
        ]
        assert type(records[3].headers) is Headers


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
    assert isinstance(found, EncodedRun)
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
    assert isinstance(found, EncodedRun)
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
    assert isinstance(found, EncodedRun)
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
    from adiskq._async import shares
    from adiskq._async.lane import INLINE_MAX_BYTES

    built: list[int] = []
    real_receipts = shares.receipts

    def counting_receipts(partition: int, first_offset: int, count: int) -> list[object]:
        built.append(count)
        return real_receipts(partition, first_offset, count)

    monkeypatch.setattr(shares, "receipts", counting_receipts)
    small = [KafkaRecord(i, 1_700_000_000_000, b"k%d" % i, b"v", []) for i in range(3)]
    large = [KafkaRecord(i, 1_700_000_000_000, b"k%d" % i, b"v" * 100, []) for i in range(3000)]
    found_small = records_from_batches(decode_produce(request_of(small)))
    found_large = records_from_batches(decode_produce(request_of(large)))
    assert isinstance(found_small, EncodedRun)
    assert isinstance(found_large, EncodedRun)
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


@pytest.mark.anyio
@pytest.mark.parametrize("run_first", [True, False], ids=["run first", "pushes first"])
async def test_a_run_shares_a_batch_with_pushes(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, run_first: bool
) -> None:
    """On a stream flushed with fsync, a Produce's records and a library ``push_many`` queued in the
    same turn (started in either order) share one batch, one fsync: the run is taken apart to join,
    and every message is stored in order with its own tag, key and timestamp (a tag filter finds the
    pushed ones alone)."""
    from adiskq._async import lane as lane_module

    taken_apart: list[int] = []
    real_run_records = lane_module.run_records

    def counting_run_records(data: bytes, index: bytes) -> list[bytes]:
        taken_apart.append(len(index) // 24)
        return real_run_records(data, index)

    monkeypatch.setattr(lane_module, "run_records", counting_run_records)
    found = records_from_batches(decode_produce(request_of([r for r in RECORDS if r.timestamp_ms >= 0][:2])))
    assert isinstance(found, EncodedRun)
    pushed = [adiskq.Record(b"p%d" % i, key=b"pk", timestamp=7 + i, tag="lib") for i in range(3)]
    path = f"{tmp_path}/stream"
    offsets: dict[str, int] = {}
    async with adiskq.Producer(path, flush="sync") as producer:

        async def produce() -> None:
            offsets["run"] = await write_records(producer, 0, found)

        async def push() -> None:
            offsets["push"] = (await producer.push_many(pushed))[0].offset

        async with anyio.create_task_group() as group:
            for job in (produce, push) if run_first else (push, produce):
                group.start_soon(job)
    assert taken_apart == [2]  # one batch: the run was taken apart to share it
    # asyncio runs the tasks in the order they were started; Trio in an order of its own
    ran_first = offsets["run"] == 0
    assert offsets == ({"run": 0, "push": 2} if ran_first else {"push": 0, "run": 3})
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        stored = {m.offset: (m.key, m.value, m.tag, m.timestamp_ns) async for m in consumer}
    run_messages = [
        (b"k0", b"v0", None, 1_700_000_000_000_000_000),
        (b"", b"v1", None, 1_700_000_000_001_000_000),
    ]
    push_messages = [(b"pk", b"p%d" % i, "lib", 7 + i) for i in range(3)]
    assert list(stored.values()) == (run_messages + push_messages if ran_first else push_messages + run_messages)
    async with adiskq.Consumer(path, 0, end="close", tags=["lib"]) as consumer:
        assert [m.value async for m in consumer] == [b"p0", b"p1", b"p2"]


@pytest.mark.anyio
@pytest.mark.parametrize("flush", ["async", "sync"])
async def test_a_run_alone_is_written_as_it_is(tmp_path: object, monkeypatch: pytest.MonkeyPatch, flush: str) -> None:
    """A Produce's records written off the loop's thread (over the inline limit) or with the fsync,
    in a batch of their own, are written as the run they came as: never taken apart into a bytes
    object a record, and stored whole, in order."""
    from adiskq._async import lane as lane_module
    from adiskq._async.lane import INLINE_MAX_BYTES

    def refuse(*args: object) -> object:
        raise AssertionError("a run alone was taken apart")

    monkeypatch.setattr(lane_module, "run_records", refuse)
    large = [KafkaRecord(i, 1_700_000_000_000, b"k%d" % i, b"v" * 100, []) for i in range(3000)]
    found = records_from_batches(decode_produce(request_of(large)))
    assert isinstance(found, EncodedRun)
    assert found.total > INLINE_MAX_BYTES
    path = f"{tmp_path}/stream"
    async with adiskq.Producer(path, flush=flush) as producer:  # type: ignore[arg-type]
        assert await write_records(producer, 0, found) == 0
        assert await write_records(producer, 0, found) == 3000
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        keys = [message.key async for message in consumer]
    assert keys == [b"k%d" % i for i in range(3000)] * 2


@pytest.mark.anyio
async def test_two_runs_share_a_batch(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Produce requests' records queued in the same turn on a stream flushed with fsync share
    one batch: the first run is taken apart for the second to join, and both are stored whole,
    each at the offsets it was answered with."""
    from adiskq._async import lane as lane_module

    taken_apart: list[int] = []
    real_run_records = lane_module.run_records

    def counting_run_records(data: bytes, index: bytes) -> list[bytes]:
        taken_apart.append(len(index) // 24)
        return real_run_records(data, index)

    monkeypatch.setattr(lane_module, "run_records", counting_run_records)
    first = records_from_batches(decode_produce(request_of([KafkaRecord(0, 5, b"a", b"1", [("h", b"x")])])))
    second = records_from_batches(
        decode_produce(request_of([KafkaRecord(i, 6, b"b", b"%d" % i, []) for i in range(3)]))
    )
    assert isinstance(first, EncodedRun)
    assert isinstance(second, EncodedRun)
    path = f"{tmp_path}/stream"
    offsets: dict[str, int] = {}
    async with adiskq.Producer(path, flush="sync") as producer:

        async def produce(name: str, records: EncodedRun) -> None:
            offsets[name] = await write_records(producer, 0, records)

        async with anyio.create_task_group() as group:
            group.start_soon(produce, "first", first)
            group.start_soon(produce, "second", second)
    assert offsets in ({"first": 0, "second": 1}, {"second": 0, "first": 3})
    assert sorted(taken_apart) == [1, 3]  # one batch: both runs taken apart into its records
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        stored = {m.offset: (m.key, m.value, dict(m.headers), m.timestamp_ns) async for m in consumer}
    assert stored[offsets["first"]] == (b"a", b"1", {"h": b"x"}, 5_000_000)
    assert [stored[offsets["second"] + i] for i in range(3)] == [(b"b", b"%d" % i, {}, 6_000_000) for i in range(3)]
    assert len(stored) == 4


@pytest.mark.anyio
async def test_a_push_waits_behind_a_run_queued_before_it(tmp_path: object) -> None:
    """A Produce's records too large to write on the loop's thread wait in a batch of their own; a
    ``push`` made while they wait is stored after them, never before (nor beside their write)."""
    from adiskq._async.lane import INLINE_MAX_BYTES

    large = [KafkaRecord(i, 1_700_000_000_000, b"k%d" % i, b"v" * 100, []) for i in range(3000)]
    found = records_from_batches(decode_produce(request_of(large)))
    assert isinstance(found, EncodedRun)
    assert found.total > INLINE_MAX_BYTES
    path = f"{tmp_path}/stream"
    offsets: dict[str, int] = {}
    async with adiskq.Producer(path) as producer:
        lane = producer._lanes[0]

        async def produce() -> None:
            offsets["run"] = await write_records(producer, 0, found)

        async with anyio.create_task_group() as group:
            group.start_soon(produce)
            with anyio.fail_after(10):
                while lane._open is None and lane._committing is None and "run" not in offsets:
                    await anyio.lowlevel.checkpoint()
            assert "run" not in offsets  # the run's batch is open or being written: the push comes meanwhile
            offsets["push"] = (await producer.push(b"after", key=b"p")).offset
    assert offsets == {"run": 0, "push": 3000}
    async with adiskq.Consumer(path, 0, end="close") as consumer:
        keys = [message.key async for message in consumer]
    assert keys == [b"k%d" % i for i in range(3000)] + [b"p"]
