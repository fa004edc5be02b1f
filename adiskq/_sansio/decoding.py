"""Applying a reader's deserializers to the messages it read: the stored bytes in, decoded messages out.

No I/O: the follower that read the messages decides what a failure means (it reads the failed
message again, so nothing is skipped without the caller saying so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .values import Message

__all__ = ["DecodeFailure", "Deserializer", "MessageDecoder"]

Deserializer = Callable[[bytes], Any]

_new_tuple = tuple.__new__


class DecodeFailure(NamedTuple):
    """Which deserializer failed (``"key_deserializer"`` or ``"value_deserializer"``), and how."""

    which: str
    error: Exception


class MessageDecoder:
    """A reader's ``key_deserializer`` and ``value_deserializer`` (either may be None: kept as bytes)."""

    __slots__ = ("key", "value")

    def __init__(self, key: Deserializer | None, value: Deserializer | None) -> None:
        self.key = key
        self.value = value

    @classmethod
    def of(cls, key: Deserializer | None, value: Deserializer | None) -> MessageDecoder | None:
        """A decoder, or None when there is nothing to decode (the messages are handed out as read)."""
        for name, given in (("key_deserializer", key), ("value_deserializer", value)):
            if given is not None and not callable(given):
                raise TypeError(f"{name} takes a function of the stored bytes, not {type(given).__name__}")
        return None if key is None and value is None else cls(key, value)

    def decode(self, messages: list[Message]) -> tuple[list[Message[Any, Any]], DecodeFailure | None]:
        """The messages decoded, up to the first that a deserializer failed on, and that failure."""
        decoded: list[Message[Any, Any]] = []
        key_of, value_of = self.key, self.value
        for message in messages:
            key: object = message.key
            value: object = message.value
            try:
                if key_of is not None:
                    key = key_of(message.key)
            except Exception as error:  # whatever the user's function raises
                return decoded, DecodeFailure("key_deserializer", error)
            try:
                if value_of is not None:
                    value = value_of(message.value)
            except Exception as error:
                return decoded, DecodeFailure("value_deserializer", error)
            # tuple.__new__ rather than Message(...): far cheaper (RESULTS.md, F17), the same object.
            decoded.append(
                _new_tuple(Message, (message[0], message[1], message[2], key, value, message[5], message[6]))
            )
        return decoded, None
