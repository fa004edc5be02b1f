"""Serializers: a producer stores what its serializers make, readers hand out what their
deserializers make, and the stored bytes stay plain for every other reader. Each test runs on a
local stream and on a Kafka topic (``where``): serializers map to the Kafka backend unchanged."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import anyio
import msgspec
import pydantic
import pytest

import adiskq
from adiskq.serializers import JSON, msgspec_json, pydantic_json

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


async def stored(place: str, partition: int, offset: int) -> adiskq.Message[bytes, bytes]:
    """The message at ``offset`` as stored (no deserializers): what every other reader gets."""
    async with adiskq.Consumer(place, partition, start=offset, end=offset + 1) as consumer:
        with anyio.fail_after(30):
            (message,) = [m async for m in consumer]
    return message


async def count(place: str) -> int:
    async with adiskq.Consumer(place, end="close") as consumer:
        with anyio.fail_after(30):
            return len([m async for m in consumer])


class Order(msgspec.Struct):
    id: int
    amount: float


class Invoice(pydantic.BaseModel):
    id: int
    total: float


async def test_json_values_go_in_and_come_out_as_objects(where: Where) -> None:
    """``push(dict)`` with the JSON serializer stores JSON text; a consumer with the deserializer reads dicts."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, value_serializer=JSON.serializer) as producer:
        partition, offset = await producer.push({"id": 1, "items": ["a", "b"]}, key="customer-00")
    assert json.loads((await stored(stream_path, partition, offset)).value) == {"id": 1, "items": ["a", "b"]}
    async with adiskq.Consumer(stream_path, end="close", value_deserializer=JSON.deserializer) as consumer:
        with anyio.fail_after(10):
            (message,) = [m async for m in consumer]
    assert message.value == {"id": 1, "items": ["a", "b"]}
    assert message.key == b"customer-00"


async def test_keys_are_serialized_and_deserialized_too(where: Where) -> None:
    """``key_serializer`` places by the stored key bytes; ``key_deserializer`` hands the object back."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, partitions=4, key_serializer=lambda n: b"customer-%02d" % n) as producer:
        receipt = await producer.push(b"v", key=7)
    assert (await stored(stream_path, *receipt)).key == b"customer-07"
    async with adiskq.Consumer(
        stream_path, partition=receipt.partition, end="close", key_deserializer=lambda b: int(b[-2:])
    ) as consumer:
        with anyio.fail_after(10):
            (message,) = [m async for m in consumer]
    assert message.key == 7
    assert message.value == b"v"


async def test_msgspec_structs_round_trip(where: Where) -> None:
    """``msgspec_json(Order)`` stores JSON and reads ``Order`` instances back, in batches too."""
    stream_path = where.new()
    orders = msgspec_json(Order)
    async with adiskq.Producer(stream_path, value_serializer=orders.serializer) as producer:
        await producer.push_many([Order(1, 9.5), adiskq.Record(Order(2, 1.25), key="k")])
    assert json.loads((await stored(stream_path, 0, 1)).value) == {"id": 2, "amount": 1.25}
    async with adiskq.Consumer(stream_path, end="close", value_deserializer=orders.deserializer) as consumer:
        with anyio.fail_after(10):
            batches = [batch async for batch in consumer.batches()]
    assert [m.value for batch in batches for m in batch] == [Order(1, 9.5), Order(2, 1.25)]


async def test_pydantic_models_round_trip_through_a_group(where: Where) -> None:
    """``pydantic_json(Invoice)`` works for a ConsumerGroup's ``value_deserializer``."""
    stream_path = where.new()
    invoices = pydantic_json(Invoice)
    async with adiskq.Producer(stream_path, partitions=2, value_serializer=invoices.serializer) as producer:
        await producer.push(Invoice(id=1, total=3.0))
    async with adiskq.ConsumerGroup(
        stream_path, "billing", end="close", value_deserializer=invoices.deserializer
    ) as group:
        with anyio.fail_after(10):
            (message,) = [m async for m in group]
        group.commit(message)
    assert message.value == Invoice(id=1, total=3.0)


async def test_a_failing_deserializer_stops_at_the_message_and_skips_nothing(where: Where) -> None:
    """The messages before a bad one are delivered; the bad one raises DeserializationError, again
    on the next read; starting after it reads on."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([b'{"n": 1}', b"not json", b'{"n": 3}'])
    async with adiskq.Consumer(stream_path, end="close", value_deserializer=JSON.deserializer) as consumer:
        with anyio.fail_after(10):
            assert (await consumer.__anext__()).value == {"n": 1}
            for _ in range(2):
                with pytest.raises(
                    adiskq.DeserializationError, match="value_deserializer failed on message 1"
                ) as caught:
                    await consumer.__anext__()
        assert (caught.value.partition, caught.value.offset) == (0, 1)
        assert isinstance(caught.value.__cause__, ValueError)
    async with adiskq.Consumer(
        stream_path, partition=0, start=caught.value.offset + 1, end="close", value_deserializer=JSON.deserializer
    ) as consumer:
        with anyio.fail_after(10):
            assert [m.value async for m in consumer] == [{"n": 3}]


async def test_a_failing_serializer_writes_nothing(where: Where) -> None:
    """A value the serializer refuses fails the push, and nothing is stored."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path, value_serializer=JSON.serializer) as producer:
        with pytest.raises(TypeError):
            await producer.push({1, 2})
        await producer.push([1])
    assert await count(stream_path) == 1


async def test_without_serializers_values_are_bytes_as_before(where: Where) -> None:
    """A producer without serializers refuses a non-bytes value, as it always did."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        with pytest.raises(TypeError, match="bytes"):
            await producer.push({"a": 1})  # type: ignore[arg-type]
        assert not producer.closed
    assert producer.closed


def test_serializers_must_be_callables(where: Where) -> None:
    """A serializer that is not a function is refused at construction."""
    stream_path = where.new()
    with pytest.raises(TypeError, match="value_serializer takes a function"):
        adiskq.Producer(stream_path, value_serializer="json")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key_deserializer takes a function"):
        adiskq.Consumer(stream_path, key_deserializer=b"x")  # type: ignore[arg-type]
