"""Consumer groups across processes: how long partitions wait for a new holder when members come and go.

    python benchmarks/bench_group.py            # 5 runs per case; rebalance_interval 1.0 (the default) and 0.2
    python benchmarks/bench_group.py --quick    # 1 run, interval 0.2: for the test that keeps this working

Worker processes of one group share a 6-partition stream; each reports its assignment changes, stamped
with the monotonic clock (which all processes share), to a file. Per run and backend (the workers run on it):

- join:  a fourth worker joins three that hold 2 each: from just before it opens the group to shares of 2/2/1/1
         (the others give back at the ring of its join; it takes what they give back at theirs);
- leave: that worker is stopped with SIGTERM (a clean close: commits stored, leases given back, a
         ring): from the signal to shares of 2/2/2 again;
- kill:  one of the three is killed with SIGKILL: from the signal to the two survivors holding 3 each.
         A dead member cannot ring: the survivors watch its process exit (pidfd), and look then;
- kill, interval only: the same with that watch off (ADISKQ_EXIT_WATCH=off, as on systems without
         pidfd): the survivors find the dead member at their next look, so this is bounded by
         ``rebalance_interval``; the kill comes just after every member looked (the leave before it),
         so this is close to the worst case. The ratio to the interval is printed.

No peer runs here: no other embedded log on this machine shares partitions between processes (go-diskq
has no groups; Kafka needs a broker), so the figures are set against the configured interval instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

PARTITIONS = 6
BACKENDS = ("asyncio", "trio")

WORKER = """
import json, os, signal, sys, time, anyio, adiskq
stream, report_path, interval, backend = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
fd = os.open(report_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
def report(event, **fields):
    os.write(fd, (json.dumps({"event": event, **fields, "t": time.monotonic()}) + "\\n").encode())
async def main():
    async with anyio.create_task_group() as tg:
        async def stop():
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
        tg.start_soon(stop)
        report("joining")
        async with adiskq.ConsumerGroup(stream, name="bench", rebalance_interval=interval) as group:
            async def watch():
                async for assignment in group.assignments():
                    report("assignment", partitions=list(assignment))
            tg.start_soon(watch)
            async for message in group:
                group.commit(message)
anyio.run(main, backend=backend)
"""


class Worker:
    def __init__(self, stream: str, folder: str, label: str, interval: float, backend: str, exit_watch: bool) -> None:
        self.report = os.path.join(folder, f"{label}.jsonl")
        command = [sys.executable, "-c", WORKER, stream, self.report, str(interval), backend]
        env = {**os.environ, "ADISKQ_EXIT_WATCH": "on" if exit_watch else "off"}
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)

    def events(self, kind: str) -> list[dict[str, object]]:
        try:
            with open(self.report, "rb") as file:
                lines = file.read().split(b"\n")[:-1]
        except FileNotFoundError:
            return []
        return [record for record in map(json.loads, lines) if record["event"] == kind]

    def assignment(self) -> list[int] | None:
        events = self.events("assignment")
        return list(events[-1]["partitions"]) if events else None  # type: ignore[call-overload]

    def changed_at(self) -> float:
        return float(self.events("assignment")[-1]["t"])  # type: ignore[arg-type]

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)


def shares(workers: Sequence[Worker], wanted: Sequence[int]) -> bool:
    assignments = [w.assignment() for w in workers]
    if any(a is None for a in assignments):
        return False
    held = sorted(p for a in assignments if a is not None for p in a)
    return held == list(range(PARTITIONS)) and sorted(len(a or ()) for a in assignments) == sorted(wanted)


def one_run(folder: str, interval: float, backend: str, exit_watch: bool) -> dict[str, float]:
    from adiskq._storage.stream import StreamWriter

    stream = os.path.join(folder, "stream")
    StreamWriter.open(stream, partitions=PARTITIONS).close()
    workers: list[Worker] = []
    try:
        a, b, c = (Worker(stream, folder, label, interval, backend, exit_watch) for label in "abc")
        workers += [a, b, c]
        wait_until(lambda: shares([a, b, c], [2, 2, 2]), "three workers sharing")
        d = Worker(stream, folder, "d", interval, backend, exit_watch)
        workers.append(d)
        wait_until(lambda: shares([a, b, c, d], [2, 2, 1, 1]), "a fourth worker's share")
        joined = float(d.events("joining")[0]["t"])  # type: ignore[arg-type]
        join = max(w.changed_at() for w in (a, b, c, d)) - joined

        signalled = time.monotonic()
        d.process.send_signal(signal.SIGTERM)
        wait_until(lambda: shares([a, b, c], [2, 2, 2]), "the shares after a clean leave")
        leave = max(w.changed_at() for w in (a, b, c)) - signalled

        signalled = time.monotonic()
        b.process.send_signal(signal.SIGKILL)
        wait_until(lambda: shares([a, c], [3, 3]), "the shares after a kill")
        kill = max(w.changed_at() for w in (a, c)) - signalled
        return {"join": join, "leave": leave, "kill": kill}
    finally:
        for worker in workers:
            worker.end()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run, interval 0.2 (for the test)")
    parser.add_argument("--runs", type=int, default=None, help="runs per case (default 5; 1 with --quick)")
    parser.add_argument("--dir", default=None, help="where the streams go (default: a temporary folder)")
    args = parser.parse_args()
    runs = args.runs if args.runs is not None else (1 if args.quick else 5)
    if runs < 1:
        parser.error("--runs must be at least 1")
    intervals = (0.2,) if args.quick else (1.0, 0.2)
    print(f"consumer group rebalancing: {PARTITIONS} partitions, 3-4 worker processes, {runs} run(s), median")
    print("machine: 2 cores shared with other work; figures are wall-clock and vary with load")
    for interval in intervals:
        for backend in BACKENDS:
            results: dict[str, list[float]] = {"join": [], "leave": [], "kill": [], "kill, interval only": []}
            for _ in range(runs):
                for exit_watch in (True, False):
                    folder = tempfile.mkdtemp(prefix="adiskq-bench-group-", dir=args.dir)
                    try:
                        figures = one_run(folder, interval, backend, exit_watch)
                        if exit_watch:
                            for name, seconds in figures.items():
                                results[name].append(seconds)
                        else:  # join and leave do not use the exit watch
                            results["kill, interval only"].append(figures["kill"])
                    finally:
                        shutil.rmtree(folder, ignore_errors=True)
            for name, label in (
                ("join", "join  (open -> 2/2/1/1)      "),
                ("leave", "leave (SIGTERM -> 2/2/2)     "),
                ("kill", "kill  (SIGKILL -> 3/3)       "),
                ("kill, interval only", "kill  (interval only)        "),
            ):
                median = statistics.median(results[name])
                worst = max(results[name])
                print(
                    f"{label} {backend:7s} interval {interval:.1f} s: median {median * 1000:7.1f} ms, "
                    f"max {worst * 1000:7.1f} ms ({median / interval:.2f}x interval)"
                )


if __name__ == "__main__":
    main()
