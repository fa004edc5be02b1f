"""A producer that pushes messages under a few repeating keys and prints each receipt, until killed.

    python -m tests.support.keyed_producer PATH ROUND

Each line is ``partition offset key value``, printed once its push returned. Small segments make
it roll often, so a kill can land anywhere: in a write, a seal, or between them.
"""

from __future__ import annotations

import sys

import anyio

import adiskq

KEYS = [f"key-{i}" for i in range(7)]


async def main(path: str, round_: int) -> None:
    async with adiskq.Producer(path, partitions=2, segment_size_bytes=4096) as producer:
        print("open", flush=True)
        sequence = 0
        while True:
            value = f"r{round_}-s{sequence}"
            if sequence % 3 == 2:
                records = [adiskq.Record(f"{value}-b{i}".encode(), key=KEYS[(sequence + i) % 7]) for i in range(5)]
                for record, (partition, offset) in zip(records, await producer.push_many(records), strict=True):
                    sys.stdout.write(f"{partition} {offset} {record.key} {record.value.decode()}\n")
            else:
                key = KEYS[sequence % 7]
                partition, offset = await producer.push(value.encode(), key=key)
                sys.stdout.write(f"{partition} {offset} {key} {value}\n")
            sys.stdout.flush()
            sequence += 1


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
