"""How long a producer open takes to recover a torn record, by the record's size: the curve.

A producer killed while writing one large message leaves a torn record at the end of the active
segment; the next open checks the segment and cuts it. Two shapes of torn record, each 90% of a
record of SIZE written after one small committed message:

* ``headers``: a value whose bytes look like record headers every 8 bytes (a size field that fits,
  then the magic byte), the shape that made recovery search every candidate in it;
* ``random``: random bytes, the common case.

Beside them, ``no tear``: the same open of the same stream after a crash with no torn record (what
an open costs whatever the tear: folders, locks, fsyncs), and ``read+crc``: reading the torn bytes
and computing their CRC-32C once, which any recovery has to do at least. ``per MiB`` is what the
tear adds to the open, ``(headers - no tear) / size``: flat when recovery is linear in the bytes it
examines (it grew about threefold with each doubling when it was quadratic). Each cell is the median
of ``--runs`` opens.

    python benchmarks/bench_recovery.py            # 256 KiB .. 8 MiB, 5 runs each
    python benchmarks/bench_recovery.py --quick    # two small sizes, one run: for the test suite
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time

from adiskq._sansio.codec import encode_record
from adiskq._sansio.core import CORE_DESCRIPTION, crc32c
from adiskq._storage.stream import StreamWriter

KIB = 1024


def headers_value(size: int) -> bytes:
    """A value whose every 8 bytes are a plausible record size field (low byte 0xAD) and 4 zeros."""
    claimed = ((size // 2) & ~0xFF) | 0xAD
    unit = struct.pack("<I", claimed) + bytes(4)
    return (unit * (size // 8 + 1))[:size]


SHAPES = {"headers": headers_value, "random": os.urandom}


def torn_stream(path: str, value: bytes | None) -> str:
    """A stream with one committed message and then 90% of a record holding ``value`` (none: no
    tear); its .data path."""
    writer = StreamWriter.open(path, partitions=1)
    try:
        writer.partitions[0].append([encode_record(b"first", b"k", 1)], [1])
    finally:
        writer.close()
    data = os.path.join(path, "parts", "000000", f"{0:020d}.data")
    if value is not None:
        record = encode_record(value, b"k", 2)
        with open(data, "ab") as file:
            file.write(record[: len(record) * 9 // 10])
    os.unlink(os.path.join(path, "recovery.json"))  # as a crash leaves it: the open checks every record
    return data


def time_open(root: str, shape: str, size: int) -> float:
    """Seconds the producer open takes to recover one torn record of ``size`` bytes."""
    path = tempfile.mkdtemp(dir=root)
    try:
        torn_stream(os.path.join(path, "s"), SHAPES[shape](size) if shape in SHAPES else None)
        started = time.perf_counter()
        writer = StreamWriter.open(os.path.join(path, "s"))
        elapsed = time.perf_counter() - started
        writer.close()
        return elapsed
    finally:
        shutil.rmtree(path)


def time_read_crc(root: str, size: int) -> float:
    """Seconds to read ``size`` bytes from a file and compute their CRC-32C: one look at every byte."""
    path = os.path.join(root, "bytes")
    with open(path, "wb") as file:
        file.write(os.urandom(size))
    try:
        started = time.perf_counter()
        with open(path, "rb") as file:
            crc32c(file.read())
        return time.perf_counter() - started
    finally:
        os.unlink(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two small sizes, one run: checks the script works")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to put the streams (default: a temp folder)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: give at least 1")
    sizes = [64 * KIB, 256 * KIB] if args.quick else [256 * KIB << i for i in range(6)]  # up to 8 MiB
    runs = 1 if args.quick else args.runs
    root = tempfile.mkdtemp(dir=args.dir, prefix="bench-recovery-")
    print(f"{CORE_DESCRIPTION}; median of {runs} run(s) a cell")
    print(
        f"{'torn record':>12} {'headers ms':>11} {'random ms':>10} {'no tear ms':>11} {'read+crc ms':>12} {'per MiB':>8}"
    )
    try:
        for size in sizes:
            cells = {
                shape: statistics.median(time_open(root, shape, size) for _ in range(runs))
                for shape in (*SHAPES, "none")
            }
            peer = statistics.median(time_read_crc(root, size) for _ in range(runs))
            per_mib = (cells["headers"] - cells["none"]) / (size / KIB / KIB)
            print(
                f"{size // KIB:>8} KiB {cells['headers'] * 1e3:>11.1f} {cells['random'] * 1e3:>10.1f} "
                f"{cells['none'] * 1e3:>11.1f} {peer * 1e3:>12.2f} {per_mib * 1e3:>5.1f} ms",
                flush=True,
            )
    finally:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
