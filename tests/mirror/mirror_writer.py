"""A writer process of the mirror's crash tests: ``python mirror_writer.py STREAM WRITER COUNT SECONDS``.

Pushes COUNT messages ``b"WRITER:SEQ"`` with the key ``k{SEQ % 16}`` to STREAM as a shared producer
(beside the other writers), in batches of 50 spread over about SECONDS, so that the mirror ships
while they come; a key's messages from one writer are in SEQ order.
"""

from __future__ import annotations

import sys
import time

import anyio

import adiskq


async def main(stream: str, writer: str, count: int, seconds: float) -> None:
    started = time.monotonic()
    async with adiskq.Producer(stream, shared=True) as producer:
        for first in range(0, count, 50):
            # The pace: batch number first/50 is due at its share of SECONDS.
            await anyio.sleep(max(0.0, started + seconds * first / count - time.monotonic()))
            await producer.push_many(
                [
                    adiskq.Record(b"%s:%d" % (writer.encode(), seq), key=f"k{seq % 16}")
                    for seq in range(first, min(first + 50, count))
                ]
            )


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
