"""Splitting one connection's bytes into request frames, without I/O.

The server feeds it whatever a receive returned (part of a frame, or several frames a client
pipelined) and takes whole frames out; one receive of ``receive_bytes()`` then serves every request
it holds. A frame is the i32 size and that many bytes (``wire/protocol.py``); the size is checked
as soon as its four bytes are in, so a request over the limit is refused before its body is read.
"""

from __future__ import annotations

import struct
from typing import Final

from .protocol import FRAME_PREFIX, frame_size

__all__ = ["LARGE_RECEIVE_BYTES", "RECEIVE_BYTES", "FrameTooLargeError", "Frames"]

# A receive allocates the whole size it asks for, then shrinks it to what came. 64 KiB stays under
# glibc's mmap threshold (128 KiB): a 1 MiB buffer is mmapped, and once one is freed glibc raises its
# threshold and takes every later one from the heap, whose shrunk ends fragment it, so a gateway
# answering 100 clients on Trio held 5-7 MiB more after a few dozen rounds than after the first ones.
RECEIVE_BYTES: Final = 1 << 16  # a receive's size, between requests and for small frames
LARGE_RECEIVE_BYTES: Final = 1 << 20  # at most this much while a large frame comes: a large Produce in a few calls
_HEAD_AFTER_SIZE: Final = 8  # api key, api version, correlation id: enough to refuse a request
_SIZE: Final = struct.Struct(">i")
_SMALLEST_FRAME: Final = FRAME_PREFIX + 10  # the size and the fixed part of a request header


class FrameTooLargeError(Exception):
    """A frame announces more than the limit; ``size`` is what it announced."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class Frames:
    """The bytes received and not yet taken as frames."""

    __slots__ = ("_buffer", "_max_bytes", "_whole")

    def __init__(self, max_bytes: int) -> None:
        self._buffer = bytearray()
        self._max_bytes = max_bytes
        # A receive that brought exactly one whole frame, nothing buffered before it (the usual
        # case of a client awaiting each answer): kept as received, so the frame's message is one
        # copy of it instead of a pass through the buffer (an append, two slices, a delete).
        self._whole: bytes | None = None

    @property
    def empty(self) -> bool:
        """True between requests: nothing of a next frame has arrived."""
        return self._whole is None and not self._buffer

    @property
    def buffered_bytes(self) -> int:
        """How many bytes are received and not yet taken as frames."""
        return len(self._buffer) + (0 if self._whole is None else len(self._whole))

    def feed(self, data: bytes) -> None:
        """Add received bytes."""
        if self._whole is None and not self._buffer and len(data) >= _SMALLEST_FRAME:
            size = _SIZE.unpack_from(data)[0]
            if len(data) == FRAME_PREFIX + size and size <= self._max_bytes:
                self._whole = data
                return
        if self._whole is not None:  # (a receive after a whole frame not taken yet: keep the order)
            self._buffer += self._whole
            self._whole = None
        self._buffer += data

    def receive_bytes(self) -> int:
        """How much the next receive should ask for: ``RECEIVE_BYTES``, or what a larger frame in
        progress still lacks, up to ``LARGE_RECEIVE_BYTES``."""
        buffer = self._buffer
        if self._whole is not None or len(buffer) < FRAME_PREFIX:
            return RECEIVE_BYTES
        missing: int = FRAME_PREFIX + _SIZE.unpack_from(buffer)[0] - len(buffer)
        return min(max(missing, RECEIVE_BYTES), LARGE_RECEIVE_BYTES)

    def next_frame(self) -> bytes | None:
        """The next whole frame's message (the size prefix taken off), or None until more arrives.

        ProtocolError for a size shorter than a request header; FrameTooLargeError for one over the
        limit (the frame is not read; ``refusal_head`` waits for its first bytes)."""
        whole = self._whole
        if whole is not None:
            self._whole = None
            return whole[FRAME_PREFIX:]
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
        assert self._whole is None  # a frame over the limit is never kept whole
        if len(self._buffer) < FRAME_PREFIX + _HEAD_AFTER_SIZE:
            return None
        return bytes(self._buffer[FRAME_PREFIX : FRAME_PREFIX + _HEAD_AFTER_SIZE])
