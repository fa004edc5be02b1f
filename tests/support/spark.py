"""Helpers for the Spark tests: streams written through the storage layer, read back without Spark."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence

from adiskq._sansio.codec import encode_record
from adiskq._sansio.naming import partition_for_key
from adiskq._sansio.values import Message
from adiskq._storage.stream import StreamReader, StreamWriter

T0_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def write_messages(
    path: str,
    messages: Iterable[tuple[int, bytes, bytes, int, Mapping[str, bytes] | None]],
    *,
    partitions: int = 2,
    segment_size_bytes: int | None = None,
) -> None:
    """Append ``(partition, key, value, timestamp_ns, headers)`` messages, one append each."""
    writer = StreamWriter.open(path, partitions=partitions, segment_size_bytes=segment_size_bytes)
    try:
        for partition, key, value, timestamp_ns, headers in messages:
            writer.partitions[partition].append([encode_record(value, key, timestamp_ns, headers)], [timestamp_ns])
    finally:
        writer.close()


def fill(path: str, counts: Sequence[int], *, segment_size_bytes: int | None = None) -> None:
    """``counts[p]`` messages in each partition p: key ``k<p>-<i>``, value ``v<p>-<i>``, 1 ms apart."""
    write_messages(
        path,
        (
            (p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), T0_NS + i * 1_000_000, None)
            for p, count in enumerate(counts)
            for i in range(count)
        ),
        partitions=len(counts),
        segment_size_bytes=segment_size_bytes,
    )


def read_all(path: str) -> list[Message]:
    """Every message of every partition, in partition then offset order."""
    stream = StreamReader.open(path)
    messages: list[Message] = []
    for number in range(stream.partition_count):
        with stream.partition(number).cursor(0) as cursor:
            while batch := cursor.read(10_000):
                messages.extend(batch)
    return messages


def placed_correctly(messages: Iterable[Message], partition_count: int) -> bool:
    """True if every message sits in the partition its key maps to."""
    return all(m.partition == partition_for_key(bytes(m.key), partition_count) for m in messages)


def data_files(path: str, partition: int) -> list[str]:
    """The ``.data`` files of a partition, oldest first."""
    directory = os.path.join(path, "parts", f"{partition:06d}")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".data"))


def delete_oldest_segment(path: str) -> int:
    """Delete partition 0's oldest segment as retention would; returns the new oldest offset."""
    bases = StreamReader.open(path).partition(0).segment_bases()
    writer = StreamWriter.open(path)
    try:
        writer.delete_segments([(0, bases[0])])
    finally:
        writer.close()
    return bases[1]
