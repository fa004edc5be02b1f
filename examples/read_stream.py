"""Read a stream without an event loop: the synchronous API that scripts, tools and Spark use.

    python examples/read_stream.py STREAM_PATH

Prints each partition's extent, the first message of each, and the offset of the first message
of the last minute. Needs only read permission on the stream.
"""

from __future__ import annotations

import datetime as dt
import sys

import adiskq


def main(path: str) -> None:
    stats = adiskq.stats(path)
    owner = f"written by pid {stats.owner['pid']}" if stats.owner else "no producer open"
    print(f"{stats.path}: {len(stats.partitions)} partitions, {stats.message_count} messages, {owner}")
    minute_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    for partition in stats.partitions:
        if not partition.message_count:
            print(f"  partition {partition.partition}: empty, next offset {partition.next_offset}")
            continue
        print(f"  partition {partition.partition}: offsets {partition.oldest_offset}..{partition.next_offset - 1}")
        first = adiskq.read(path, partition.partition, partition.oldest_offset)
        print(f"    first: {first.timestamp:%Y-%m-%d %H:%M:%S} key={first.key!r} value={first.value[:40]!r}")
        recent = adiskq.offset_for_time(path, partition.partition, minute_ago)
        print(f"    first offset of the last minute: {recent}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
