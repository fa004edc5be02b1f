"""A shared producer that prints each receipt once its push returned, until it is killed or done.

    python -m tests.support.shared_producer PATH FLUSH BACKEND NAME [COUNT]

Each line is ``partition offset value``; the value names the writer, its task and a sequence number,
and the key is the task's (so the parent can check each producer's order per key). With COUNT, each
task pushes that many messages and the producer closes cleanly and prints ``done``.
"""

from __future__ import annotations

import faulthandler
import signal
import sys

import anyio

import adiskq


async def main(path: str, flush: str, name: str, count: int | None) -> None:
    async with adiskq.Producer(
        path,
        partitions=3,
        flush=flush,  # type: ignore[arg-type]
        segment_size_bytes=4096,
        shared=True,
        lock_timeout=30,
    ) as producer:
        print("open", flush=True)

        async def pusher(task: int) -> None:
            sequence = 0
            key = f"{name}-t{task}"
            while count is None or sequence < count:
                value = f"{name}-t{task}-s{sequence}"
                if sequence % 7 == 6:
                    records = [adiskq.Record(f"{value}-b{i}".encode(), key=key) for i in range(3)]
                    receipts = await producer.push_many(records)
                    lines = [f"{p} {o} {value}-b{i}\n" for i, (p, o) in enumerate(receipts)]
                    sys.stdout.write("".join(lines))
                else:
                    partition, offset = await producer.push(value.encode(), key=key)
                    sys.stdout.write(f"{partition} {offset} {value}\n")
                sys.stdout.flush()
                sequence += 1

        async with anyio.create_task_group() as group:
            for task in range(3):
                group.start_soon(pusher, task)
    print("done", flush=True)


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stack dump on demand, for a hung test
    path, flush, backend, name = sys.argv[1:5]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else None
    anyio.run(main, path, flush, name, count, backend=backend)
