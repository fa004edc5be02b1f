"""Consumer: where it starts and ends, how it reads, how it closes, and what it does with bad input.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
``Consumer``'s partition, start, end and batches map); the others use a local stream's files."""

from __future__ import annotations

import datetime as dt
import os
import pathlib
from typing import TYPE_CHECKING

import anyio
import pytest
from support.backends import delete_oldest, fill_for_retention
from support.cli import append, flip_byte
from support.consumer import Writer

import adiskq
from adiskq._sansio.naming import PARTS_DIR, partition_dir_name

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


async def write(producer_or_place: adiskq.Producer | str, messages: list[bytes]) -> None:
    """Push ``messages`` in order with an open producer, or one opened for them."""
    if isinstance(producer_or_place, adiskq.Producer):
        await producer_or_place.push_many(messages)
        return
    async with adiskq.Producer(producer_or_place) as producer:
        await producer.push_many(messages)


async def take(consumer: adiskq.Consumer, count: int) -> list[adiskq.Message]:
    """The next ``count`` messages (failing after 10 s)."""
    messages: list[adiskq.Message] = []
    with anyio.fail_after(10):
        async for message in consumer:
            messages.append(message)
            if len(messages) == count:
                break
    return messages


async def drain(consumer: adiskq.Consumer) -> list[adiskq.Message]:
    """Every message up to the consumer's end."""
    with anyio.fail_after(10):
        return [message async for message in consumer]


def values(count: int, first: int = 0) -> list[bytes]:
    return [b"m%d" % i for i in range(first, first + count)]


def data_file(stream_path: str, partition: int = 0, base: int = 0) -> str:
    return os.path.join(stream_path, PARTS_DIR, partition_dir_name(partition), f"{base:020d}.data")


# -- what a message carries ------------------------------------------------------------------------


async def test_messages_carry_what_was_written(stream_path: str) -> None:
    """A message read back has its partition, offset, timestamp, key, value and headers."""
    with Writer(stream_path) as writer:
        writer.append([b"hello"], key=b"k", timestamp_ns=1_700_000_000_000_000_000, headers={"type": b"x"})
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        (message,) = await drain(consumer)
    assert message == adiskq.Message(0, 0, 1_700_000_000_000_000_000, b"k", b"hello", {"type": b"x"})
    assert message.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)


async def test_reads_a_producers_messages_in_order(where: Where) -> None:
    """What a Producer pushes, a consumer reads back in offset order."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        for value in values(50):
            await producer.push(value)
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        messages = await drain(consumer)
    assert [(m.offset, m.value) for m in messages] == list(enumerate(values(50)))


# -- start ------------------------------------------------------------------------------------------


async def test_start_oldest_reads_from_the_first_message(where: Where) -> None:
    """start="oldest" begins at the oldest retained offset."""
    stream_path = where.new()
    await write(stream_path, values(5))
    async with adiskq.Consumer(stream_path, start="oldest", end="close") as consumer:
        assert [m.offset for m in await drain(consumer)] == [0, 1, 2, 3, 4]


async def test_start_newest_reads_only_what_comes_after_opening(where: Where) -> None:
    """start="newest" skips what was there when the consumer opened."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await write(producer, values(3))
        async with adiskq.Consumer(stream_path, start="newest") as consumer:
            await write(producer, values(2, first=3))
            assert [m.value for m in await take(consumer, 2)] == [b"m3", b"m4"]


async def test_start_active_oldest_begins_at_the_active_segment(stream_path: str) -> None:
    """start="active-oldest" begins at the first offset of the newest segment."""
    with Writer(stream_path, segment_size_bytes=1024) as writer:
        for i in range(100):
            writer.append([b"x" * 60 + b"%d" % i])
        active_base = writer.stream.partitions[0].active.base_offset
    assert active_base > 0
    async with adiskq.Consumer(stream_path, start="active-oldest", end="close") as consumer:
        messages = await drain(consumer)
    assert [m.offset for m in messages] == list(range(active_base, 100))


async def test_start_offset_begins_there(where: Where) -> None:
    """An int start begins at that offset."""
    stream_path = where.new()
    await write(stream_path, values(10))
    async with adiskq.Consumer(stream_path, start=7, end="close") as consumer:
        assert [m.offset for m in await drain(consumer)] == [7, 8, 9]


