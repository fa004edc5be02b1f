"""Test support: members of a consumer group in worker processes (group_worker.py beside this), and their reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from support.waiting import wait_for

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_worker.py")


class Worker:
    """One worker process and what it reported."""

    def __init__(
        self,
        stream: str,
        name: str,
        folder: str,
        label: str,
        *,
        backend: str,
        rebalance_interval: float,
        exclusive: bool = False,
    ) -> None:
        self.label = label
        self.report = os.path.join(folder, f"{label}.jsonl")
        self._stderr_path = os.path.join(folder, f"{label}.stderr")
        command = [
            sys.executable,
            WORKER,
            stream,
            name,
            self.report,
            "--backend",
            backend,
            "--rebalance-interval",
            str(rebalance_interval),
        ]
        if exclusive:
            command.append("--exclusive")
        with open(self._stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)

    @property
    def pid(self) -> int:
        return self.process.pid

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The complete records reported so far (optionally of one kind)."""
        try:
            with open(self.report, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return []
        records = [json.loads(line) for line in data.split(b"\n")[:-1]]  # the last piece may be partial
        return [r for r in records if kind is None or r["event"] == kind]

    def assignment(self) -> tuple[int, ...] | None:
        """The last assignment reported, or None before the first."""
        events = self.events("assignment")
        return tuple(events[-1]["partitions"]) if events else None

    def assignment_time(self) -> float:
        """When the last assignment was reported (monotonic clock)."""
        return float(self.events("assignment")[-1]["t"])

    def processed(self) -> list[tuple[int, int]]:
        """(partition, offset) of every message it processed, in order."""
        return [(e["p"], o) for e in self.events("processed") for o in e["offsets"]]

    def stored(self) -> dict[int, int]:
        """Partition -> the last next offset it reported stored (flush returned)."""
        return {e["p"]: e["next"] for e in self.events("stored")}

    def stderr(self) -> str:
        with open(self._stderr_path, "rb") as file:
            return file.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: a crash."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM: a clean close; the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)

    def ensure_dead(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def wait_until(condition: Callable[[], bool], what: str, workers: Sequence[Worker], timeout: float = 30.0) -> None:
    """Wait until ``condition`` (about the workers' reports) holds; fail after ``timeout`` seconds
    saying what did not happen, or at once when a worker exits meanwhile.

    The condition is looked at again whenever a report file changes (inotify) or a worker exits
    (its pidfd), never on a timer.
    """
    folders = {os.path.dirname(worker.report) for worker in workers}
    try:
        wait_for(condition, what, folders, processes=[w.process for w in workers], timeout=timeout)
    except AssertionError as error:
        for worker in workers:
            if worker.process.poll() is not None:
                raise AssertionError(
                    f"worker {worker.label} exited while waiting for {what}:\n{worker.stderr()}"
                ) from None
        states = {w.label: w.assignment() for w in workers}
        raise AssertionError(f"{error}; assignments: {states}") from None


def balanced(workers: Sequence[Worker], partitions: int, share: Sequence[int]) -> bool:
    """True when the workers' assignments are disjoint, cover every partition, and have these sizes."""
    assignments = [w.assignment() for w in workers]
    if any(a is None for a in assignments):
        return False
    held = [p for a in assignments if a is not None for p in a]
    sizes = sorted(len(a) for a in assignments if a is not None)
    return sorted(held) == list(range(partitions)) and sizes == sorted(share)
