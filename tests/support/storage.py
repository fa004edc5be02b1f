"""Helpers shared by the storage layer's tests: write records, read them back, snapshot files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

import adiskq
from adiskq._sansio.codec import encode_record
from adiskq._sansio.values import Message, RecoveryReport
from adiskq._storage.partition_reader import PartitionReader
from adiskq._storage.partition_writer import PartitionWriter
from adiskq._storage.stream import StreamWriter

Fields = tuple[bytes, bytes, int, dict[str, bytes]]  # value, key, timestamp_ns, headers


def fields(count: int, start: int = 0) -> list[Fields]:
    """``count`` varied records: growing values, a key, a timestamp, and headers on every third."""
    return [
        (
            b"value-%d-" % i + b"x" * (i % 7),
            b"key-%d" % (i % 5),
            1_000_000 + i * 10,
            {"n": b"%d" % i} if i % 3 == 0 else {},
        )
        for i in range(start, start + count)
    ]


def encode(batch: Iterable[Fields]) -> tuple[list[bytes], list[int]]:
    """The encoded records and their timestamps, as the storage layer's append takes them."""
    records, stamps = [], []
    for value, key, timestamp_ns, headers in batch:
        records.append(encode_record(value, key, timestamp_ns, headers))
        stamps.append(timestamp_ns)
    return records, stamps


def append(partition: PartitionWriter, batch: list[Fields]) -> int:
    """Append one batch; returns the first offset."""
    return partition.append(*encode(batch))


def expected_messages(batch: list[Fields], partition: int = 0, first_offset: int = 0) -> list[Message]:
    """The messages a reader should see for ``batch``."""
    return [
        Message(partition, first_offset + i, ts, key, value, hdrs) for i, (value, key, ts, hdrs) in enumerate(batch)
    ]


def read_all(directory: str, partition: int = 0, start: int | None = None) -> list[Message]:
    """Everything a reader sees in a partition folder, from ``start`` (the oldest offset by default)."""
    reader = PartitionReader(directory, partition)
    offset = reader.bounds()[0] if start is None else start
    messages: list[Message] = []
    with reader.cursor(offset) as cursor:
        while batch := cursor.read(7):
            messages.extend(batch)
    return messages


def write_stream(path: str, batches: list[list[Fields]], **options: object) -> None:
    """Create (or open) a stream and append ``batches`` to partition 0, then close it cleanly."""
    writer = StreamWriter.open(path, **options)  # type: ignore[arg-type]
    try:
        for batch in batches:
            append(writer.partitions[0], batch)
    finally:
        writer.close()


def snapshot(path: str) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under ``path``, by relative path."""
    tree: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(path):
        for name in dirs:
            tree[os.path.relpath(os.path.join(root, name), path)] = None
        for name in files:
            full = os.path.join(root, name)
            with open(full, "rb") as file:
                tree[os.path.relpath(full, path)] = file.read()
    return tree


def reopen(stream: str) -> RecoveryReport:
    """Open the stream as a producer and close it again; returns what recovery reported."""
    writer = StreamWriter.open(stream)
    try:
        return writer.recovery
    finally:
        writer.close()


def open_descriptors(folder: str) -> int:
    """This process's descriptors of files under ``folder`` (other tests' threads may open and
    close descriptors of their own meanwhile: only these count)."""
    folder = os.path.realpath(folder) + os.sep
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed since the listing
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(folder)
    return count


def partition_values(path: str, partition: int) -> list[bytes]:
    """Every value of one partition of the stream at ``path``, in offset order."""
    stats = adiskq.stats(path).partitions[partition]
    return [adiskq.read(path, partition, offset).value for offset in range(stats.oldest_offset, stats.next_offset)]