async def test_start_datetime_begins_at_the_first_message_at_or_after_it(where: Where) -> None:
    """A datetime start begins at the first message stamped at or after it."""
    stream_path = where.new()
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    async with adiskq.Producer(stream_path) as producer:
        for minute in range(5):
            await producer.push(b"m%d" % minute, timestamp=base + dt.timedelta(minutes=minute))
    start = base + dt.timedelta(minutes=2, seconds=30)
    async with adiskq.Consumer(stream_path, start=start, end="close") as consumer:
        assert [m.offset for m in await drain(consumer)] == [3, 4]


async def test_start_beyond_the_end_is_refused(where: Where) -> None:
    """Starting at an offset not written yet raises OffsetOutOfRangeError, saying where the end is."""
    stream_path = where.new()
    await write(stream_path, values(3))
    with pytest.raises(adiskq.OffsetOutOfRangeError, match="next offset is 3"):
        async with adiskq.Consumer(stream_path, start=10):
            pass


# -- end --------------------------------------------------------------------------------------------


async def test_end_close_stops_at_what_was_there_when_opened(where: Where) -> None:
    """end="close" ends the iteration at the messages present when the consumer opened."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await write(producer, values(4))
        async with adiskq.Consumer(stream_path, end="close") as consumer:
            await write(producer, values(3, first=4))
            assert [m.offset for m in await drain(consumer)] == [0, 1, 2, 3]


async def test_end_offset_is_exclusive_and_waits_for_it(where: Where) -> None:
    """An int end stops before that offset, waiting for messages until it gets there."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await write(producer, values(2))
        async with adiskq.Consumer(stream_path, end=5) as consumer:
            first = await take(consumer, 2)
            await write(producer, values(6, first=2))
            rest = await drain(consumer)
    assert [m.offset for m in first + rest] == [0, 1, 2, 3, 4]


async def test_end_close_on_an_empty_partition_ends_at_once(where: Where) -> None:
    """end="close" on a partition with nothing in it yields nothing."""
    stream_path = where.new()
    await write(stream_path, [])
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        assert await drain(consumer) == []


# -- batches ----------------------------------------------------------------------------------------


async def test_batches_hold_at_most_max_messages(where: Where) -> None:
    """batches(max_messages=n) yields lists of at most n messages, in order, covering everything."""
    stream_path = where.new()
    await write(stream_path, values(25))
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        with anyio.fail_after(10):
            batches = [batch async for batch in consumer.batches(max_messages=10)]
    assert [len(b) for b in batches] == [10, 10, 5]
    assert [m.offset for b in batches for m in b] == list(range(25))


async def test_batches_and_single_messages_share_one_position(where: Where) -> None:
    """Mixing async for and batches() neither skips nor repeats a message."""
    stream_path = where.new()
    await write(stream_path, values(30))
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        first = await take(consumer, 3)
        assert consumer.position == 3
        with anyio.fail_after(10):
            rest = [m async for batch in consumer.batches(max_messages=7) for m in batch]
    assert [m.offset for m in first + rest] == list(range(30))


@pytest.mark.parametrize("place", ["local", "kafka://127.0.0.1:9/orders"])
async def test_batches_refuses_a_non_positive_size(stream_path: str, place: str) -> None:
    """batches(max_messages=0) raises ValueError (on a stream or a topic, before any I/O: no broker
    listens at that URL)."""
    consumer = adiskq.Consumer(stream_path if place == "local" else place)
    with pytest.raises(ValueError, match="max_messages"):
        consumer.batches(max_messages=0)


# -- lifecycle --------------------------------------------------------------------------------------


def test_constructor_does_no_io(tmp_path: pathlib.Path) -> None:
    """Constructing a consumer or group touches nothing, even for a missing stream."""
    missing = tmp_path / "nothing"
    adiskq.Consumer(missing)
    adiskq.ConsumerGroup(missing, name="g")
    assert not missing.exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"partition": -1}, "partition"),
        ({"start": "first"}, "start"),
        ({"start": -3}, "start"),
        ({"end": "never"}, "end"),
        ({"on_data_loss": "ignore"}, "on_data_loss"),
        ({"poll_interval": 0}, "poll_interval"),
    ],
)
def test_bad_arguments_are_refused_at_construction(stream_path: str, kwargs: dict[str, object], match: str) -> None:
    """A bad argument raises ValueError naming it, before any I/O."""
    with pytest.raises(ValueError, match=match):
        adiskq.Consumer(stream_path, **kwargs)  # type: ignore[arg-type]


