"""A producer that prints each receipt once its push returned, until it is killed.

    python -m tests.support.crash_producer PATH FLUSH BACKEND ROUND

Each line is ``partition offset value``; the value names the round, task and sequence number, so the
parent can check that what it saw acknowledged reads back, once.
"""

from __future__ import annotations

import sys

import anyio

import adiskq


async def main(path: str, flush: str, round_: int) -> None:
    async with adiskq.Producer(path, partitions=3, flush=flush, segment_size_bytes=8192) as producer:  # type: ignore[arg-type]
        print("open", flush=True)

        async def pusher(task: int) -> None:
            sequence = 0
            while True:
                value = b"r%d-t%d-s%d" % (round_, task, sequence)
                if sequence % 5 == 4:
                    receipts = await producer.push_many(
                        [adiskq.Record(value + b"-b%d" % i, key=value) for i in range(3)]
                    )
                    for i, (partition, offset) in enumerate(receipts):
                        sys.stdout.write(f"{partition} {offset} {value.decode()}-b{i}\n")
                else:
                    partition, offset = await producer.push(value, key=value)
                    sys.stdout.write(f"{partition} {offset} {value.decode()}\n")
                sys.stdout.flush()
                sequence += 1

        async with anyio.create_task_group() as group:
            for task in range(4):
                group.start_soon(pusher, task)


if __name__ == "__main__":
    path, flush, backend, round_ = sys.argv[1:5]
    anyio.run(main, path, flush, int(round_), backend=backend)
