"""What mypy sees of serializers: checked by ``test_typing.py`` (``mypy --strict``), not run by pytest."""

from __future__ import annotations

from typing import assert_type

import msgspec
import pydantic

import adiskq
from adiskq.serializers import JSON, JsonValue, msgspec_json, pydantic_json


class Order(msgspec.Struct):
    id: int


class Invoice(pydantic.BaseModel):
    id: int


async def readers(path: str) -> None:
    orders = msgspec_json(Order)
    async with adiskq.Consumer(path, value_deserializer=orders.deserializer) as consumer:
        async for message in consumer:
            assert_type(message, adiskq.Message[bytes, Order])
            assert_type(message.value, Order)
            assert_type(message.key, bytes)
        async for batch in consumer.batches():
            assert_type(batch[0].value, Order)
    async with adiskq.ConsumerGroup(
        path, "g", value_deserializer=pydantic_json(Invoice).deserializer, key_deserializer=bytes.decode
    ) as group:
        async for invoice in group:
            assert_type(invoice.value, Invoice)
            assert_type(invoice.key, str)
            group.commit(invoice)
    async with adiskq.Consumer(path, value_deserializer=JSON.deserializer) as json_consumer:
        async for document in json_consumer:
            assert_type(document.value, JsonValue)
    async with adiskq.Consumer(path) as plain:
        async for raw in plain:
            assert_type(raw, adiskq.Message[bytes, bytes])
            assert_type(raw.value, bytes)
            untyped: adiskq.Message = raw
            assert_type(untyped.value, bytes)


async def producers(path: str) -> None:
    orders = msgspec_json(Order)
    async with adiskq.Producer(path, value_serializer=orders.serializer, key_serializer=str.encode) as producer:
        await producer.push(Order(id=1), key="customer-00")
        await producer.push_many([Order(id=2), adiskq.Record(Order(id=3), key="customer-01")])
    async with adiskq.Producer(path) as plain:
        await plain.push(b"bytes", key="str key")
        await plain.push(b"bytes", key=b"bytes key")
        await plain.push_many([b"x", adiskq.Record(b"y", key="k")])