async def test_missing_stream_raises_and_creates_nothing(tmp_path: pathlib.Path) -> None:
    """A consumer of a path with no stream gets StreamNotFoundError, and nothing is created."""
    missing = tmp_path / "missing"
    with pytest.raises(adiskq.StreamNotFoundError):
        async with adiskq.Consumer(missing):
            pass
    assert not missing.exists()


async def test_a_folder_that_is_not_a_stream_is_refused(tmp_path: pathlib.Path) -> None:
    """A consumer of a plain folder or a file gets StreamNotFoundError and changes nothing."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_bytes(b"data")
    for path in (tmp_path / "folder", tmp_path / "file"):
        with pytest.raises(adiskq.StreamNotFoundError):
            async with adiskq.Consumer(path):
                pass
    assert os.listdir(tmp_path / "folder") == []
    assert (tmp_path / "file").read_bytes() == b"data"


async def test_a_missing_partition_is_refused(stream_path: str) -> None:
    """A consumer of a partition the stream does not have gets ValueError naming the range."""
    with Writer(stream_path, partitions=2):
        pass
    with pytest.raises(ValueError, match="no partition 5"):
        async with adiskq.Consumer(stream_path, partition=5):
            pass


async def test_closed_consumer_raises_closed_error(stream_path: str) -> None:
    """Reading a closed consumer raises ClosedError; closing it again is harmless."""
    with Writer(stream_path) as writer:
        writer.append(values(3))
    consumer = adiskq.Consumer(stream_path)
    async with consumer:
        await take(consumer, 1)
    await consumer.aclose()
    with pytest.raises(adiskq.ClosedError):
        await consumer.__anext__()
    with pytest.raises(adiskq.ClosedError):
        await consumer.batches().__anext__()
    with pytest.raises(adiskq.ClosedError):
        async with consumer:
            pass


async def test_closing_wakes_a_waiting_reader_with_closed_error(where: Where) -> None:
    """A task waiting for messages gets ClosedError when another task closes the consumer."""
    stream_path = where.new()
    await write(stream_path, [])
    errors: list[BaseException] = []
    async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:

        async def read() -> None:
            try:
                await consumer.__anext__()
            except adiskq.ClosedError as error:
                errors.append(error)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read)
                await anyio.wait_all_tasks_blocked()
                await consumer.aclose()
    assert len(errors) == 1


async def test_aclose_releases_resources_even_when_cancelled(stream_path: str) -> None:
    """aclose() inside a cancelled scope still closes the consumer's files and watches."""
    with Writer(stream_path) as writer:
        writer.append(values(2))
    consumer = adiskq.Consumer(stream_path)
    await consumer.__aenter__()
    await take(consumer, 1)
    (follower,) = consumer._order
    with anyio.CancelScope() as scope:
        scope.cancel()
        await consumer.aclose()
    assert consumer.closed
    assert follower.closed


async def test_two_tasks_cannot_read_one_consumer_at_once(where: Where) -> None:
    """A second task reading while the first waits gets BusyResourceError."""
    stream_path = where.new()
    await write(stream_path, [])
    async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consumer.__anext__)
                await anyio.wait_all_tasks_blocked()
                with pytest.raises(anyio.BusyResourceError):
                    await consumer.__anext__()
                tg.cancel_scope.cancel()


