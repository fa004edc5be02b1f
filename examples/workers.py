"""Event-driven workers: processes sharing one named consumer group over a partitioned stream.

    pip install -e '.[examples]'
    python examples/workers.py --stream /tmp/adiskq-jobs --workers 3 --partitions 6 --jobs 3000

The supervisor (this program) owns the producer and pushes jobs, keyed by account, so each
account's jobs stay in order in one partition. It starts ``--workers`` worker processes (this
program again, ``worker`` subcommand). Each opens ``ConsumerGroup(stream, name="workers")``: the
members of the group share the partitions, each handling its share (``group.assignment``), and
commit what they handled. Partway through, the supervisor kills one worker with SIGKILL — no
goodbye, no final commit — and the others take over its partitions and go on. At the end every job
has been handled; the few the dead worker had handled but not yet committed are handled again by
their new owner: delivery is at least once, so handlers should be idempotent.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable

import anyio
import anyio.abc
import anyio.to_thread

import adiskq

GROUP = "workers"
SCRIPT = os.path.abspath(__file__)


# -- a worker --------------------------------------------------------------------------------------


async def run_worker(stream: str, name: str) -> None:
    """Handle jobs from the shared group until SIGTERM; print each assignment and each handled job."""

    def say(event: dict[str, object]) -> None:
        print(json.dumps({"worker": name, **event}), flush=True)

    async with adiskq.ConsumerGroup(stream, name=GROUP, start="oldest") as group, anyio.create_task_group() as tasks:

        async def watch_assignment() -> None:
            held: list[int] | None = None
            while True:
                now = sorted(group.assignment)
                if now != held:
                    held = now
                    say({"holds": now})
                await anyio.sleep(0.05)

        async def stop_on_sigterm() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tasks.cancel_scope.cancel()  # leaving the group stores its last commits
                    return

        tasks.start_soon(watch_assignment)
        tasks.start_soon(stop_on_sigterm)
        async for message in group:
            job = json.loads(message.value)
            await anyio.sleep(0.0005)  # the "work"
            say({"handled": job["job"], "partition": message.partition, "offset": message.offset})
            group.commit(message)


# -- the supervisor --------------------------------------------------------------------------------


class Supervisor:
    def __init__(self, stream: str, worker_count: int) -> None:
        self.stream = stream
        self.worker_count = worker_count
        self.workers: dict[str, anyio.abc.Process] = {}
        self.holds: dict[str, list[int]] = {}
        self.handled: Counter[int] = Counter()
        self.handled_by: Counter[str] = Counter()

    async def start_worker(self, name: str, tasks: anyio.abc.TaskGroup) -> None:
        command = [sys.executable, SCRIPT, "worker", "--stream", self.stream, "--name", name]
        process = await anyio.open_process(command, stdin=None, stderr=None)
        self.workers[name] = process
        tasks.start_soon(self.follow, name, process)

    async def follow(self, name: str, process: anyio.abc.Process) -> None:
        """Read a worker's JSON lines: its assignments, and the jobs it handled."""
        assert process.stdout is not None
        buffer = b""
        async for chunk in process.stdout:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                event = json.loads(line)
                if "holds" in event:
                    self.holds[name] = event["holds"]
                    print(f"{name} holds partitions {event['holds']}", flush=True)
                else:
                    self.handled[event["handled"]] += 1
                    self.handled_by[name] += 1

    def shared_out(self, names: list[str], partitions: int) -> bool:
        """Each of ``names`` holds some partitions, and together exactly each partition once."""
        held = [p for name in names for p in self.holds.get(name, [])]
        return all(self.holds.get(name) for name in names) and sorted(held) == list(range(partitions))

    @staticmethod
    async def wait_until(condition: str, check: Callable[[], bool], timeout_s: float) -> None:
        """Poll ``check`` until it holds; fail with ``condition`` named after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up after {timeout_s} s waiting for: {condition}")
            await anyio.sleep(0.02)

    def kill(self, name: str) -> None:
        process = self.workers[name]
        held = self.holds.get(name, [])
        process.send_signal(signal.SIGKILL)
        print(f"killed {name} with SIGKILL while it held partitions {held}; the others take over", flush=True)
        self.holds[name] = []


async def supervise(stream: str, worker_count: int, partitions: int, jobs: int, kill_after: float) -> int:
    supervisor = Supervisor(stream, worker_count)
    names = [f"worker-{n}" for n in range(worker_count)]
    try:
        return await _supervise(supervisor, names, partitions, jobs, kill_after)
    finally:
        for process in supervisor.workers.values():  # whatever happened, leave no worker behind
            if process.returncode is None:
                process.kill()


async def _supervise(supervisor: Supervisor, names: list[str], partitions: int, jobs: int, kill_after: float) -> int:
    stream = supervisor.stream
    async with adiskq.Producer(stream, partitions=partitions) as producer, anyio.create_task_group() as tasks:
        for name in names:
            await supervisor.start_worker(name, tasks)
        # Members join the group as they start; wait until the partitions are shared out.
        await supervisor.wait_until(
            "each partition held by one worker",
            lambda: supervisor.shared_out(names, partitions),
            timeout_s=30,
        )
        started = time.monotonic()
        victim = names[0]
        killed = False
        for job in range(jobs):
            account = f"account-{job % 50:02d}"
            await producer.push(json.dumps({"job": job, "account": account}).encode(), key=account)
            if not killed and time.monotonic() - started >= kill_after:
                supervisor.kill(victim)
                killed = True
            await anyio.sleep(0.0002)
        if not killed:
            supervisor.kill(victim)
        survivors = names[1:]
        await supervisor.wait_until(
            "the survivors hold every partition",
            lambda: supervisor.shared_out(survivors, partitions),
            timeout_s=30,
        )
        await supervisor.wait_until("every job handled", lambda: len(supervisor.handled) == jobs, timeout_s=60)
        for name in survivors:
            supervisor.workers[name].send_signal(signal.SIGTERM)
        for name in names:
            await supervisor.workers[name].wait()
        tasks.cancel_scope.cancel()

    twice = sum(1 for count in supervisor.handled.values() if count > 1)
    print(f"handled all {jobs} jobs: " + ", ".join(f"{n} {supervisor.handled_by[n]}" for n in names))
    print(f"{twice} jobs were handled twice: {victim} had handled them but not yet committed when it died")
    committed = adiskq.stats(stream).groups.get(GROUP, {})
    print(f"group {GROUP!r} committed offsets {dict(sorted(committed.items()))}")
    return 0 if len(supervisor.handled) == jobs else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", nargs="?", choices=["supervisor", "worker"], default="supervisor")
    parser.add_argument("--stream", default="./jobs-stream", help="the stream's folder (created if missing)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--kill-after", type=float, default=0.5, help="seconds of pushing before one worker dies")
    parser.add_argument("--name", default="worker", help="(worker) the name it prints")
    args = parser.parse_args()
    stream = os.path.abspath(args.stream)
    if args.role == "worker":
        anyio.run(run_worker, stream, args.name)
        return 0
    return anyio.run(supervise, stream, args.workers, args.partitions, args.jobs, args.kill_after)


if __name__ == "__main__":
    raise SystemExit(main())
