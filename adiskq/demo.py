"""The demo `./scripts/demo` runs: a producer and a consumer group on an embedded default stream.

    python -m adiskq.demo [PATH]    # PATH defaults to ./demo-stream

A named group, "billing", follows the producer as it pushes, woken as each message lands; run the
demo again and the group resumes after what it committed the first time. It ends with the stream's
stats as ``adiskq stats`` shows them.
"""

from __future__ import annotations

import os
import sys

import anyio

import adiskq

DEFAULT_STREAM = "demo-stream"


async def produce_and_follow(path: str) -> list[adiskq.Receipt]:
    """Push orders for three customers while the group "billing" reads them as they arrive."""
    receipts: list[adiskq.Receipt] = []
    progress = anyio.Event()

    async def follow(group: adiskq.ConsumerGroup) -> None:
        nonlocal progress
        async for message in group:
            print(f"  billing got {message.value.decode()!r:12} partition {message.partition} offset {message.offset}")
            group.commit(message)
            progress.set()
            progress = anyio.Event()

    def all_billed(group: adiskq.ConsumerGroup) -> bool:
        return all(group.committed.get(partition, 0) > offset for partition, offset in receipts)

    async with (
        adiskq.Producer(path, partitions=3) as producer,
        adiskq.ConsumerGroup(path, name="billing") as group,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(follow, group)
        for i in range(9):
            customer = f"customer-{i % 3:02d}"
            receipt = await producer.push(f"order {i}".encode(), key=customer, headers={"type": b"created"})
            print(f"pushed order {i} for {customer} -> partition {receipt.partition}, offset {receipt.offset}")
            receipts.append(receipt)
            await anyio.sleep(0.01)  # a little pacing, so the output shows the group keeping up
        batch = [adiskq.Record(f"bulk {i}".encode(), key="customer-00") for i in range(3)]
        more = await producer.push_many(batch)
        print(f"pushed 3 more in one batch -> {[tuple(r) for r in more]}")
        receipts.extend(more)
        with anyio.fail_after(30):
            while not all_billed(group):
                await progress.wait()
        tasks.cancel_scope.cancel()  # the group would follow forever; the demo is done
    return receipts


def main(argv: list[str] | None = None) -> int:
    """Produce while a group follows, read one message back, print the stream's stats."""
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else DEFAULT_STREAM
    receipts = anyio.run(produce_and_follow, path)
    first = adiskq.read(path, *receipts[0])
    print(f"read back partition {first.partition} offset {first.offset}: {first.value!r} at {first.timestamp:%H:%M:%S}")
    print(f"stream at {os.path.abspath(path)}")
    # The same view an operator gets from the command line.
    from adiskq.cli.stats import print_stats

    print(f"\n$ adiskq stats {path}")
    sys.stdout.flush()
    print_stats(adiskq.stats(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
