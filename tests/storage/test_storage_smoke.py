"""The storage layer's basic round trip."""

from __future__ import annotations

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter


def test_appended_messages_read_back(stream_path: str) -> None:
    """What a writer appends, the sync API reads back by partition and offset."""
    writer = StreamWriter.open(stream_path, partitions=2)
    try:
        writer.partitions[1].append([encode_record(b"hello", b"k", 7)], [7])
    finally:
        writer.close()
    message = adiskq.read(stream_path, 1, 0)
    assert (message.partition, message.offset, message.key, message.value, message.timestamp_ns) == (
        1,
        0,
        b"k",
        b"hello",
        7,
    )
