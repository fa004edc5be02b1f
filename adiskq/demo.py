"""The demo `./scripts/demo` runs: an embedded default stream, written and read back.

python -m adiskq.demo [PATH]    # PATH defaults to ./demo-stream
"""

from __future__ import annotations

import os
import sys

import anyio

import adiskq

DEFAULT_STREAM = "demo-stream"


async def produce(path: str) -> list[adiskq.Receipt]:
    """Push a few orders for three customers: each customer's orders land on one partition."""
    async with adiskq.Producer(path, partitions=3) as producer:
        receipts = []
        for i in range(9):
            customer = f"customer-{i % 3:02d}"
            receipt = await producer.push(f"order {i}".encode(), key=customer, headers={"type": b"created"})
            print(f"pushed order {i} for {customer} -> partition {receipt.partition}, offset {receipt.offset}")
            receipts.append(receipt)
        more = await producer.push_many([adiskq.Record(f"bulk {i}".encode(), key="customer-00") for i in range(3)])
        print(f"pushed 3 more in one batch -> {[tuple(r) for r in more]}")
        return receipts + more


def main(argv: list[str] | None = None) -> int:
    """Produce, read one message back, print the stream's stats (last as `adiskq stats` shows them)."""
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else DEFAULT_STREAM
    receipts = anyio.run(produce, path)
    first = adiskq.read(path, *receipts[0])
    print(f"read back partition {first.partition} offset {first.offset}: {first.value!r} at {first.timestamp:%H:%M:%S}")
    stats = adiskq.stats(path)
    for p in stats.partitions:
        held = f"offsets {p.oldest_offset}..{p.next_offset - 1}" if p.message_count else "empty"
        print(f"partition {p.partition}: {held}, {p.size_bytes} bytes on disk")
    print(f"stream at {os.path.abspath(path)}: {stats.message_count} messages")
    # The same view an operator gets from the command line.
    from adiskq.cli.stats import print_stats

    print(f"\n$ adiskq stats {path}")
    sys.stdout.flush()
    print_stats(stats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
