"""The floor under the gateway's round trip: an asyncio server that only answers, on the same sockets.

    python benchmarks/kafka/kafka_trip_floor.py     # prints "listening on 127.0.0.1:PORT" on stderr, serves

``kafka_trip_instructions.py --server floor`` starts it in place of ``adiskq serve`` and replays the
same requests. It reads each frame's size and API key and answers from bytes made once: a Metadata
with a reply of the right correlation id, a Produce with the partition's next base offset (and a
wake-up of a waiting Fetch), a Fetch with 1,100 bytes when a Produce came since its last answer, or
else later, from the Produce's callback. No decoding, no storage, no checks: what is left is the
event loop's and the kernel's work for the trip's two requests (``asyncio.Protocol`` callbacks, as
the gateway runs on asyncio), which any asyncio gateway pays before its own code.
"""

from __future__ import annotations

import asyncio
import struct
import sys

TOPIC = b"trips"
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # API key, version, correlation id
_PRODUCE, _FETCH = 0, 1
# A Produce v10 answer's bytes after the correlation id: no tagged fields, one topic (its name), one
# partition (index 0), then the error code and base offset the client reads, then zeros.
_PRODUCE_HEAD = b"\x00\x02" + bytes([len(TOPIC) + 1]) + TOPIC + b"\x02" + b"\x00" * 4
_FETCH_BODY = b"\x00" * 1100


class Floor:
    """The one topic's next offset, and the Fetch waiting for the next Produce, if any."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.produced_since_fetch = False
        self.parked: tuple[asyncio.Transport, int] | None = None


class Connection(asyncio.Protocol):
    def __init__(self, floor: Floor) -> None:
        self.floor = floor
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            size = _SIZE.unpack_from(self.buffer)[0]
            if len(self.buffer) < 4 + size:
                return
            frame, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
            self.answer(*_HEADER.unpack_from(frame))

    def answer(self, api_key: int, _version: int, correlation_id: int) -> None:
        assert self.transport is not None
        floor = self.floor
        if api_key == _PRODUCE:
            body = _PRODUCE_HEAD + struct.pack(">hq", 0, floor.next_offset) + b"\x00" * 32
            floor.next_offset += 10
            self.transport.write(_frame(correlation_id, body))
            if floor.parked is not None:
                transport, parked_id = floor.parked
                floor.parked = None
                transport.write(_frame(parked_id, _FETCH_BODY))
            else:
                floor.produced_since_fetch = True
        elif api_key == _FETCH:
            if floor.produced_since_fetch:
                floor.produced_since_fetch = False
                self.transport.write(_frame(correlation_id, _FETCH_BODY))
            else:
                floor.parked = (self.transport, correlation_id)
        else:  # Metadata and anything else: an answer of the right correlation id
            self.transport.write(_frame(correlation_id, b"\x00" * 16))


def _frame(correlation_id: int, body: bytes) -> bytes:
    return _SIZE.pack(4 + len(body)) + _SIZE.pack(correlation_id) + body


async def serve() -> None:
    floor = Floor()
    server = await asyncio.get_running_loop().create_server(lambda: Connection(floor), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve())
