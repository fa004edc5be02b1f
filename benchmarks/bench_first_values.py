"""Bytes a new stream's first values take, pushed one at a time, with and without compression.

    python benchmarks/bench_first_values.py [--count 1000]

A compressed stream has no dictionary until it has seen 2,000 values, so its first values are the
ones this measures: the JSON order events of bench_compression.py, each pushed with ``push`` and a
distinct key, into a fresh stream of one partition. It prints the bytes of the segments' records
(``.data``) and of every file of the stream (their sizes, not blocks: a few hundred KiB are a handful
of 4 KiB blocks either way).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import anyio

import adiskq
from adiskq._sansio.core import CORE_DESCRIPTION

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_compression import keys, order_events


def file_bytes(path: str, suffix: str = "") -> int:
    """The sizes of the stream's files (those ending with ``suffix``) added up."""
    total = 0
    for folder, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(folder, name)) for name in files if name.endswith(suffix))
    return total


async def first_values(path: str, count: int, compressed: bool) -> tuple[int, int]:
    values, names = order_events(count), keys(count)
    settings = {"compression": "zstd"} if compressed else {}
    async with adiskq.Producer(path, partitions=1, **settings) as producer:  # type: ignore[arg-type]
        for value, name in zip(values, names, strict=True):
            await producer.push(value, key=name)
    return file_bytes(path, ".data"), file_bytes(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    count = parser.parse_args().count
    values = order_events(count)
    print(f"core: {CORE_DESCRIPTION}; {count:,} JSON order events, {sum(map(len, values)) / count:.1f} bytes a value")
    with tempfile.TemporaryDirectory() as root:
        for compressed in (False, True):
            path = os.path.join(root, "zstd" if compressed else "plain")
            data, stream = anyio.run(first_values, path, count, compressed)
            label = "compression=zstd" if compressed else "uncompressed"
            print(f"{label:>17}: .data {data:,} bytes ({data / count:.1f} a message), all files {stream:,} bytes")


if __name__ == "__main__":
    main()
