"""A member of a consumer group in its own process, for tests and benchmarks of groups across processes.

    python tests/support/group_worker.py STREAM NAME REPORT [--backend trio] [--rebalance-interval 0.2]
                                         [--batch 20] [--exclusive]

It reads the group in batches; for each batch it records the messages as processed, commits the
last one and flushes (fsynced), then records the commit as stored. Records are JSON lines appended
to REPORT, each with one ``write`` (so a reader never sees half of one), stamped with the monotonic
clock, which all processes share:

    {"event": "joined", "member": ID, "pid": PID, "t": ...}
    {"event": "assignment", "partitions": [0, 1], "t": ...}     the first, then every change
    {"event": "processed", "p": 3, "offsets": [40, 41, ...], "t": ...}
    {"event": "stored", "p": 3, "next": 60, "t": ...}          everything before 60 is committed
    {"event": "left", "t": ...}                                  after SIGTERM: closed cleanly

SIGTERM closes the group cleanly (commits stored, partitions given back); SIGKILL is a crash.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time

import anyio
import anyio.abc

import adiskq


class Report:
    """JSON lines appended to a file, one ``write`` each."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def write(self, event: str, **fields: object) -> None:
        line = json.dumps({"event": event, **fields, "t": time.monotonic()}) + "\n"
        os.write(self._fd, line.encode())


async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def report_assignments(group: adiskq.ConsumerGroup, report: Report) -> None:
    async for assignment in group.assignments():
        report.write("assignment", partitions=list(assignment))


async def work(args: argparse.Namespace, report: Report) -> None:
    async with (
        adiskq.ConsumerGroup(
            args.stream,
            name=args.name,
            exclusive=args.exclusive,
            rebalance_interval=args.rebalance_interval,
            commit_interval=3600,  # stored by flush() after every batch instead
        ) as group,
        anyio.create_task_group() as tasks,
    ):
        report.write("joined", member=group.member_id, pid=os.getpid())
        tasks.start_soon(report_assignments, group, report)
        async for batch in group.batches(max_messages=args.batch):
            partition = batch[0].partition
            report.write("processed", p=partition, offsets=[message.offset for message in batch])
            group.commit(batch[-1])
            await group.flush()
            report.write("stored", p=partition, next=batch[-1].offset + 1)


async def main(args: argparse.Namespace) -> None:
    report = Report(args.report)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stop_on_sigterm, tasks.cancel_scope)
        try:
            await work(args, report)
        finally:
            tasks.cancel_scope.cancel()
    report.write("left")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stream")
    parser.add_argument("name")
    parser.add_argument("report")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--rebalance-interval", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--exclusive", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    anyio.run(main, arguments, backend=arguments.backend)
