"""adiskq.Producer: pushing, batching, flush policies, retention and closing, on asyncio and Trio.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
keys and values, headers, push_many's receipts and closing map). The others stay on a local stream,
each for a row of the table: placement by FNV-1 and random keys for keyless pushes (Kafka places by
murmur2 and sends a null key), nanosecond timestamps (Kafka keeps milliseconds), push_many written
whole per partition and max_message_bytes (Kafka acknowledges each record, under the client's
message.max.bytes), and the local stream options (locks, segments, fsync policy, vacuum, recovery)."""

from __future__ import annotations

import array
import asyncio
import datetime as dt
import os
import threading
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import pytest

import adiskq
from adiskq._async import shares
from adiskq._sansio.naming import partition_for_key
from adiskq._storage.segment_writer import SegmentWriter
from adiskq._storage.stream import StreamWriter

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


def read_all(path: str) -> dict[int, list[adiskq.Message]]:
    """Every message of every partition, through the synchronous read API."""
    stats = adiskq.stats(path)
    return {
        p.partition: [adiskq.read(path, p.partition, o) for o in range(p.oldest_offset, p.next_offset)]
        for p in stats.partitions
    }


async def read_at(place: str, partition: int, offset: int) -> adiskq.Message:
    """The message at ``offset`` of ``partition``, read by a Consumer (failing after 10 s)."""
    with anyio.fail_after(10):
        async with adiskq.Consumer(place, partition=partition, start=offset) as consumer:
            return await consumer.__anext__()


async def test_push_returns_a_receipt_that_reads_back(where: Where) -> None:
    """A push returns (partition, offset), and that message reads back with its key, value and headers."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, partitions=3) as producer:
        receipt = await producer.push(b"order 1", key="customer-00", headers={"type": b"created"})
    partition, offset = receipt
    # go-diskq's FNV-1 and Kafka's murmur2 (Java clients) both place customer-00 on partition 2 of 3.
    assert (partition, offset) == (2, 0)
    message = await read_at(stream_path, partition, offset)
    assert (message.key, message.value, dict(message.headers)) == (b"customer-00", b"order 1", {"type": b"created"})


async def test_offsets_are_contiguous_per_partition(where: Where) -> None:
    """Each partition numbers its messages 0, 1, 2, ... in push order."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, partitions=4) as producer:
        receipts = [await producer.push(b"%d" % i, key=f"k{i % 7}") for i in range(200)]
    by_partition: dict[int, list[int]] = {}
    for partition, offset in receipts:
        by_partition.setdefault(partition, []).append(offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))


async def test_keys_may_be_str_or_bytes_and_place_alike(where: Where) -> None:
    """A str key is its UTF-8 bytes: both place on the same partition and read back as bytes."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, partitions=16, partitioner="fnv1") as producer:
        as_str = await producer.push(b"a", key="héllo wörld")
        as_bytes = await producer.push(b"b", key="héllo wörld".encode())
    assert as_str.partition == as_bytes.partition == partition_for_key("héllo wörld".encode(), 16) == 8
    async with adiskq.Consumer(stream_path, partition=8, end="close") as consumer:
        with anyio.fail_after(10):
            keys = [m.key async for m in consumer]
    assert keys == ["héllo wörld".encode()] * 2


async def test_a_push_without_key_gets_a_random_key(stream_path: str) -> None:
    """Keyless messages get random keys, which spread them over the partitions."""
    async with adiskq.Producer(stream_path, partitions=4) as producer:
        receipts = [await producer.push(b"x") for _ in range(200)]
    assert {r.partition for r in receipts} == {0, 1, 2, 3}
    keys = {adiskq.read(stream_path, r.partition, r.offset).key for r in receipts}
    assert len(keys) == 200


async def test_timestamp_defaults_to_now_and_accepts_datetime_or_ns(stream_path: str) -> None:
    """A push without timestamp is stamped now; a datetime or an int (ns) is kept as given."""
    before = adiskq.Message(0, 0, 0, b"", b"").timestamp  # the epoch, as an aware datetime
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    async with adiskq.Producer(stream_path) as producer:
        now = await producer.push(b"now")
        given = await producer.push(b"dt", timestamp=when)
        raw = await producer.push(b"ns", timestamp=123)
    assert adiskq.read(stream_path, 0, now.offset).timestamp > before
    assert adiskq.read(stream_path, 0, given.offset).timestamp == when
    assert adiskq.read(stream_path, 0, raw.offset).timestamp_ns == 123


async def test_push_many_keeps_order_and_contiguity(where: Where) -> None:
    """push_many returns receipts in input order; each partition's share is contiguous and in order."""
    stream_path = where.new()
    records = [adiskq.Record(b"%d" % i, key=f"customer-{i % 5}") for i in range(100)]
    async with adiskq.Producer(stream_path, partitions=3) as producer:
        await producer.push(b"before", key="customer-0")
        receipts = await producer.push_many(records)
    for record, (partition, offset) in zip(records, receipts, strict=True):
        assert (await read_at(stream_path, partition, offset)).value == record.value
    for partition in {r.partition for r in receipts}:
        offsets = [r.offset for r in receipts if r.partition == partition]
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


