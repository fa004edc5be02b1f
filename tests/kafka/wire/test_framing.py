"""Splitting a connection's bytes into request frames, without I/O: how much each receive asks for."""

from __future__ import annotations

import struct

from adiskq.kafka.wire.framing import LARGE_RECEIVE_BYTES, RECEIVE_BYTES, Frames


def frame(size: int) -> bytes:
    """A request frame of ``size`` bytes after its size prefix (a header's worth of zeros, then filler)."""
    return struct.pack(">i", size) + bytes(size)


def test_a_receive_asks_for_64_kib_unless_a_larger_frame_in_progress_lacks_more() -> None:
    """Between requests and within small frames a receive asks for 64 KiB (under the allocator's mmap
    threshold); while a larger frame comes, for what it still lacks, up to 1 MiB."""
    frames = Frames(100 * 2**20)
    assert frames.receive_bytes() == RECEIVE_BYTES == 64 * 1024  # nothing received yet
    frames.feed(frame(20)[:2])  # not even the size yet
    assert frames.receive_bytes() == RECEIVE_BYTES
    frames.feed(frame(20)[2:10])
    assert frames.receive_bytes() == RECEIVE_BYTES  # 14 bytes lacking
    frames.feed(frame(20)[10:])
    assert frames.next_frame() == bytes(20)
    assert frames.empty

    large = frame(300 * 1024)
    frames.feed(large[:1000])
    assert frames.receive_bytes() == len(large) - 1000
    frames.feed(large[1000 : len(large) - 10])
    assert frames.receive_bytes() == RECEIVE_BYTES  # 10 bytes lacking
    frames.feed(large[len(large) - 10 :])
    assert frames.next_frame() == large[4:]

    frames.feed(frame(5 * 2**20)[:100])
    assert frames.receive_bytes() == LARGE_RECEIVE_BYTES == 2**20
