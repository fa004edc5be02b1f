"""The library's API, once on a local stream and once on a topic of Apache Kafka (``where``):
pushing, reading, groups, commits, lag, resets, serializers and dead letters, asserted the same way
on both wherever README's capability table says the feature maps. What differs by design (a
timestamp's precision, where dead letters go) is said at the assertion."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import anyio
import pytest
from support.backends import Where

import adiskq
from adiskq import serializers

pytestmark = pytest.mark.anyio

# A timestamp both backends keep exactly: Kafka keeps milliseconds.
WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC)


async def _read_all(place: str, **options: Any) -> list[adiskq.Message[Any, Any]]:
    async with adiskq.Consumer(place, end="close", **options) as consumer:
        messages = [message async for message in consumer]
    return sorted(messages, key=lambda message: (message.partition, message.offset))


async def test_pushed_messages_read_back_with_keys_headers_tags_and_timestamps(where: Where) -> None:
    place = where.new()
    repeated = adiskq.Headers([("trace", b"a"), ("trace", b"b"), ("gone", None)])
    async with adiskq.Producer(place, partitions=3) as producer:
        first = await producer.push(
            b"v1", key="customer-1", headers={"type": b"created"}, tag="created", timestamp=WHEN
        )
        second = await producer.push(b"v2", key=b"customer-1", headers=repeated, timestamp=WHEN)
        third = await producer.push(b"v3", key="customer-2", timestamp=WHEN)
    assert first.partition == second.partition  # one key, one partition
    assert second.offset == first.offset + 1
    messages = await _read_all(place)
    by_value = {message.value: message for message in messages}
    assert set(by_value) == {b"v1", b"v2", b"v3"}
    one, two, three = by_value[b"v1"], by_value[b"v2"], by_value[b"v3"]
    assert (one.partition, one.offset) == tuple(first)
    assert (two.partition, two.offset) == tuple(second)
    assert (three.partition, three.offset) == tuple(third)
    assert one.key == b"customer-1"
    assert one.tag == "created"
    assert one.headers == {"type": b"created"}
    assert isinstance(two.headers, adiskq.Headers)
    assert two.header_list == (("trace", b"a"), ("trace", b"b"), ("gone", None))
    assert two.tag is None
    assert two.headers["trace"] == b"b"
    assert {message.timestamp for message in messages} == {WHEN}


async def test_push_many_keeps_order_per_key_and_gives_receipts_in_order(where: Where) -> None:
    place = where.new()
    records = [adiskq.Record(b"%d" % i, key=f"k{i % 4}") for i in range(40)]
    async with adiskq.Producer(place, partitions=2) as producer:
        receipts = await producer.push_many(records)
    assert len(receipts) == 40
    messages = await _read_all(place)
    assert [(m.partition, m.offset) for m in messages] == sorted(tuple(r) for r in receipts)
    for key in ("k0", "k1", "k2", "k3"):
        values = [int(m.value) for m in messages if m.key == key.encode()]
        assert values == sorted(values)
        assert len(values) == 10
        assert len({m.partition for m in messages if m.key == key.encode()}) == 1


async def test_serializers_both_ways(where: Where) -> None:
    place = where.new()
    value_serializer, value_deserializer = serializers.json_serializer, serializers.json_deserializer
    async with adiskq.Producer(place, value_serializer=value_serializer) as producer:
        await producer.push({"order": 1, "items": ["a"]}, key="o-1")
    messages = await _read_all(place, value_deserializer=value_deserializer, key_deserializer=bytes.decode)
    assert [(m.key, m.value) for m in messages] == [("o-1", {"order": 1, "items": ["a"]})]


async def test_a_failing_deserializer_stops_at_its_message(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push_many([b'{"n": 1}', b"not json", b'{"n": 3}'])
    async with adiskq.Consumer(place, partition=0, end="close", value_deserializer=json.loads) as consumer:
        assert (await consumer.__anext__()).value == {"n": 1}
        with pytest.raises(adiskq.DeserializationError) as raised:
            await consumer.__anext__()
        assert (raised.value.partition, raised.value.offset) == (0, 1)
        with pytest.raises(adiskq.DeserializationError):  # still next: nothing was skipped
            await consumer.__anext__()


async def test_consumer_start_and_end(where: Where) -> None:
    place = where.new()
    later = WHEN + dt.timedelta(seconds=10)
    async with adiskq.Producer(place) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, timestamp=WHEN if i < 5 else later) for i in range(10)])
    assert [m.value for m in await _read_all(place, start=3)] == [b"%d" % i for i in range(3, 10)]
    async with adiskq.Consumer(place, partition=0, start=2, end=4) as consumer:
        assert [m.value async for m in consumer] == [b"2", b"3"]
    assert [m.value for m in await _read_all(place, start=later)] == [b"%d" % i for i in range(5, 10)]
    assert await _read_all(place, start="newest") == []


async def test_consumer_follows_new_messages(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push(b"before")
        async with adiskq.Consumer(place, partition=0) as consumer:
            assert (await consumer.__anext__()).value == b"before"
            await producer.push(b"after")
            with anyio_fail_after(60):
                assert (await consumer.__anext__()).value == b"after"


async def test_a_named_group_resumes_after_its_commits_and_reports_lag(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place, partitions=2) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, key=f"k{i}") for i in range(20)])
    seen: list[bytes] = []
    async with adiskq.ConsumerGroup(place, "billing") as group:
        async for message in group:
            seen.append(message.value)
            group.commit(message)
            if len(seen) == 12:
                break
        assert sum((await group.lag()).values()) == 8
    assert sum(adiskq.lag(place, "billing").values()) == 8
    async with adiskq.ConsumerGroup(place, "billing", end="close") as group:
        rest = [message.value async for message in group]
    assert sorted(seen + rest) == sorted(b"%d" % i for i in range(20))  # each once: commits were kept


async def test_reset_offsets_and_delete_group(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push_many([b"%d" % i for i in range(6)])
    async with adiskq.ConsumerGroup(place, "audit", end="close") as group:
        async for message in group:
            group.commit(message)
    assert adiskq.lag(place, "audit") == {0: 0}
    assert adiskq.reset_offsets(place, "audit", 2) == {0: 2}
    assert adiskq.lag(place, "audit") == {0: 4}
    async with adiskq.ConsumerGroup(place, "audit", end="close") as group:
        assert [message.value async for message in group] == [b"2", b"3", b"4", b"5"]
    assert adiskq.reset_offsets(place, "audit", "oldest") == {0: 0}
    assert adiskq.delete_group(place, "audit") is True
    assert adiskq.delete_group(place, "audit") is False
    assert adiskq.lag(place, "audit") == {}


async def test_reset_offsets_of_a_running_group_is_refused(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push(b"x")
    async with adiskq.ConsumerGroup(place, "live") as group:
        message = await group.__anext__()
        group.commit(message)
        await group.flush()
        with pytest.raises(adiskq.GroupInUseError):
            adiskq.reset_offsets(place, "live", "oldest")


async def test_dead_letter_keeps_the_message_and_says_why(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push_many(
            [adiskq.Record(b"good", key="a"), adiskq.Record(b"poison", key="b", headers={"h": b"1"})]
        )
    async with adiskq.ConsumerGroup(place, "workers", end="close") as group:
        async for message in group:
            if message.value == b"poison":
                await group.dead_letter(message, reason="cannot parse")
            else:
                group.commit(message)
    assert adiskq.lag(place, "workers") == {0: 0}  # the dead letter counts as processed
    letters = await _read_all(where.dead_letters(place, "workers"))
    assert [(m.key, m.value) for m in letters] == [(b"b", b"poison")]
    assert letters[0].headers["h"] == b"1"
    assert b"cannot parse" in letters[0].headers["adiskq-reason"]


async def test_dead_letter_of_an_undecodable_message(where: Where) -> None:
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push_many([b'{"n": 1}', b"not json", b'{"n": 3}'])
    decoded = []
    async with adiskq.ConsumerGroup(place, "decoders", end="close", value_deserializer=json.loads) as group:
        while True:
            try:
                message = await group.__anext__()
            except adiskq.DeserializationError as error:
                await group.dead_letter(error, reason="not json")
                continue
            except StopAsyncIteration:
                break
            decoded.append(message.value)
            group.commit(message)
    assert decoded == [{"n": 1}, {"n": 3}]
    assert [m.value for m in await _read_all(where.dead_letters(place, "decoders"))] == [b"not json"]


def anyio_fail_after(seconds: float) -> Any:
    import anyio

    return anyio.fail_after(seconds)


async def test_members_of_a_named_group_share_the_partitions(where: Where) -> None:
    """Two members: each partition read by one of them at a time, every message delivered, and
    assignments() says each change."""
    place = where.new()
    async with adiskq.Producer(place, partitions=4) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, key=f"k{i}") for i in range(40)])
    seen: set[bytes] = set()
    shared = anyio.Event()
    async with (
        adiskq.ConsumerGroup(place, "pool") as first,
        adiskq.ConsumerGroup(place, "pool") as second,
    ):

        def check() -> None:
            if len(seen) == 40 and first.assignment and second.assignment:
                shared.set()

        async def read(group: adiskq.ConsumerGroup[bytes, bytes]) -> None:
            async for message in group:
                seen.add(message.value)
                group.commit(message)
                check()

        async def watch(group: adiskq.ConsumerGroup[bytes, bytes]) -> None:
            async for assignment in group.assignments():
                assert assignment == group.assignment
                check()

        with anyio_fail_after(120):
            async with anyio.create_task_group() as tasks:
                for group in (first, second):
                    tasks.start_soon(read, group)
                    tasks.start_soon(watch, group)
                await shared.wait()
                tasks.cancel_scope.cancel()
        assert not set(first.assignment) & set(second.assignment)
        assert set(first.assignment) | set(second.assignment) == {0, 1, 2, 3}
    assert seen == {b"%d" % i for i in range(40)}


async def test_members_reading_to_the_end_stop_also_when_one_holds_nothing(where: Where) -> None:
    """end="close" with more members than partitions: every member stops, and the messages are read."""
    place = where.new()
    async with adiskq.Producer(place) as producer:
        await producer.push_many([b"1", b"2", b"3"])
    seen: list[bytes] = []

    async def member() -> None:
        async with adiskq.ConsumerGroup(place, "few", end="close") as group:
            async for message in group:
                seen.append(message.value)
                group.commit(message)

    with anyio_fail_after(120):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(member)
            tasks.start_soon(member)
    assert set(seen) == {b"1", b"2", b"3"}


@pytest.mark.parametrize(
    "make",
    [
        lambda place: adiskq.Consumer(place, end="later"),
        lambda place: adiskq.Consumer(place, partition=-1),
        lambda place: adiskq.Consumer(place, on_data_loss="ignore"),
        lambda place: adiskq.ConsumerGroup(place, "g", end=10),
        lambda place: adiskq.ConsumerGroup(place, "g", commit_interval=0),
        lambda place: adiskq.ConsumerGroup(place, "../g"),
        lambda place: adiskq.Producer(place, flush="sometimes"),
        lambda place: adiskq.Producer(place, partitions=0),
    ],
)
def test_bad_arguments_are_refused_at_construction_alike(where: Where, make: Any) -> None:
    """The same mistakes, the same errors, before any I/O, on both backends."""
    with pytest.raises((adiskq.InvalidArgumentError, adiskq.InvalidNameError)):
        make(where.new())