async def test_push_many_on_one_partition_stores_every_field_and_rolls_between_batches(stream_path: str) -> None:
    """A one-partition stream's batches (written as one buffer when they go inline) keep every field,
    find each key through the key index and each tag through the tag index, and number on across
    segment rolls and batches that wait behind others in flight."""
    when = 1_700_000_000_123_456_789
    async with adiskq.Producer(stream_path, segment_size_bytes=32_768) as producer:

        async def batches(task: int) -> list[list[adiskq.Receipt]]:
            made = []
            for round_ in range(8):
                records = [
                    adiskq.Record(
                        b"%d-%d-%d" % (task, round_, i) + b"x" * 40,
                        key=f"key-{task}-{round_}-{i}",
                        timestamp=when + i if i % 3 == 0 else None,
                        tag="odd" if i % 2 else None,
                    )
                    for i in range(300 if round_ % 2 else 30)  # more than 256: turns of the loop between its steps
                ]
                made.append(await producer.push_many(records))
                await producer.push(b"single-%d-%d" % (task, round_), key=b"single")
            return made

        results: dict[int, list[list[adiskq.Receipt]]] = {}

        async def run(task: int) -> None:
            results[task] = await batches(task)

        async with anyio.create_task_group() as group:
            for task in range(3):
                group.start_soon(run, task)
    stored = read_all(stream_path)[0]
    assert adiskq.stats(stream_path).partitions[0].segments > 5
    assert [m.offset for m in stored] == list(range(len(stored)))
    for task, made in results.items():
        for round_, receipts in enumerate(made):
            offsets = [r.offset for r in receipts]
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))  # a batch's offsets are contiguous
            for i, offset in enumerate(offsets):
                message = stored[offset]
                assert message.value == b"%d-%d-%d" % (task, round_, i) + b"x" * 40
                assert message.key == f"key-{task}-{round_}-{i}".encode()
                assert message.tag == ("odd" if i % 2 else None)
                if i % 3 == 0:
                    assert message.timestamp_ns == when + i
    assert [m.offset for m in adiskq.find(stream_path, "key-2-7-299")] == [results[2][7][299].offset]
    assert len(adiskq.find(stream_path, b"single")) == 24
    async with adiskq.Consumer(stream_path, partition=0, start="oldest", end="close", tags=["odd"]) as consumer:
        tagged = [message.offset async for message in consumer]
    assert tagged == [m.offset for m in stored if m.tag == "odd"]
    assert len(tagged) == 3 * 4 * (15 + 150)


async def test_push_many_accepts_plain_bytes_and_empty_batches(where: Where) -> None:
    """Bare bytes are keyless records; an empty batch writes nothing."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, partitions=2) as producer:
        assert await producer.push_many([]) == []
        receipts = await producer.push_many([b"a", bytearray(b"b")])
    assert sorted([(await read_at(stream_path, p, o)).value for p, o in receipts]) == [b"a", b"b"]


async def test_push_many_with_a_bad_record_writes_nothing(stream_path: str) -> None:
    """Every record is checked first: one bad record fails the batch before anything is written."""
    async with adiskq.Producer(stream_path, partitions=2, max_message_bytes=1000) as producer:
        with pytest.raises(TypeError, match="str"):
            await producer.push_many([b"fine", "not bytes"])  # type: ignore[list-item]
        with pytest.raises(adiskq.MessageTooLargeError, match="max_message_bytes"):
            await producer.push_many([b"fine", b"x" * 2000])
    assert adiskq.stats(stream_path).message_count == 0


async def test_wrong_value_types_are_refused_clearly(where: Where) -> None:
    """A str value is refused with a hint to encode it; unknown key types too."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        with pytest.raises(TypeError, match="encode"):
            await producer.push("text")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="key"):
            await producer.push(b"x", key=42)  # type: ignore[arg-type]


async def test_a_header_value_of_wide_items_reads_back_whole(where: Where) -> None:
    """A header value given as a view of 4-byte items is stored as its 8 bytes by push and
    push_many: the header and the value after it read back as given."""
    stream_path = where.new()
    header = memoryview(array.array("I", [0x41414141, 0x42424242]))
    async with adiskq.Producer(stream_path) as producer:
        pushed = await producer.push(b"VALUE", key=b"k", headers={"h": header})  # type: ignore[dict-item]
        (batched,) = await producer.push_many([adiskq.Record(b"VALUE2", key=b"k", headers={"h": header})])  # type: ignore[dict-item]
    for receipt, value in ((pushed, b"VALUE"), (batched, b"VALUE2")):
        message = await read_at(stream_path, *receipt)
        assert (dict(message.headers), message.value) == ({"h": b"AAAABBBB"}, value)


async def test_a_lone_surrogate_in_a_key_or_header_name_is_an_invalid_argument(stream_path: str) -> None:
    """A key or header name UTF-8 cannot store is refused with InvalidArgumentError by push,
    push_many and find, as a tag is, and nothing is written."""
    async with adiskq.Producer(stream_path) as producer:
        for push in (
            lambda: producer.push(b"v", key="\ud800"),
            lambda: producer.push(b"v", headers={"\udcff": b"x"}),
            lambda: producer.push_many([adiskq.Record(b"v", key="ok"), adiskq.Record(b"v", key="\ud800")]),
            lambda: producer.push_many([adiskq.Record(b"v", headers={"\ud800": b"x"})]),
        ):
            with pytest.raises(adiskq.InvalidArgumentError, match="lone surrogate"):
                await push()
    assert adiskq.stats(stream_path).message_count == 0
    with pytest.raises(adiskq.InvalidArgumentError, match=r"key .* holds a lone surrogate"):
        adiskq.find(stream_path, "\udcff")


