"""A consumer (or a named group) in its own process, noting each message it reads.

    python -m tests.support.follower PATH BACKEND OUTPUT consumer PARTITION
    python -m tests.support.follower PATH BACKEND OUTPUT group NAME PARTITIONS

It prints ``ready`` once reading, then appends a line ``partition offset value`` per message to
OUTPUT (a file, so the parent never has to drain a pipe while it works). It stops after a message
whose value starts with ``STOP`` (a consumer), or after one on each of PARTITIONS partitions (a
group, which commits every message once it has noted it).
"""

from __future__ import annotations

import sys
from typing import TextIO

import anyio

import adiskq


def note(output: TextIO, message: adiskq.Message) -> None:
    output.write(f"{message.partition} {message.offset} {message.value.decode()}\n")
    output.flush()


async def consumer(path: str, output: TextIO, partition: int) -> None:
    async with adiskq.Consumer(path, partition, start="oldest") as reader:
        print("ready", flush=True)
        async for message in reader:
            note(output, message)
            if message.value.startswith(b"STOP"):
                return


async def group(path: str, output: TextIO, name: str, partitions: int) -> None:
    stopped: set[int] = set()
    async with adiskq.ConsumerGroup(path, name=name, commit_interval=0.05) as members:
        print("ready", flush=True)
        async for message in members:
            note(output, message)
            members.commit(message)
            if message.value.startswith(b"STOP"):
                stopped.add(message.partition)
                if len(stopped) == partitions:
                    return


if __name__ == "__main__":
    path, backend, output_path, kind = sys.argv[1:5]
    with open(output_path, "a") as output:
        if kind == "consumer":
            anyio.run(consumer, path, output, int(sys.argv[5]), backend=backend)
        else:
            anyio.run(group, path, output, sys.argv[5], int(sys.argv[6]), backend=backend)
