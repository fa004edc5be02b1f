"""Splitting one connection's bytes into request frames, without I/O.

The server feeds it whatever a receive returned (part of a frame, or several frames a client
pipelined) and takes whole frames out; one receive of up to ``RECEIVE_BYTES`` then serves every
request it holds. A frame is the i32 size and that many bytes (``_protocol.py``); the size is checked
as soon as its four bytes are in, so a request over the limit is refused before its body is read.
"""

from __future__ import annotations

from typing import Final

from ._protocol import FRAME_PREFIX, frame_size

__all__ = ["RECEIVE_BYTES", "FrameTooLargeError", "Frames"]

RECEIVE_BYTES: Final = 1 << 20  # at most this much per receive: a large Produce in a few calls
_HEAD_AFTER_SIZE: Final = 8  # api key, api version, correlation id: enough to refuse a request


class FrameTooLargeError(Exception):
    """A frame announces more than the limit; ``size`` is what it announced."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class Frames:
    """The bytes received and not yet taken as frames."""

    __slots__ = ("_buffer", "_max_bytes")

    def __init__(self, max_bytes: int) -> None:
        self._buffer = bytearray()
        self._max_bytes = max_bytes

    @property
    def empty(self) -> bool:
        """True between requests: nothing of a next frame has arrived."""
        return not self._buffer

    @property
    def buffered_bytes(self) -> int:
        """How many bytes are received and not yet taken as frames."""
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        """Add received bytes."""
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """The next whole frame's message (the size prefix taken off), or None until more arrives.

        ProtocolError for a size shorter than a request header; FrameTooLargeError for one over the
        limit (the frame is not read; ``refusal_head`` waits for its first bytes)."""
        buffer = self._buffer
        if len(buffer) < FRAME_PREFIX:
            return None
        size = frame_size(bytes(buffer[:FRAME_PREFIX]))
        if size > self._max_bytes:
            raise FrameTooLargeError(size)
        end = FRAME_PREFIX + size
        if len(buffer) < end:
            return None
        with memoryview(buffer) as view:  # one copy of the frame (a bytearray slice and bytes() made two)
            message = view[FRAME_PREFIX:end].tobytes()
        del buffer[:end]  # from the front of a bytearray: no copy of what follows
        return message

    def refusal_head(self) -> bytes | None:
        """The api key, version and correlation id of the frame too large to read, once they are in
        (None until then): enough to answer it with an error."""
        if len(self._buffer) < FRAME_PREFIX + _HEAD_AFTER_SIZE:
            return None
        return bytes(self._buffer[FRAME_PREFIX : FRAME_PREFIX + _HEAD_AFTER_SIZE])
