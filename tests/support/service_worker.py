"""A worker of the service torture: one member of group ``ledger`` with retries and dead letters (the
example service runs a ``billing`` group of its own).

    python service_worker.py STREAM DEAD_LETTERS REPORT BACKEND

Orders whose number ends in 7 always fail (retried until ``max_attempts``, then dead-lettered),
those ending in 3 fail once (retried), the others are processed (committed). Every step is
appended to REPORT as one line, written whole by one ``write`` (a SIGKILL never tears one):

    deliver P O ATTEMPT N T        delivered (T: CLOCK_MONOTONIC seconds, comparable across processes)
    done P O ATTEMPT N             committed
    retry P O ATTEMPT N            retry() returned (at max_attempts: the dead letter was stored)
    stored {"P": next, ...} T      these commits were stored (flush() returned) by T
"""

from __future__ import annotations

import json
import os
import sys
import time

import anyio

import adiskq

MAX_ATTEMPTS = 3


async def main(stream: str, dead: str, report: str) -> None:
    fd = os.open(report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(*parts: object) -> None:
        os.write(fd, (" ".join(map(str, parts)) + "\n").encode())

    async with adiskq.ConsumerGroup(
        stream,
        "ledger",
        max_attempts=MAX_ATTEMPTS,
        dead_letter_path=dead,
        commit_interval=0.2,
        rebalance_interval=0.2,
        wait_for_stream=True,
    ) as group:

        async def store() -> None:
            while True:
                await anyio.sleep(0.2)
                committed = group.committed
                await group.flush()
                log("stored", json.dumps(committed, separators=(",", ":")), time.monotonic())

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(store)
            async for message in group:
                number = json.loads(message.value)["data"]["n"]
                where = f"{message.partition} {message.offset} {message.attempt} {number}"
                log("deliver", where, time.monotonic())
                if number.endswith("7") or (number.endswith("3") and message.attempt == 1):
                    await group.retry(message, delay=0.02, reason="declined")
                    log("retry", where)
                else:
                    group.commit(message)
                    log("done", where)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4], backend=sys.argv[4])
