"""A Kafka request's payload read field by field: what the references of the compiled request
readers (``wire/fetch_request.py``, ``wire/produce_request.py``) share, as their C files share
``adiskq/_csrc/kafka/request_reader.h``.

Flexible versions write an array's, a string's or a record set's length as an unsigned varint of
length + 1 (0: null) and end each structure with its tagged fields (a varint count, 0 for none);
older ones a big-endian i32 (arrays, record sets) or i16 (strings) length, -1 for null. A varint is
at most 5 bytes and 32 bits. Anything else, and bytes cut short, raise ``Cut``: the request is "not
here" for the reader, which answers None so that the gateway reads it with kio instead.

Also the arguments every reader takes, checked alike: ``check_request_arguments``.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["I8", "I16", "I32", "I64", "Cut", "RequestReader", "check_request_arguments"]

I8: Final = struct.Struct(">b")
I16: Final = struct.Struct(">h")
I32: Final = struct.Struct(">i")
I64: Final = struct.Struct(">q")


class Cut(Exception):
    """The bytes do not hold the request (read as None)."""


class RequestReader:
    """A position in a request's bytes, and whether its version is flexible."""

    __slots__ = ("at", "data", "flexible")

    def __init__(self, data: bytes, at: int, flexible: bool) -> None:
        self.data = data
        self.at = at
        self.flexible = flexible

    def take(self, count: int) -> bytes:
        end = self.at + count
        if end > len(self.data):
            raise Cut
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def fixed(self, form: struct.Struct) -> int:
        value: int = form.unpack(self.take(form.size))[0]
        return value

    def uvarint(self) -> int:
        value = 0
        for shift in range(0, 35, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if value >> 32:
                    raise Cut  # above 32 bits
                return value
        raise Cut  # longer than 5 bytes

    def length(self, fixed: struct.Struct) -> int:
        """A length: -1 for null, another negative one is not here."""
        length = self.uvarint() - 1 if self.flexible else self.fixed(fixed)
        if length < -1:
            raise Cut
        return length

    def count(self) -> int:
        """An array's length (null: not here). Each element takes at least one byte, so a count
        larger than the bytes left is not here, before anything is made for it."""
        count = self.length(I32)
        if count < 0 or count > len(self.data) - self.at:
            raise Cut
        return count

    def nullable_string(self) -> str | None:
        length = self.length(I16)
        if length < 0:
            return None
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError:
            raise Cut from None

    def string(self) -> str:
        """A string that may not be null."""
        text = self.nullable_string()
        if text is None:
            raise Cut
        return text

    def no_tags(self) -> None:
        if self.flexible and self.uvarint() != 0:
            raise Cut


def check_request_arguments(name: str, message: bytes, at: int, version: int, versions: range) -> None:
    """TypeError or ValueError, worded as the compiled readers word them, for arguments outside a
    reader's contract: ``message`` bytes, ``at`` within it, ``version`` one of ``versions``."""
    if not isinstance(message, bytes):
        raise TypeError(f"{name}: message is bytes")
    if not isinstance(at, int) or not isinstance(version, int):
        raise TypeError(f"{name}: at and version are ints")
    if not 0 <= at <= len(message):
        raise ValueError(f"{name}: at is within the message")
    if version not in versions:
        raise ValueError(f"{name}: version must be within [{versions[0]}, {versions[-1]}]")
