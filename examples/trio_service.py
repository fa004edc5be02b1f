"""A Trio service on an adiskq stream: one nursery runs a producer, a consumer group and periodic stats.

    pip install -e '.[examples]'
    python examples/trio_service.py --stream /tmp/adiskq-orders --orders 1000

An "orders" task pushes orders (keyed by customer, so one customer's orders keep their order); a
"billing" consumer group bills each one and commits it; a "stats" task prints the stream's offsets
and the group's progress every --stats-interval seconds. The group is named, so a second run bills
only the orders it has not billed yet, as a restarted service would. The consumer group lives in the
producer's process, so it is woken directly by each push, without waiting for inotify.
"""

from __future__ import annotations

import argparse
import json
import os
import random

import trio

import adiskq

GROUP = "billing"


async def take_orders(producer: adiskq.Producer, count: int, interval: float) -> None:
    """Push ``count`` orders, one every ``interval`` seconds."""
    customers = [f"customer-{n:02d}" for n in range(20)]
    for number in range(count):
        customer = random.choice(customers)
        order = {"order": number, "customer": customer, "cents": random.randint(100, 10_000)}
        await producer.push(json.dumps(order).encode(), key=customer, headers={"type": b"order"})
        await trio.sleep(interval)


async def bill(path: str, count: int) -> int:
    """Bill orders from the named group until ``count`` are billed; return the cents billed."""
    billed = total_cents = 0
    async with adiskq.ConsumerGroup(path, name=GROUP, start="oldest") as group:
        async for message in group:
            order = json.loads(message.value)
            total_cents += order["cents"]
            billed += 1
            group.commit(message)  # billed: after a restart, the group starts after this message
            if billed == count:
                break
    return total_cents


async def report(path: str, interval: float) -> None:
    """Print how far the stream and the billing group are, every ``interval`` seconds."""
    while True:
        await trio.sleep(interval)
        stats = await trio.to_thread.run_sync(adiskq.stats, path)
        written = sum(p.next_offset for p in stats.partitions)
        committed = sum(stats.groups.get(GROUP, {}).values())
        print(f"stats: {written} orders in {len(stats.partitions)} partitions, {committed} billed (committed)")


async def main(path: str, orders: int, interval: float, stats_interval: float) -> None:
    async with adiskq.Producer(path, partitions=4) as producer, trio.open_nursery() as nursery:
        nursery.start_soon(report, path, stats_interval)
        nursery.start_soon(take_orders, producer, orders, interval)
        cents = await bill(path, orders)
        print(f"billed {orders} orders, {cents / 100:,.2f} in all")
        nursery.cancel_scope.cancel()  # the orders are all billed: stop the stats task
    # Leaving the group and the producer stored the group's commits and fsynced the stream.
    stats = adiskq.stats(path)
    print(f"done: group {GROUP!r} committed {stats.groups[GROUP]}, stream ends at "
          f"{ {p.partition: p.next_offset for p in stats.partitions} }")  # fmt: skip


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stream", default="./orders-stream", help="the stream's folder (created if missing)")
    parser.add_argument("--orders", type=int, default=1000, help="orders to take and bill")
    parser.add_argument("--interval", type=float, default=0.002, help="seconds between two orders")
    parser.add_argument("--stats-interval", type=float, default=1.0, help="seconds between two stats lines")
    args = parser.parse_args()
    trio.run(main, os.path.abspath(args.stream), args.orders, args.interval, args.stats_interval)


if __name__ == "__main__":
    cli()
