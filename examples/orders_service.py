"""One service, a stream folder or a Kafka topic: the same code, only the place changes.

    pip install -e '.[examples]'                       # and 'adiskq[kafka-cluster]' for a topic
    python examples/orders_service.py --where /tmp/orders
    python examples/orders_service.py --where kafka://127.0.0.1:9092/orders

It takes ``--orders`` orders (JSON, keyed by customer: one customer's orders keep their order),
bills them with the named consumer group "billing", committing each, and sends an order it cannot
bill (a negative amount) to the group's dead letters. It prints what it billed, what it refused and
the group's lag (0 once everything is billed). A second run bills only the new orders, as a
restarted service would. The program never asks which backend it runs on.
"""

from __future__ import annotations

import argparse
import json

import anyio

import adiskq
from adiskq.serializers import json_serializer

GROUP = "billing"


async def take_orders(where: str, count: int) -> None:
    async with adiskq.Producer(where, partitions=3, value_serializer=json_serializer) as producer:
        for number in range(count):
            customer = f"customer-{number % 7}"
            cents = -1 if number % 50 == 49 else 100 + number  # every 50th order is broken
            await producer.push({"order": number, "customer": customer, "cents": cents}, key=customer)


async def bill(where: str) -> tuple[int, int, int]:
    """Bill every order not billed yet; return (orders billed, cents billed, orders refused)."""
    billed = cents = refused = 0
    async with adiskq.ConsumerGroup(where, GROUP, end="close", value_deserializer=json.loads) as group:
        async for message in group:
            order = message.value
            if order["cents"] < 0:
                await group.dead_letter(message, reason="a negative amount")  # counted as processed
                refused += 1
                continue
            billed += 1
            cents += order["cents"]
            group.commit(message)
    return billed, cents, refused


async def main(where: str, orders: int) -> None:
    await take_orders(where, orders)
    billed, cents, refused = await bill(where)
    lag = await anyio.to_thread.run_sync(adiskq.lag, where, GROUP)
    print(f"billed {billed} orders, {cents} cents; refused {refused}; lag {sum(lag.values())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--where", required=True, help="a stream's folder, or kafka://HOST:PORT/TOPIC")
    parser.add_argument("--orders", type=int, default=200)
    arguments = parser.parse_args()
    anyio.run(main, arguments.where, arguments.orders)