async def test_empty_values_and_keys_read_back(where: Where) -> None:
    """An empty payload (go-diskq cannot read one back) round-trips."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        receipt = await producer.push(b"", key=b"")
    message = await read_at(stream_path, *receipt)
    assert (message.value, message.key) == (b"", b"")


async def test_closed_producer_raises_closed_error(where: Where) -> None:
    """After close, push and push_many raise ClosedError; closing again is harmless."""
    stream_path = where.new()
    producer = adiskq.Producer(stream_path)
    with pytest.raises(adiskq.ClosedError, match="not open"):
        await producer.push(b"x")
    async with producer:
        await producer.push(b"x")
    await producer.aclose()
    with pytest.raises(adiskq.ClosedError, match="closed"):
        await producer.push(b"y")
    with pytest.raises(adiskq.ClosedError):
        await producer.push_many([b"y"])
    with pytest.raises(adiskq.ClosedError, match="opened once"):
        await producer.__aenter__()


async def test_close_releases_the_lock_for_the_next_producer(stream_path: str) -> None:
    """A second producer is refused while the first is open and welcome once it closed."""
    async with adiskq.Producer(stream_path) as first:
        await first.push(b"1")
        with pytest.raises(adiskq.StreamLockedError, match=f"pid {os.getpid()}"):
            async with adiskq.Producer(stream_path):
                pass
    async with adiskq.Producer(stream_path) as second:
        receipt = await second.push(b"2")
    assert receipt.offset == 1


async def test_lock_timeout_waits_for_the_holder(stream_path: str) -> None:
    """With lock_timeout, a second producer waits until the first closes, then opens."""
    first = adiskq.Producer(stream_path)
    await first.__aenter__()
    opened = anyio.Event()

    async def second() -> None:
        async with adiskq.Producer(stream_path, lock_timeout=30) as producer:
            opened.set()
            await producer.push(b"second")

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await first.push(b"first")
        assert not opened.is_set()
        await first.aclose()
        with anyio.fail_after(10):
            await opened.wait()
    assert [m.value for m in read_all(stream_path)[0]] == [b"first", b"second"]


def test_bad_settings_fail_at_construction(stream_path: str) -> None:
    """Wrong settings raise ValueError before any file is touched."""
    with pytest.raises(ValueError, match="flush"):
        adiskq.Producer(stream_path, flush="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="segment_size_bytes"):
        adiskq.Producer(stream_path, segment_size_bytes=10)
    with pytest.raises(ValueError, match="partitions"):
        adiskq.Producer(stream_path, partitions=0)
    with pytest.raises(ValueError, match="flush_interval"):
        adiskq.Producer(stream_path, flush_interval=0)
    assert not os.path.exists(stream_path)


async def test_fewer_partitions_than_stored_is_refused(stream_path: str) -> None:
    """A stream never loses partitions: asking for fewer raises SettingsMismatchError naming both counts."""
    async with adiskq.Producer(stream_path, partitions=3):
        pass
    with pytest.raises(adiskq.SettingsMismatchError, match="has 3 partitions and partitions=2 asks for fewer"):
        async with adiskq.Producer(stream_path, partitions=2):
            pass
    async with adiskq.Producer(stream_path) as producer:
        assert producer.partitions == 3


async def test_large_messages_are_refused_with_the_limit_named(stream_path: str) -> None:
    """A message over max_message_bytes raises MessageTooLargeError, not MemoryError."""
    async with adiskq.Producer(stream_path, max_message_bytes=4096) as producer:
        with pytest.raises(adiskq.MessageTooLargeError, match="4096"):
            await producer.push(b"x" * 5000)
        await producer.push(b"x" * 4000)


async def test_segments_roll_at_segment_size(stream_path: str) -> None:
    """A partition rolls to a new segment once .data reaches segment_size_bytes, keeping every offset."""
    async with adiskq.Producer(stream_path, segment_size_bytes=4096) as producer:
        for i in range(300):
            await producer.push(b"%05d" % i + b"x" * 95, key="k")
    stats = adiskq.stats(stream_path).partitions[0]
    assert stats.segments > 5
    assert [m.value[:5] for m in read_all(stream_path)[0]] == [b"%05d" % i for i in range(300)]


def index_file_size(writer: SegmentWriter) -> int:
    """Bytes in the writer's .index file now."""
    return os.path.getsize(os.path.join(writer.directory, f"{writer.base_offset:020d}.index"))


