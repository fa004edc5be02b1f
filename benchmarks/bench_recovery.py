"""How long a producer open takes to recover a torn record, by the record's size: the curve.

A producer killed while writing one large message leaves a torn record at the end of the active
segment; the next open checks the segment and cuts it. Two shapes of torn record, each 90% of a
record of SIZE written after one small committed message:

* ``headers``: a value whose bytes look like record headers every 8 bytes (a size field that fits,
  then the magic byte), the shape that made recovery search every candidate in it;
* ``random``: random bytes, the common case.

Beside them, ``no tear``: the same open of the same stream after a crash with no torn record (what
an open costs whatever the tear: folders, locks, fsyncs, which vary most on a busy machine), and
``read+crc``: reading the torn bytes and computing their CRC-32C once, which any recovery has to do at
least. ``scan``: the part that depends on the tear, recovery's decision alone (``plan_segment`` on
the segment's bytes, no I/O) for the ``headers`` shape: it grows with the size when recovery is
linear in the bytes it examines (it grew about threefold with each doubling when it was quadratic).
Each cell is the best of ``--runs`` (the machine's other work only ever adds time).

    python benchmarks/bench_recovery.py            # 256 KiB .. 8 MiB, 5 runs each
    python benchmarks/bench_recovery.py --max-kib 1024 --runs 1   # a shorter curve
    python benchmarks/bench_recovery.py --quick    # two small sizes, one run: for the test suite
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
import time

from adiskq._sansio.codec import encode_record
from adiskq._sansio.core import CORE_DESCRIPTION, crc32c
from adiskq._storage.stream import StreamWriter

try:
    from adiskq._storage.recovery_plan import plan_segment
except ImportError:  # the code before recovery decided in one step: only the opens are timed
    plan_segment = None

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


def time_scan(root: str, size: int) -> float | None:
    """Seconds recovery takes to decide what to do with a torn ``headers`` record of ``size`` bytes."""
    if plan_segment is None:
        return None
    path = os.path.join(tempfile.mkdtemp(dir=root), "s")
    try:
        data_path = torn_stream(path, headers_value(size))
        data, index, timeindex = (read(data_path[: -len("data")] + name) for name in ("data", "index", "timeindex"))
        started = time.perf_counter()
        plan_segment(data, index, timeindex, 0, 8 << 20)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(os.path.dirname(path))


def read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


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
    parser.add_argument("--max-kib", type=int, default=8192, help="the largest torn record, in KiB (default 8 MiB)")
    parser.add_argument("--dir", default=None, help="where to put the streams (default: a temp folder)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: give at least 1")
    sizes = [64 * KIB, 256 * KIB] if args.quick else [256 * KIB << i for i in range(16) if 256 << i <= args.max_kib]
    runs = 1 if args.quick else args.runs
    root = tempfile.mkdtemp(dir=args.dir, prefix="bench-recovery-")
    print(f"{CORE_DESCRIPTION}; the best of {runs} run(s) a cell")
    print(
        f"{'torn record':>12} {'headers ms':>11} {'random ms':>10} {'no tear ms':>11} {'read+crc ms':>12} {'scan ms':>8}"
    )
    try:
        for size in sizes:
            cells = {shape: min(time_open(root, shape, size) for _ in range(runs)) for shape in (*SHAPES, "none")}
            peer = min(time_read_crc(root, size) for _ in range(runs))
            scans = [time_scan(root, size) for _ in range(runs)]
            scan = "—" if scans[0] is None else f"{min(t for t in scans if t is not None) * 1e3:.2f}"
            print(
                f"{size // KIB:>8} KiB {cells['headers'] * 1e3:>11.1f} {cells['random'] * 1e3:>10.1f} "
                f"{cells['none'] * 1e3:>11.1f} {peer * 1e3:>12.2f} {scan:>8}",
                flush=True,
            )
    finally:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
