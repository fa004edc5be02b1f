"""A push's arguments as a Kafka record, and a Kafka record as a ``Message``: no I/O.

The rules (README.md's capability table says them to users):

- keys and values are bytes; a ``str`` key is its UTF-8. A push without a key sends Kafka's null
  key (placed at random, as a local push without one is), and a null key is read back as ``b""``,
  as a local record without a key is. A null value (a tombstone, only other clients write one) is
  read as ``b""`` with the header ``adiskq.kafka.null`` saying so, the gateway's and the mirror's rule;
- a timestamp reaches Kafka as its millisecond, and comes back as ``ms * 1_000_000`` ns;
- headers are Kafka's list both ways: a mapping's items, or an ``adiskq.Headers``'s every header,
  in order; a record with a repeated name or a null value is read as ``adiskq.Headers``, any other
  as a plain ``dict``;
- a tag travels as the header ``adiskq.tag`` (its UTF-8), as the mirror sends it, and that header
  is read back as the message's tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .._errors import InvalidArgumentError
from .._sansio.values import EMPTY_HEADERS, Headers, Message
from ._mirror_mapping import TAG_HEADER
from .wire.mapping import NULLS_HEADER

__all__ = ["Outgoing", "key_bytes", "message_of", "outgoing"]

_MAX_TAG_BYTES: Final = 255
KafkaHeaders = list[tuple[str, bytes | None]]


class Outgoing(NamedTuple):
    """A record as the producer hands it to the client."""

    key: bytes | None
    value: bytes
    headers: KafkaHeaders
    timestamp_ms: int


def key_bytes(key: object) -> bytes | None:
    """A push's key as Kafka's bytes (None stays None: Kafka's null key)."""
    if key is None or type(key) is bytes:
        return key
    if isinstance(key, str):
        try:
            return key.encode()
        except UnicodeEncodeError:
            raise InvalidArgumentError(f"key {key!r} holds a lone surrogate, which UTF-8 cannot encode") from None
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise TypeError(f"a key is str, bytes or None, not {type(key).__name__}")


def _value_bytes(value: object) -> bytes:
    if type(value) is bytes:
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        raise TypeError("a message value is bytes, not str: encode text first, e.g. value.encode()")
    raise TypeError(f"a message value is bytes, not {type(value).__name__}")


def _header_list(headers: Mapping[str, bytes] | None) -> KafkaHeaders:
    if not headers:
        return []
    pairs = headers.all() if isinstance(headers, Headers) else headers.items()
    checked: KafkaHeaders = []
    for name, value in pairs:
        if not isinstance(name, str):
            raise TypeError(f"header names are str, not {type(name).__name__}: {name!r}")
        if value is not None and not isinstance(value, bytes):
            # A local stream takes any buffer (a bytearray, a view of wider items): the same here,
            # as all of its bytes, so one push reads back alike on both backends.
            if not isinstance(value, bytearray | memoryview):
                raise TypeError(
                    f"header values are bytes, not {type(value).__name__} (header {name!r}); encode text with .encode()"
                )
            value = bytes(value)
        checked.append((name, value))
    return checked


def _tag_bytes(tag: object) -> bytes:
    if not isinstance(tag, str):
        raise TypeError(f"a tag is str or None, not {type(tag).__name__}")
    encoded = tag.encode("utf-8", "surrogatepass")
    if not 1 <= len(encoded) <= _MAX_TAG_BYTES:
        raise InvalidArgumentError(f"tag={tag!r}: a tag is 1 to {_MAX_TAG_BYTES} bytes of UTF-8")
    return encoded


def outgoing(
    value: object, key: object, tag: object, headers: Mapping[str, bytes] | None, timestamp_ns: int
) -> Outgoing:
    """A push's value, key, tag, headers and timestamp (already serialized) as the Kafka record; the
    errors a local push raises for the same mistakes, before anything is sent."""
    header_list = _header_list(headers)
    if tag is not None:
        header_list.append((TAG_HEADER, _tag_bytes(tag)))
    return Outgoing(key_bytes(key), _value_bytes(value), header_list, timestamp_ns // 1_000_000)


def message_of(record: Any) -> Message[bytes, bytes]:
    """A confluent-kafka message as the ``Message`` a local reader would hand out for it."""
    key = record.key()
    value = record.value()
    pairs: KafkaHeaders | None = record.headers()
    _, timestamp_ms = record.timestamp()
    tag: str | None = None
    headers: Mapping[str, bytes] = EMPTY_HEADERS
    if pairs or value is None:
        kept = list(pairs or ())
        tags = [i for i, (name, _) in enumerate(kept) if name == TAG_HEADER]
        if len(tags) == 1:
            raw = kept[tags[0]][1]
            try:
                tag = None if raw is None or not 1 <= len(raw) <= _MAX_TAG_BYTES else raw.decode()
            except UnicodeDecodeError:
                tag = None
            if tag is not None:
                del kept[tags[0]]
        if value is None:
            kept.append((NULLS_HEADER, b"value"))
        names = [name for name, _ in kept]
        if len(set(names)) != len(names) or any(header is None for _, header in kept):
            headers = Headers(kept)
        elif kept:
            headers = {name: header for name, header in kept if header is not None}
    return Message(
        record.partition(),
        record.offset(),
        max(timestamp_ms, 0) * 1_000_000,
        b"" if key is None else key,
        b"" if value is None else value,
        headers,
        tag,
    )
