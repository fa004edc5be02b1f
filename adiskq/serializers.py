"""Ready-made serializer pairs: what a producer stores for an object, and what a reader makes of it.

::

    from adiskq.serializers import JSON, msgspec_json

    orders = msgspec_json(Order)                     # Order: a msgspec.Struct
    async with adiskq.Producer(path, value_serializer=orders.serializer) as producer:
        await producer.push(Order(id=1, amount=9.5), key="customer-00")
    async with adiskq.Consumer(path, value_deserializer=orders.deserializer) as consumer:
        async for message in consumer:               # mypy: Message[bytes, Order]
            message.value.amount

The arguments are named as aiokafka and kafka-python name them (``value_serializer``,
``key_serializer``, ``value_deserializer``, ``key_deserializer``), and any function of the same
shape works: ``Callable[[T], bytes]`` to store, ``Callable[[bytes], T]`` to read. What is stored stays
plain bytes: the command line, Spark and ``adiskq.find`` read it as before (JSON prints as text).

``JSON`` uses the standard library; ``msgspec_json`` needs ``pip install "adiskq[msgspec]"``,
``pydantic_json`` needs ``pip install "adiskq[pydantic]"`` (each imported only when called).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeAlias, TypeVar

from ._extras import needs_extra

if TYPE_CHECKING:
    import msgspec
    import pydantic

__all__ = [
    "JSON",
    "JsonValue",
    "Serde",
    "json_deserializer",
    "json_serializer",
    "msgspec_json",
    "pydantic_json",
]

T = TypeVar("T")
StructT = TypeVar("StructT", bound="msgspec.Struct")
ModelT = TypeVar("ModelT", bound="pydantic.BaseModel")

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"


@dataclasses.dataclass(frozen=True, slots=True)
class Serde(Generic[T]):
    """A serializer and the deserializer that undoes it: ``Producer(value_serializer=pair.serializer)``,
    ``Consumer(value_deserializer=pair.deserializer)`` (or ``key_serializer``/``key_deserializer``)."""

    serializer: Callable[[T], bytes]
    deserializer: Callable[[bytes], T]

    def __repr__(self) -> str:
        def name(function: object) -> str:
            return str(getattr(function, "__qualname__", None) or repr(function))

        return f"Serde({name(self.serializer)}, {name(self.deserializer)})"


def json_serializer(value: object) -> bytes:
    """``value`` as compact UTF-8 JSON (``TypeError`` for what JSON cannot hold)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def json_deserializer(data: bytes) -> JsonValue:
    """The JSON value ``data`` holds (``ValueError`` for bytes that are not JSON)."""
    result: JsonValue = json.loads(data)
    return result


JSON: Serde[JsonValue] = Serde(json_serializer, json_deserializer)
"""JSON with the standard library: dicts, lists, strings, numbers, booleans and None."""


def msgspec_json(model: type[StructT]) -> Serde[StructT]:
    """A ``msgspec.Struct`` type as JSON: instances are encoded, and decoded (and validated) back
    into ``model``; a message that does not fit raises ``msgspec.ValidationError``."""
    with needs_extra("msgspec", "msgspec_json"):
        import msgspec

    encoder = msgspec.json.Encoder()
    decoder = msgspec.json.Decoder(model)
    return Serde(encoder.encode, decoder.decode)


def pydantic_json(model: type[ModelT]) -> Serde[ModelT]:
    """A pydantic model as JSON: ``model_dump_json`` to store, ``model_validate_json`` to read (a
    message that does not fit raises ``pydantic.ValidationError``)."""
    with needs_extra("pydantic", "pydantic_json"):
        import pydantic

    if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
        raise TypeError(f"pydantic_json takes a pydantic.BaseModel subclass, not {model!r}")

    def serialize(value: ModelT) -> bytes:
        return value.model_dump_json().encode()

    return Serde(serialize, model.model_validate_json)
