"""The demo `./scripts/demo` runs: write to an embedded default stream, read it back, show stats."""

from __future__ import annotations

import os
import sys
import time

from . import read, stats
from ._sansio.codec import encode_record
from ._storage.stream import StreamWriter

DEFAULT_STREAM = "demo-stream"


def main(argv: list[str] | None = None) -> int:
    """Write a few messages, read one back, print the stream's stats."""
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else DEFAULT_STREAM
    writer = StreamWriter.open(path, partitions=3)
    try:
        for i in range(9):
            key = f"customer-{i % 3:02d}".encode()
            partition = writer.partitions[i % 3]
            now = time.time_ns()
            offset = partition.append([encode_record(f"order {i}".encode(), key, now)], [now])
            print(f"pushed order {i} -> partition {partition.partition} offset {offset}")
    finally:
        writer.close()
    print("read back:", read(path, 0, 0))
    for p in stats(path).partitions:
        print(f"partition {p.partition}: offsets {p.oldest_offset}..{p.next_offset - 1}, {p.size_bytes} bytes")
    print(f"stream at {os.path.abspath(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