async def test_sync_flush_fsyncs_data_before_the_index_is_written(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With flush="sync", when .data is fdatasync'ed its index entry does not exist yet."""
    observed: list[tuple[int, int]] = []
    real_sync = SegmentWriter.sync

    def spying_sync(self: SegmentWriter, *, data_only: bool = False) -> None:
        index_size = index_file_size(self)
        observed.append((self.next_offset, index_size))
        real_sync(self, data_only=data_only)

    monkeypatch.setattr(SegmentWriter, "sync", spying_sync)
    async with adiskq.Producer(stream_path, flush="sync") as producer:
        receipt = await producer.push(b"durable")
    assert observed[0] == (receipt.offset, 0)


async def test_sync_flush_never_fsyncs_on_the_event_loop_thread(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every fsync/fdatasync runs in a worker thread, in both flush modes."""
    loop_thread = threading.get_ident()
    threads: list[int] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def spy(fd: int, real: object = real) -> None:
            threads.append(threading.get_ident())
            real(fd)  # type: ignore[operator]

        monkeypatch.setattr(os, name, spy)
    for flush in ("sync", "async"):
        async with adiskq.Producer(os.path.join(stream_path, flush), flush=flush, segment_size_bytes=2048) as producer:  # type: ignore[arg-type]
            for i in range(100):
                await producer.push(b"x" * 50, key=b"%d" % i)
            await producer.flush()
            await producer.vacuum(adiskq.Retention(max_bytes=4096))
    assert threads
    assert loop_thread not in threads


async def test_concurrent_sync_pushes_share_fsyncs(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Group commit: 64 concurrent sync pushes to one partition need far fewer than 64 fsyncs."""
    syncs = 0
    real_sync = SegmentWriter.sync

    def counting_sync(self: SegmentWriter, *, data_only: bool = False) -> None:
        nonlocal syncs
        syncs += 1
        real_sync(self, data_only=data_only)

    monkeypatch.setattr(SegmentWriter, "sync", counting_sync)
    async with adiskq.Producer(stream_path, flush="sync") as producer:
        async with anyio.create_task_group() as group:
            for i in range(64):
                group.start_soon(producer.push, b"%d" % i)
        pushed_syncs = syncs
    assert pushed_syncs < 32
    assert adiskq.stats(stream_path).message_count == 64


async def test_sync_pushers_released_by_one_fsync_share_the_next(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """32 tasks pushing in a loop with flush="sync": the pushes one fsync releases all join the next
    batch, so each round of pushes costs one fsync (on Trio too, which runs a turn's tasks in a random
    order: a leader that closed its batch before the others ran would fsync alone every other round)."""
    rounds, tasks = 20, 32
    synced_up_to: list[int] = []  # the next offset at each fsync
    real_sync = SegmentWriter.sync

    def counting_sync(self: SegmentWriter, *, data_only: bool = False) -> None:
        synced_up_to.append(self.next_offset)
        real_sync(self, data_only=data_only)

    monkeypatch.setattr(SegmentWriter, "sync", counting_sync)

    async def pusher(producer: adiskq.Producer, task: int) -> None:
        for i in range(rounds):
            await producer.push(b"%d-%d" % (task, i))

    async with adiskq.Producer(stream_path, flush="sync") as producer:
        async with anyio.create_task_group() as group:
            for task in range(tasks):
                group.start_soon(pusher, producer, task)
        pushed_syncs = len(synced_up_to)
    assert pushed_syncs <= rounds + 1, synced_up_to
    assert adiskq.stats(stream_path).message_count == rounds * tasks


async def test_async_flush_fsyncs_within_the_interval(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With flush="async", the background flusher fsyncs a dirty partition on its own."""
    synced = threading.Event()
    real_sync = SegmentWriter.sync

    def noting_sync(self: SegmentWriter, *, data_only: bool = False) -> None:
        real_sync(self, data_only=data_only)
        synced.set()

    monkeypatch.setattr(SegmentWriter, "sync", noting_sync)
    async with adiskq.Producer(stream_path, flush_interval=0.05) as producer:
        await producer.push(b"x")
        assert await anyio.to_thread.run_sync(synced.wait, 10)


async def test_vacuum_deletes_old_sealed_segments_never_the_active_one(stream_path: str) -> None:
    """vacuum() applies max_bytes to sealed segments, reports them, and keeps the active segment."""
    async with adiskq.Producer(stream_path, segment_size_bytes=2048) as producer:
        for i in range(200):
            await producer.push(b"%04d" % i + b"x" * 60, key="k")
        report = await producer.vacuum(adiskq.Retention(max_bytes=1))
        last = await producer.push(b"after", key="k")
    assert report.removed_segments
    assert report.removed_messages > 0
    stats = adiskq.stats(stream_path).partitions[0]
    assert stats.segments == 1
    assert stats.oldest_offset == report.removed_messages
    assert adiskq.read(stream_path, 0, last.offset).value == b"after"
    with pytest.raises(adiskq.OffsetOutOfRangeError):
        adiskq.read(stream_path, 0, 0)


async def test_periodic_vacuum_applies_the_stream_retention(stream_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a retention, the producer vacuums every vacuum_interval without being asked."""
    vacuumed = threading.Event()
    real_vacuum = StreamWriter.vacuum

    def noting_vacuum(self: StreamWriter, *args: Any, **kwargs: Any) -> adiskq.VacuumReport:
        report = real_vacuum(self, *args, **kwargs)
        if report:
            vacuumed.set()
        return report

    monkeypatch.setattr(StreamWriter, "vacuum", noting_vacuum)
    retention = adiskq.Retention(max_age=dt.timedelta(seconds=1))
    async with adiskq.Producer(
        stream_path, segment_size_bytes=1024, retention=retention, vacuum_interval=0.05
    ) as producer:
        old = time_ns_ago(dt.timedelta(hours=1))
        for _ in range(50):
            await producer.push(b"x" * 60, key="k", timestamp=old)
        await producer.push(b"fresh", key="k")
        assert await anyio.to_thread.run_sync(vacuumed.wait, 10)
    assert adiskq.stats(stream_path).partitions[0].oldest_offset > 0


def time_ns_ago(delta: dt.timedelta) -> int:
    """UTC nanoseconds of a moment ``delta`` ago."""
    return int((dt.datetime.now(dt.UTC) - delta).timestamp() * 1e9)


async def test_close_flushes_pending_pushes_of_other_tasks(stream_path: str) -> None:
    """Leaving `async with` waits for queued pushes: all of them are written."""
    receipts: list[adiskq.Receipt] = []
    async with adiskq.Producer(stream_path, flush="sync") as producer:

        async def push(i: int) -> None:
            receipts.append(await producer.push(b"%d" % i))

        async with anyio.create_task_group() as group:
            for i in range(50):
                group.start_soon(push, i)
    assert len(receipts) == 50
    assert adiskq.stats(stream_path).message_count == 50


async def test_cancelling_the_producer_scope_closes_it_cleanly(stream_path: str) -> None:
    """A cancelled scope around the producer still writes, syncs and unlocks."""
    with anyio.CancelScope() as scope:
        async with adiskq.Producer(stream_path) as producer:
            await producer.push(b"kept")
            scope.cancel()
            await anyio.sleep_forever()
    assert adiskq.stats(stream_path).owner is None
    async with adiskq.Producer(stream_path) as producer:
        assert (await producer.push(b"next")).offset == 1


async def test_cancelled_pushes_are_all_or_nothing(stream_path: str) -> None:
    """Cancelling pushes midway: every written message had its receipt returned, and vice versa."""
    for flush in ("sync", "async"):
        path = os.path.join(stream_path, flush)
        returned: set[bytes] = set()
        async with adiskq.Producer(path, partitions=2, flush=flush) as producer:  # type: ignore[arg-type]

            async def pusher(round_: int, task: int, returned: set[bytes] = returned) -> None:
                for i in range(10_000):
                    value = b"%d-%d-%d" % (round_, task, i)
                    await producer.push(value, key=value)
                    returned.add(value)

            for round_, delay in enumerate((0, 0.001, 0.005)):
                with anyio.move_on_after(delay):
                    async with anyio.create_task_group() as group:
                        for task in range(8):
                            group.start_soon(pusher, round_, task)
        written = [m.value for messages in read_all(path).values() for m in messages]
        assert len(written) == len(set(written))
        assert set(written) == returned


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Trio has no cancellation but its scopes'
async def test_a_push_loop_cancelled_by_asyncio_itself_wrote_exactly_the_pushes_that_returned(stream_path: str) -> None:
    """asyncio's own ``task.cancel()`` reaches a task pushing in a tight loop where the loop gives
    other tasks their turn (every 32 pushes): the push it lands in raises and was not written, so the
    stream holds exactly the messages whose push returned a receipt."""
    returned: list[adiskq.Receipt] = []
    async with adiskq.Producer(stream_path, partitions=1) as producer:

        async def pusher(round_: int) -> None:
            for i in range(10_000):
                receipt = await producer.push(b"%d-%d" % (round_, i), key=b"k")
                returned.append(receipt)

        for round_ in range(10):
            task = asyncio.ensure_future(pusher(round_))
            for _ in range(1 + round_ % 3):
                await asyncio.sleep(0)  # the pusher runs until it gives the loop a turn
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    written = read_all(stream_path)[0]
    assert [(m.partition, m.offset) for m in written] == [tuple(receipt) for receipt in returned]


class HeldFsync:
    """``SegmentWriter.sync`` held, once ``hold()`` is called, until ``let_go`` is set; ``started`` is
    set when one is held (waited for from a thread: the sync runs in a worker thread)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = threading.Event()
        self.let_go = threading.Event()
        self._monkeypatch = monkeypatch

    def hold(self) -> None:
        real_sync = SegmentWriter.sync

        def sync(writer: SegmentWriter, *, data_only: bool = False) -> None:
            self.started.set()
            self.let_go.wait(10)
            real_sync(writer, data_only=data_only)

        self._monkeypatch.setattr(SegmentWriter, "sync", sync)


async def push_in_scope(
    producer: adiskq.Producer, value: bytes, scope: anyio.CancelScope, outcome: dict[str, object]
) -> None:
    """Push inside ``scope``, then reach a checkpoint: ``outcome`` gets the receipt, and whether the
    scope's cancellation came (at that checkpoint, after the push returned)."""
    with scope:
        outcome["receipt"] = await producer.push(value)
        await anyio.lowlevel.checkpoint()
        outcome["ran on"] = True  # pragma: no cover - the checkpoint above must raise
    outcome["cancel delivered"] = scope.cancelled_caught


async def test_a_push_cancelled_while_its_batch_commits_is_written_and_returns_its_receipt(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync push waiting for the batch another push leads cannot be taken back by a cancellation:
    it returns its receipt, and the cancellation comes at its caller's next checkpoint."""
    fsync = HeldFsync(monkeypatch)
    outcome: dict[str, object] = {}
    async with adiskq.Producer(stream_path, flush="sync") as producer:
        fsync.hold()
        async with anyio.create_task_group() as group:
            group.start_soon(producer.push, b"first")  # leads batch 1, held in its fsync
            await anyio.to_thread.run_sync(fsync.started.wait, 10)
            group.start_soon(producer.push, b"leader")  # leads batch 2, waiting for batch 1
            await anyio.wait_all_tasks_blocked()
            scope = anyio.CancelScope()
            group.start_soon(push_in_scope, producer, b"follower", scope, outcome)  # follows batch 2
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            fsync.let_go.set()
    assert outcome == {"receipt": adiskq.Receipt(0, 2), "cancel delivered": True}
    assert [m.value for m in read_all(stream_path)[0]] == [b"first", b"leader", b"follower"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Trio has no cancellation but its scopes'
async def test_a_leader_cancelled_by_asyncio_itself_still_commits_the_batch_its_followers_hold_receipts_for(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncio's own ``task.cancel()`` (``asyncio.timeout``, ``wait_for``, a dropped request) passes
    anyio's shield. Landing on a batch's leader in its fdatasync, it used to cut the batch back while
    the push following it returned a receipt for a message never written (offset 0 of an empty
    stream). Now the batch is committed; the leader raises the cancellation; the follower's receipt
    reads back its own message."""
    fsync = HeldFsync(monkeypatch)
    async with adiskq.Producer(stream_path, partitions=1, flush="sync") as producer:
        fsync.hold()
        leader = asyncio.ensure_future(producer.push(b"leader"))
        follower = asyncio.ensure_future(producer.push(b"follower"))
        await anyio.to_thread.run_sync(fsync.started.wait, 10)
        await anyio.wait_all_tasks_blocked()  # the follower waits for the leader's batch
        leader.cancel()
        await anyio.wait_all_tasks_blocked()
        fsync.let_go.set()
        receipt = await follower
        with pytest.raises(asyncio.CancelledError):
            await leader
    assert adiskq.read(stream_path, receipt.partition, receipt.offset).value == b"follower"
    assert [m.value for m in read_all(stream_path)[0]] == [b"leader", b"follower"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Trio has no cancellation but its scopes'
async def test_a_leader_cancelled_by_asyncio_while_the_batch_before_commits_leaves_no_push_waiting_forever(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first push of a second batch used to lead it from its own task: cancelled by asyncio while
    it waited for the first batch's fdatasync, it left its batch open with no leader, and every push
    that joined it (and every later one) waited forever. Now the batch is led by a task nothing
    cancels: the cancelled push raises once its batch is finished, and the others go on."""
    fsync = HeldFsync(monkeypatch)
    async with adiskq.Producer(stream_path, partitions=1, flush="sync") as producer:
        fsync.hold()
        first = asyncio.ensure_future(producer.push(b"first"))
        await anyio.to_thread.run_sync(fsync.started.wait, 10)
        cancelled = asyncio.ensure_future(producer.push(b"cancelled"))  # opens the second batch
        follower = asyncio.ensure_future(producer.push(b"follower"))
        await anyio.wait_all_tasks_blocked()
        cancelled.cancel()
        await anyio.wait_all_tasks_blocked()
        assert not cancelled.done()  # its batch is not finished: the cancellation waits for it
        fsync.let_go.set()
        with anyio.fail_after(10):
            assert await first == adiskq.Receipt(0, 0)
            assert await follower == adiskq.Receipt(0, 2)
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert await producer.push(b"later") == adiskq.Receipt(0, 3)
    assert [m.value for m in read_all(stream_path)[0]] == [b"first", b"cancelled", b"follower", b"later"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # asyncio's own cancellation (Trio has none)
@pytest.mark.parametrize("how", ["task.cancel()", "asyncio.timeout"])
async def test_a_push_cancelled_by_asyncio_while_its_batch_commits_raises_once_the_batch_is_finished(
    stream_path: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """asyncio's own cancellation cannot be delivered later, as an anyio scope's is: the push raises
    it, but only once its batch is finished (so its message is written, as the docs of push say),
    and the batch's other pushes are not disturbed."""
    fsync = HeldFsync(monkeypatch)
    timeouts: list[asyncio.Timeout] = []

    async def push_with_a_timeout() -> adiskq.Receipt:
        async with asyncio.timeout(None) as timeout:
            timeouts.append(timeout)
            return await producer.push(b"cancelled")

    async with adiskq.Producer(stream_path, partitions=1, flush="sync") as producer:
        fsync.hold()
        leader = asyncio.ensure_future(producer.push(b"leader"))
        cancelled = asyncio.ensure_future(push_with_a_timeout())
        follower = asyncio.ensure_future(producer.push(b"follower"))
        await anyio.to_thread.run_sync(fsync.started.wait, 10)
        await anyio.wait_all_tasks_blocked()
        if how == "task.cancel()":
            cancelled.cancel()
        else:
            timeouts[0].reschedule(asyncio.get_running_loop().time())
        await anyio.wait_all_tasks_blocked()
        assert not cancelled.done()
        fsync.let_go.set()
        with anyio.fail_after(10):
            assert [await leader, await follower] == [adiskq.Receipt(0, 0), adiskq.Receipt(0, 2)]
            with pytest.raises(asyncio.CancelledError if how == "task.cancel()" else TimeoutError):
                await cancelled
    assert [m.value for m in read_all(stream_path)[0]] == [b"leader", b"cancelled", b"follower"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # asyncio's own cancellation beside an anyio scope's
async def test_an_anyio_scope_and_asyncio_cancelling_a_waiting_push_together_both_arrive(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A push that waits for its batch while its anyio scope is cancelled returns its receipt and
    leaves the cancellation to its next checkpoint (anyio delivers it again). asyncio's own
    cancellation landing in the same turn is folded into the same ``CancelledError``: the push still
    returns, and asyncio's cancellation is not lost: it ends the ``asyncio.timeout`` around it."""
    fsync = HeldFsync(monkeypatch)
    outcome: dict[str, object] = {}

    async def pusher(scope: anyio.CancelScope) -> None:
        try:
            async with asyncio.timeout(None) as timeout:
                outcome["timeout"] = timeout
                await push_in_scope(producer, b"cancelled", scope, outcome)
        except TimeoutError:
            outcome["timed out"] = True

    async with adiskq.Producer(stream_path, partitions=1, flush="sync") as producer:
        fsync.hold()
        async with anyio.create_task_group() as group:
            group.start_soon(producer.push, b"leader")
            await anyio.to_thread.run_sync(fsync.started.wait, 10)
            scope = anyio.CancelScope()
            group.start_soon(pusher, scope)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
            timeout = outcome["timeout"]
            assert isinstance(timeout, asyncio.Timeout)
            timeout.reschedule(asyncio.get_running_loop().time())
            await anyio.wait_all_tasks_blocked()
            fsync.let_go.set()
    assert outcome["receipt"] == adiskq.Receipt(0, 1)
    assert outcome.get("timed out") is True
    assert "ran on" not in outcome
    assert [m.value for m in read_all(stream_path)[0]] == [b"leader", b"cancelled"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a batch's own task exists on asyncio only
async def test_a_batch_whose_leading_task_is_cancelled_before_it_commits_fails_its_pushes_whole(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's task is cancelled only by the loop's own shutdown (nothing else holds it). Then its
    pushes get ``ClosedError``, not receipts for messages never written, and the lane goes on."""
    fsync = HeldFsync(monkeypatch)
    async with adiskq.Producer(stream_path, partitions=1, flush="sync") as producer:
        fsync.hold()
        first = asyncio.ensure_future(producer.push(b"first"))
        await anyio.to_thread.run_sync(fsync.started.wait, 10)
        stranded = asyncio.ensure_future(producer.push(b"stranded"))
        await anyio.wait_all_tasks_blocked()
        lane = producer._lanes[0]
        assert lane._open is not None
        assert lane._open.leader is not None
        lane._open.leader.cancel()  # what asyncio.run does to the tasks left at its end
        with anyio.fail_after(10):
            with pytest.raises(adiskq.ClosedError, match="interrupted"):
                await stranded
            fsync.let_go.set()
            assert await first == adiskq.Receipt(0, 0)
            assert await producer.push(b"later") == adiskq.Receipt(0, 1)
    assert [m.value for m in read_all(stream_path)[0]] == [b"first", b"later"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a batch's own task exists on asyncio only
async def test_a_batch_whose_leading_task_is_cancelled_during_its_fdatasync_is_still_committed(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while its fdatasync runs (the loop's shutdown), a batch's task waits for the
    fdatasync and finishes the commit: its pushes get receipts that read back, never a failure for
    messages that were written, nor a batch cut back under a running fdatasync."""
    fsync = HeldFsync(monkeypatch)
    async with adiskq.Producer(stream_path, partitions=1, flush="sync") as producer:
        fsync.hold()
        pushes = [asyncio.ensure_future(producer.push(b"%d" % i)) for i in range(3)]
        await anyio.to_thread.run_sync(fsync.started.wait, 10)
        lane = producer._lanes[0]
        committing = lane._committing
        assert committing is not None
        assert committing.leader is not None
        committing.leader.cancel()  # what asyncio.run does to the tasks left at its end
        await anyio.wait_all_tasks_blocked()
        assert not any(push.done() for push in pushes)  # the fdatasync is still held
        fsync.let_go.set()
        with anyio.fail_after(10):
            assert [await push for push in pushes] == [adiskq.Receipt(0, i) for i in range(3)]
    assert [m.value for m in read_all(stream_path)[0]] == [b"0", b"1", b"2"]


async def test_a_push_cancelled_while_it_leads_its_batchs_fdatasync_is_written_and_returns_its_receipt(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader of a sync batch waits for its fdatasync in a worker thread (EventLoop.run_in_thread):
    cancelled meanwhile, it still commits the batch, returns its receipt, and takes the cancellation at
    its caller's next checkpoint; the push queued behind it is committed next."""
    fsync = HeldFsync(monkeypatch)
    outcome: dict[str, object] = {}
    receipts: list[adiskq.Receipt] = []
    async with adiskq.Producer(stream_path, flush="sync") as producer:
        fsync.hold()

        async def follower() -> None:
            receipts.append(await producer.push(b"follower"))

        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(push_in_scope, producer, b"leader", scope, outcome)
            await anyio.to_thread.run_sync(fsync.started.wait, 10)
            group.start_soon(follower)  # the next batch, which waits for this one
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            fsync.let_go.set()
    assert outcome == {"receipt": adiskq.Receipt(0, 0), "cancel delivered": True}
    assert receipts == [adiskq.Receipt(0, 1)]
    assert [m.value for m in read_all(stream_path)[0]] == [b"leader", b"follower"]


LARGE_BATCH = [adiskq.Record(b"%d" % i, key=f"k{i}") for i in range(1000)]  # over every partition of 4


async def test_a_large_push_many_lets_other_tasks_run_while_it_works(stream_path: str) -> None:
    """A push_many of 1,000 over 4 partitions is cut into steps: another task runs many times meanwhile."""
    turns = 0
    async with adiskq.Producer(stream_path, partitions=4) as producer, anyio.create_task_group() as group:

        async def ticker() -> None:
            nonlocal turns
            while True:
                turns += 1
                await anyio.lowlevel.checkpoint()

        group.start_soon(ticker)
        await anyio.lowlevel.checkpoint()  # the ticker is running
        before = turns
        receipts = await producer.push_many(LARGE_BATCH)
        during = turns - before
        group.cancel_scope.cancel()
    assert len(receipts) == 1000
    # Before each encoding chunk (256 records for the pure-Python core, 4,096 for the compiled one,
    # which takes as long), between the partitions' shares, and around the receipts.
    chunk = shares._COMPILED_ENCODE_CHUNK if adiskq.compiled else shares._ENCODE_CHUNK
    assert during >= -(-1000 // chunk) + 4


async def test_closing_waits_for_a_large_push_many_between_its_partitions(
    stream_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing while a large push_many has written some partitions' shares: it writes the rest first."""
    seen_partial = False
    receipts: list[adiskq.Receipt] = []
    counts_at_close: list[int] = []
    real_close = StreamWriter.close

    def close(self: StreamWriter) -> None:
        counts_at_close.append(adiskq.stats(stream_path).message_count)
        real_close(self)

    monkeypatch.setattr(StreamWriter, "close", close)
    async with adiskq.Producer(stream_path, partitions=4) as producer, anyio.create_task_group() as group:

        async def push() -> None:
            receipts.extend(await producer.push_many(LARGE_BATCH))

        group.start_soon(push)
        with anyio.fail_after(10):
            while (count := adiskq.stats(stream_path).message_count) == 0:
                await anyio.lowlevel.checkpoint()
        seen_partial = count < 1000
        await producer.aclose()
    assert seen_partial  # the close really came between two partitions' shares
    assert counts_at_close == [1000]  # the files were closed only after the whole batch was written
    assert len(receipts) == 1000
    written = {m.value for messages in read_all(stream_path).values() for m in messages}
    assert written == {record.value for record in LARGE_BATCH}


async def test_a_cancelled_large_push_many_is_all_or_nothing(stream_path: str) -> None:
    """Cancelled at any step, a large push_many wrote all its records (and returned) or none."""
    outcomes: set[bool] = set()
    expected = 0
    async with adiskq.Producer(stream_path, partitions=4) as producer:
        for turns in range(16):
            returned: list[adiskq.Receipt] = []

            async def push(returned: list[adiskq.Receipt] = returned) -> None:
                returned.extend(await producer.push_many(LARGE_BATCH))

            async with anyio.create_task_group() as group:
                group.start_soon(push)
                for _ in range(turns):
                    await anyio.lowlevel.checkpoint()
                group.cancel_scope.cancel()
            outcomes.add(bool(returned))
            expected += len(returned)
            assert adiskq.stats(stream_path).message_count == expected
    assert outcomes == {True, False}  # both sides of the cut were reached


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # asyncio's own task.cancel()
async def test_a_large_push_many_cancelled_by_asyncio_is_all_or_nothing_and_the_cancellation_arrives(
    stream_path: str,
) -> None:
    """``task.cancel()`` at any of a large push_many's turns: it wrote all its records and returned
    them, the ``CancelledError`` following at the caller's next checkpoint, or it wrote none."""
    outcomes: set[str] = set()
    expected = 0
    async with adiskq.Producer(stream_path, partitions=1) as producer:
        for turns in range(8):
            returned: list[adiskq.Receipt] = []
            cancelled_after_return: list[bool] = []

            async def push(
                returned: list[adiskq.Receipt] = returned, after: list[bool] = cancelled_after_return
            ) -> None:
                returned.extend(await producer.push_many(LARGE_BATCH))
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    after.append(True)
                    raise

            task = asyncio.ensure_future(push())
            for _ in range(turns):
                await asyncio.sleep(0)
            if not task.cancel():  # past every turn of the call and the one after it
                await task
                expected += len(returned)
                break
            with anyio.fail_after(10):
                with pytest.raises(asyncio.CancelledError):
                    await task
            if returned:
                assert cancelled_after_return == [True]  # delivered at its next checkpoint, not lost
                outcomes.add("written")
            else:
                outcomes.add("not written")
            expected += len(returned)
            assert adiskq.stats(stream_path).message_count == expected
    assert outcomes == {"written", "not written"}  # both sides of the cut were reached


async def test_recovery_report_is_available_after_open(stream_path: str) -> None:
    """A producer exposes what opening repaired (nothing, for a fresh stream)."""
    async with adiskq.Producer(stream_path) as producer:
        assert producer.recovery is not None
        assert not producer.recovery


async def test_closed_says_whether_the_producer_was_closed(where: Where) -> None:
    """``closed`` is False before and while the producer is open, True from its close on."""
    producer = adiskq.Producer(where.new())
    assert producer.closed is False
    async with producer:
        assert producer.closed is False
    assert producer.closed is True
    await producer.aclose()
    assert producer.closed is True