async def test_a_cancelled_wait_loses_no_message(where: Where) -> None:
    """Cancelling a consumer while it waits, then reading on, misses nothing and repeats nothing."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await write(producer, values(2))
        async with adiskq.Consumer(stream_path, poll_interval=60) as consumer:
            got = await take(consumer, 2)
            with anyio.move_on_after(0.05):
                got.append(await consumer.__anext__())
            await write(producer, values(3, first=2))
            got += await take(consumer, 3)
    assert [m.offset for m in got] == [0, 1, 2, 3, 4]


# -- bad data ---------------------------------------------------------------------------------------


async def test_a_corrupt_record_raises_with_file_and_position(stream_path: str) -> None:
    """A damaged record inside committed data raises CorruptRecordError naming file and byte position."""
    with Writer(stream_path) as writer:
        writer.append(values(3))
        size_of_one = writer.stream.partitions[0].active.data_size // 3
    path = data_file(stream_path)
    flip_byte(path, size_of_one + size_of_one - 1)  # the last byte of the second record
    async with adiskq.Consumer(stream_path, end="close") as consumer:
        with pytest.raises(adiskq.CorruptRecordError) as caught:
            await drain(consumer)
    assert caught.value.path == path
    assert caught.value.position == size_of_one


async def test_a_torn_tail_being_written_is_not_an_error(stream_path: str) -> None:
    """Bytes past the last index entry (a record being written) are invisible, never an error."""
    with Writer(stream_path) as writer:
        writer.append(values(3))
        append(data_file(stream_path), b"\x40\x00\x00\x00half a record")
        async with adiskq.Consumer(stream_path, end="wait") as consumer:
            assert [m.offset for m in await take(consumer, 3)] == [0, 1, 2]
            with anyio.move_on_after(0.1) as scope:
                await consumer.__anext__()
            assert scope.cancelled_caught


# -- data loss --------------------------------------------------------------------------------------


def write_segments(writer: Writer, count: int) -> None:
    for i in range(count):
        writer.append([b"x" * 80 + b"%06d" % i])


async def test_vacuumed_start_skips_to_the_oldest_and_reports_it(where: Where) -> None:
    """With on_data_loss="skip", a start older than the oldest offset continues there and records the gap."""
    stream_path = where.new()
    await fill_for_retention(stream_path, 60)
    oldest = await delete_oldest(stream_path, 60)
    async with adiskq.Consumer(stream_path, start=0, end="close") as consumer:
        messages = await drain(consumer)
        assert consumer.skipped == [(0, 0, oldest)]
    assert [m.offset for m in messages] == list(range(oldest, 60))


async def test_vacuum_while_reading_skips_only_what_is_gone(stream_path: str) -> None:
    """Vacuum under a reading consumer: it finishes the segment it holds, then skips exactly the deleted range."""
    with Writer(stream_path, segment_size_bytes=1024) as writer:
        write_segments(writer, 60)
        bases = writer.stream.partitions[0].segment_infos()
        first_segment_end = bases[0].next_offset
        async with adiskq.Consumer(stream_path, end="close") as consumer:
            head = await take(consumer, 2)
            writer.stream.vacuum(adiskq.Retention(max_bytes=2048))
            oldest = adiskq.stats(stream_path).partitions[0].oldest_offset
            rest = await drain(consumer)
            assert consumer.skipped == [(0, first_segment_end, oldest)]
    offsets = [m.offset for m in head + rest]
    assert offsets == list(range(first_segment_end)) + list(range(oldest, 60))


async def test_data_loss_raises_when_asked(where: Where) -> None:
    """With on_data_loss="raise", reading vacuumed offsets raises OffsetOutOfRangeError with the
    oldest offset, and reading again raises again."""
    stream_path = where.new()
    await fill_for_retention(stream_path, 60)
    oldest = await delete_oldest(stream_path, 60)
    async with adiskq.Consumer(stream_path, start=0, on_data_loss="raise") as consumer:
        for _ in range(2):
            with (
                anyio.fail_after(10),
                pytest.raises(adiskq.OffsetOutOfRangeError, match="deleted by retention") as caught,
            ):
                await consumer.__anext__()
            assert (caught.value.partition, caught.value.offset, caught.value.oldest_offset) == (0, 0, oldest)
        assert consumer.skipped == []


async def test_a_consumer_cancelled_while_opening_holds_nothing(stream_path: str) -> None:
    """Cancelled inside __aenter__, a consumer releases what it opened and counts as closed."""
    with Writer(stream_path):
        pass
    consumer = adiskq.Consumer(stream_path)
    with anyio.CancelScope() as scope:
        scope.cancel()
        async with consumer:
            raise AssertionError("not reached: the checkpoint in __aenter__ raises")
    assert consumer.closed
    (follower,) = consumer._order
    assert follower.closed
