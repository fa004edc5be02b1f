"""A Trio (or asyncio) service that speaks Kafka: the gateway and a library consumer in one nursery.

Kafka clients produce to the ``orders`` topic through the embedded gateway; the service's own
consumer reads the same stream as adiskq messages, and prints them.

    python examples/kafka_gateway.py --root /tmp/streams --port 9092
    echo 'customer-00:{"id": 1}' | kcat -b 127.0.0.1:9092 -P -t orders -K:
"""

from __future__ import annotations

import argparse
import os

import anyio

import adiskq
from adiskq.kafka import KafkaGateway


async def serve(root: str, port: int, count: int | None) -> None:
    """Serve Kafka clients and print what they produce to ``orders`` (``count`` messages, or forever)."""
    os.makedirs(root, exist_ok=True)
    async with adiskq.Producer(os.path.join(root, "orders")):
        pass  # the topic exists before the first client asks for it
    async with KafkaGateway(root, port=port, flush="sync") as gateway:
        print(f"Kafka clients: bootstrap.servers=127.0.0.1:{gateway.port}", flush=True)
        seen = 0
        async with adiskq.Consumer(os.path.join(root, "orders")) as orders:
            async for message in orders:
                print(f"order {message.offset}: key={message.key.decode()} value={message.value.decode()}", flush=True)
                seen += 1
                if count is not None and seen >= count:
                    break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="/tmp/streams", help="the folder whose streams are served")
    parser.add_argument("--port", type=int, default=9092, help="0 picks a free port")
    parser.add_argument("--count", type=int, default=None, help="stop after this many orders")
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    args = parser.parse_args()
    anyio.run(serve, args.root, args.port, args.count, backend=args.backend)


if __name__ == "__main__":
    main()
