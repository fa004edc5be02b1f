"""Cross-process wake-up latency: adiskq beside the kernel's floor and SQLite polling, in one run.

A producer process writes one 100-byte message a millisecond (or every ``--interval`` µs), stamped
with CLOCK_MONOTONIC (shared by every process of the machine) just before it is handed over; a
consumer process waiting at the end takes it, and its latency is the time it holds the message minus
the stamp. Each (peer, run) runs in two fresh processes. Peers:

* ``adiskq-asyncio``, ``adiskq-trio``: ``Producer(flush="async")``, one partition; ``async for`` over
  a ``Consumer`` at the end (``end="wait"``), producer and consumer on the same backend;
* ``inotify-blocking``: the floor: the writer appends the message to a file with ``os.write``; the
  reader sleeps in a blocking ``read`` of an inotify descriptor watching that file, then ``pread``s it;
* ``inotify-asyncio``, ``inotify-trio``: the same, but the reader waits in the event loop
  (``anyio.wait_readable`` on the inotify descriptor): the floor of an async reader;
* ``pipe``: the writer writes the message into a FIFO the reader blocks on: a wake-up without a file;
* ``sqlite-100us``, ``sqlite-1ms``: SQLite (WAL, ``synchronous=NORMAL``) inserts, and a reader
  polling for new rows every 100 µs or 1 ms (``time.sleep``; Linux adds its 50 µs timer slack);
* ``c-inotify-blocking``, ``c-poll-100us``: the floors without Python (``wake_floor.c``, compiled with
  the system's ``cc`` for the run): a blocking ``read`` of inotify, and a ``pread`` every 100 µs
  (named in ``--peers`` only: the default leaves them out).

``--co-runner busy`` runs one more process beside every peer, a busy loop at normal priority: a CPU
that is never idle, taken from the peers. ``--co-runner idle-class`` runs one busy loop per CPU in
the ``SCHED_IDLE`` class: any other task preempts it at once, so it takes (almost) no time from the
peers, but no CPU ever goes idle (on a VM: no vCPU halts, so none has to be woken by the host).

With ``--cpus apart`` the consumer runs on CPU 0 and the producer on CPU 1, and with ``--cpus same``
both on CPU 1, for every peer alike (``sched_setaffinity``): what the kernel's choice of CPU for the
woken consumer costs, set aside or forced.

With ``--baseline TREE`` (a folder holding another ``adiskq`` package, e.g. ``git archive`` of an older
commit), ``baseline-asyncio`` and ``baseline-trio`` run that code too, interleaved with the rest: a
before/after comparison in one run.

Prints p50 / p90 / p99 in µs (medians over runs; the first WARMUP samples of each run are dropped
for every peer alike) and each peer's ratio to ``sqlite-100us``, the target's yardstick: adiskq's p50
should be at most 0.65x of it and its p99 at most 1x.

    python benchmarks/bench_wakeup.py                 # 5 runs of 2,000 messages, ~2 minutes
    python benchmarks/bench_wakeup.py --quick         # one short run: checks that it all works
    python benchmarks/bench_wakeup.py --baseline /tmp/before   # adds the code in /tmp/before/adiskq
    python benchmarks/bench_wakeup.py --cpus apart    # consumer and producer pinned to CPUs 0 and 1
    python benchmarks/bench_wakeup.py --interval 500  # 2,000 messages a second, as bench_compare.py's latency_keyed
    python benchmarks/bench_wakeup.py --co-runner idle-class   # no CPU ever idle
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from peers.compare.common import LATENCY_INTERVAL_S, latency_of, paced, stamped_value, touch, wait_for_file  # noqa: E402

PEERS = (
    "adiskq-asyncio",
    "adiskq-trio",
    "inotify-blocking",
    "inotify-asyncio",
    "inotify-trio",
    "pipe",
    "sqlite-100us",
    "sqlite-1ms",
    "c-inotify-blocking",
    "c-poll-100us",
)
# The c-* peers: wake_floor.c's reader mode and its arguments (the writer is the same for both)
C_READERS = {"c-inotify-blocking": ["block"], "c-poll-100us": ["poll", "100000"]}
DEFAULT_PEERS = tuple(peer for peer in PEERS if peer not in C_READERS)  # the c-* peers need a compiler: asked for
CO_RUNNERS = ("busy", "idle-class")
YARDSTICK = "sqlite-100us"
MESSAGE_BYTES = 100  # stamped_value()'s size
WARMUP = 50  # samples dropped at the start of every run (first file opens, caches)
_IN_MODIFY = 0x2
_IN_CLOEXEC = 0o2000000
_IN_NONBLOCK = 0o4000
_CPU_VARIABLE = "BENCH_WAKEUP_CPU"  # a role process pins itself to this CPU (--cpus)
_INTERVAL_VARIABLE = "BENCH_WAKEUP_INTERVAL_US"  # the producer's time between two messages (--interval)
# --cpus: (the consumer's CPU, the producer's CPU)
PLACEMENTS = {"apart": (0, 1), "same": (1, 1)}


# -- the producers ---------------------------------------------------------------------------------


def _interval_s() -> float:
    """The producer's time between two messages: ``--interval``, carried to the role processes."""
    return int(os.environ.get(_INTERVAL_VARIABLE, round(LATENCY_INTERVAL_S * 1e6))) / 1e6


def produce(peer: str, folder: str, count: int) -> None:
    wait_for_file(os.path.join(folder, "ready"))
    interval_s = _interval_s()
    if peer.startswith("adiskq-"):
        import anyio

        import adiskq

        async def main() -> None:
            async with adiskq.Producer(os.path.join(folder, "stream"), partitions=1, flush="async") as producer:
                started = time.monotonic()
                for i in range(count):
                    delay = started + i * interval_s - time.monotonic()
                    if delay > 0:
                        await anyio.sleep(delay)
                    await producer.push(stamped_value())

        anyio.run(main, backend=peer.removeprefix("adiskq-"))
    elif peer.startswith("inotify-"):
        fd = os.open(os.path.join(folder, "file"), os.O_WRONLY | os.O_APPEND)
        paced(count, lambda: os.write(fd, stamped_value()), interval_s)
        os.close(fd)
    elif peer == "pipe":
        fd = os.open(os.path.join(folder, "fifo"), os.O_WRONLY)
        paced(count, lambda: os.write(fd, stamped_value()), interval_s)
        os.close(fd)
    else:
        db = _sqlite(folder)
        paced(count, lambda: db.execute("INSERT INTO log (value) VALUES (?)", (stamped_value(),)), interval_s)
        db.close()


# -- the consumers ---------------------------------------------------------------------------------


def _sqlite(folder: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(folder, "log.db"), isolation_level=None, timeout=60)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS log (offset INTEGER PRIMARY KEY, value BLOB NOT NULL)")
    return db


def prepare(peer: str, folder: str) -> None:
    """What must exist before the consumer opens (in the parent process)."""
    if peer.startswith("adiskq-"):
        import anyio

        import adiskq

        async def create() -> None:
            async with adiskq.Producer(os.path.join(folder, "stream"), partitions=1):
                pass

        anyio.run(create)
    elif peer.startswith("inotify-"):
        open(os.path.join(folder, "file"), "wb").close()
    elif peer == "pipe":
        os.mkfifo(os.path.join(folder, "fifo"))
    else:
        _sqlite(folder).close()


def _inotify(path: str, *, blocking: bool) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd: int = libc.inotify_init1(_IN_CLOEXEC | (0 if blocking else _IN_NONBLOCK))
    if fd < 0 or libc.inotify_add_watch(fd, os.fsencode(path), _IN_MODIFY) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    return fd


def _stamps(data: bytes) -> list[int]:
    return [latency_of(data[i : i + MESSAGE_BYTES]) for i in range(0, len(data), MESSAGE_BYTES)]


def consume(peer: str, folder: str, count: int) -> list[int]:
    ready = os.path.join(folder, "ready")
    latencies: list[int] = []
    if peer.startswith("adiskq-"):
        import anyio

        import adiskq

        async def main() -> None:
            async with adiskq.Consumer(os.path.join(folder, "stream"), start="oldest", end="wait") as consumer:
                touch(ready)
                async for message in consumer:
                    latencies.append(latency_of(message.value))
                    if len(latencies) == count:
                        break

        anyio.run(main, backend=peer.removeprefix("adiskq-"))
    elif peer.startswith("inotify-"):
        path = os.path.join(folder, "file")
        data_fd = os.open(path, os.O_RDONLY)
        blocking = peer == "inotify-blocking"
        inotify_fd = _inotify(path, blocking=blocking)
        position = 0

        def take() -> None:
            nonlocal position
            data = os.pread(data_fd, 1 << 16, position)
            whole = len(data) - len(data) % MESSAGE_BYTES
            latencies.extend(_stamps(data[:whole]))
            position += whole

        if blocking:
            touch(ready)
            while len(latencies) < count:
                os.read(inotify_fd, 4096)
                take()
        else:
            import anyio

            async def main() -> None:
                touch(ready)
                while len(latencies) < count:
                    await anyio.wait_readable(inotify_fd)
                    os.read(inotify_fd, 4096)
                    take()

            anyio.run(main, backend=peer.removeprefix("inotify-"))
        os.close(inotify_fd)
        os.close(data_fd)
    elif peer == "pipe":
        path = os.path.join(folder, "fifo")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO to read blocks until a writer comes
        touch(ready)
        select.select([fd], [], [])
        os.set_blocking(fd, True)
        pending = b""
        while len(latencies) < count:
            pending += os.read(fd, 1 << 16)
            whole = len(pending) - len(pending) % MESSAGE_BYTES
            latencies.extend(_stamps(pending[:whole]))
            pending = pending[whole:]
        os.close(fd)
    else:
        poll_s = {"sqlite-100us": 0.0001, "sqlite-1ms": 0.001}[peer]
        db = _sqlite(folder)
        touch(ready)
        last = 0
        while len(latencies) < count:
            rows = db.execute("SELECT offset, value FROM log WHERE offset > ? ORDER BY offset LIMIT 1000", (last,))
            got = False
            for offset, value in rows:
                latencies.append(latency_of(value))
                last = offset
                got = True
            if not got:
                time.sleep(poll_s)
        db.close()
    return latencies


# -- the run ---------------------------------------------------------------------------------------


def compile_floor(root: str) -> str:
    """``wake_floor.c`` built into ``root``; the path of the program."""
    program = os.path.join(root, "wake_floor")
    source = os.path.join(HERE, "wake_floor.c")
    subprocess.run(["cc", "-O2", "-o", program, source], check=True)
    return program


def _latencies(peer: str, consumer: subprocess.Popen[str], producer: subprocess.Popen[str]) -> list[int]:
    """The latencies the consumer printed, past the warm-up, once both ends exited well."""
    output, _ = consumer.communicate(timeout=120)
    if producer.wait(timeout=60) != 0 or consumer.returncode != 0:
        raise RuntimeError(f"{peer}: producer exited {producer.returncode}, consumer {consumer.returncode}")
    latencies: list[int] = json.loads(output)
    return latencies[WARMUP:]


def _end(children: list[subprocess.Popen[str]]) -> None:
    """A run that failed or hung leaves no process behind."""
    for child in children:
        if child.poll() is None:
            child.kill()
            child.wait()


def _run_c_peer(peer: str, program: str, folder: str, count: int, cpus: tuple[int, int] | None) -> list[int]:
    """One run of a c-* peer: ``wake_floor``'s reader, then its writer once the reader watches."""
    path = os.path.join(folder, "file")
    open(path, "wb").close()

    def pinned(cpu: int | None) -> Any:
        return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))

    children: list[subprocess.Popen[str]] = []
    try:
        consumer = subprocess.Popen(
            [program, *C_READERS[peer][:1], path, str(count), *C_READERS[peer][1:]],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=pinned(None if cpus is None else cpus[0]),
        )
        children.append(consumer)
        wait_for_file(path + ".ready")
        interval_ns = str(round(_interval_s() * 1e9))
        producer = subprocess.Popen(
            [program, "write", path, str(count), interval_ns], preexec_fn=pinned(None if cpus is None else cpus[1])
        )
        children.append(producer)
        return _latencies(peer, consumer, producer)
    finally:
        _end(children)


def start_co_runners(kind: str) -> list[subprocess.Popen[str]]:
    """``--co-runner``: one busy loop at normal priority, or one per CPU in the SCHED_IDLE class."""
    loop = "while True: pass"
    if kind == "busy":
        return [subprocess.Popen([sys.executable, "-c", loop])]
    # A compound statement cannot follow "; " on one line: the loop gets a line of its own.
    idle = f"import os\nos.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n{loop}"
    return [subprocess.Popen([sys.executable, "-c", idle]) for _ in os.sched_getaffinity(0)]


def check_co_runners(co_runners: list[subprocess.Popen[str]]) -> None:
    """A co-runner that exited did not run beside the run just measured: its figures would be
    reported as the co-runner's when they are not."""
    for co_runner in co_runners:
        if co_runner.poll() is not None:
            raise RuntimeError(f"a co-runner exited ({co_runner.returncode}) during the run: its figures are void")


def run_once(
    peer: str,
    count: int,
    root: str,
    baseline: str | None = None,
    cpus: tuple[int, int] | None = None,
    floor_program: str | None = None,
) -> list[int]:
    """One run of ``peer``: a consumer and a producer process (pinned to ``cpus``, the consumer's
    then the producer's, if given); the consumer's latencies in ns."""
    folder = tempfile.mkdtemp(prefix=f"{peer}-", dir=root)
    if peer in C_READERS:
        assert floor_program is not None
        try:
            return _run_c_peer(peer, floor_program, folder, count, cpus)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    env = dict(os.environ)
    if peer.startswith("baseline-"):
        assert baseline is not None
        peer = "adiskq-" + peer.removeprefix("baseline-")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (baseline, env.get("PYTHONPATH")) if p)
    me = os.path.abspath(__file__)
    children: list[subprocess.Popen[str]] = []
    try:
        prepare(peer, folder)
        consumer_env, producer_env = dict(env), dict(env)
        if cpus is not None:
            consumer_env[_CPU_VARIABLE], producer_env[_CPU_VARIABLE] = str(cpus[0]), str(cpus[1])
        consumer = subprocess.Popen(
            [sys.executable, me, "--role", "consume", peer, folder, str(count)],
            stdout=subprocess.PIPE,
            text=True,
            env=consumer_env,
        )
        children.append(consumer)
        producer = subprocess.Popen(
            [sys.executable, me, "--role", "produce", peer, folder, str(count)], text=True, env=producer_env
        )
        children.append(producer)
        return _latencies(peer, consumer, producer)
    finally:
        _end(children)
        shutil.rmtree(folder, ignore_errors=True)


def percentile(ordered: list[int], fraction: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run of 200 messages: checks that it all works")
    parser.add_argument("--runs", type=int, default=5, help="runs per peer (medians are reported)")
    parser.add_argument("--count", type=int, default=2_000, help="messages per run")
    parser.add_argument(
        "--peers", default=",".join(DEFAULT_PEERS), help="comma-separated subset of: " + ", ".join(PEERS)
    )
    parser.add_argument("--dir", default=None, help="where the runs' files go (default: a temp folder)")
    parser.add_argument("--baseline", default=None, help="a folder with another adiskq package to run beside")
    parser.add_argument("--json", default=None, help="also write every run's percentiles to this file")
    parser.add_argument(
        "--cpus",
        choices=sorted(PLACEMENTS),
        default=None,
        help="pin consumer and producer to CPUs 0 and 1, or both to 1",
    )
    parser.add_argument(
        "--co-runner", choices=CO_RUNNERS, default=None, help="a busy loop beside the peers (see above)"
    )
    parser.add_argument(
        "--interval",
        type=int,
        default=round(LATENCY_INTERVAL_S * 1e6),
        help="µs between two messages (default 1,000; 500 is the comparison's 2,000 msg/s workload)",
    )
    parser.add_argument("--role", nargs=4, metavar=("ROLE", "PEER", "FOLDER", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role:
        role, peer, folder, count_text = args.role
        cpu = os.environ.get(_CPU_VARIABLE)
        if cpu is not None:
            os.sched_setaffinity(0, {int(cpu)})
        if role == "produce":
            produce(peer, folder, int(count_text))
        else:
            print(json.dumps(consume(peer, folder, int(count_text))))
        return 0
    peers = args.peers.split(",")
    unknown = set(peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}; choose from {', '.join(PEERS)}")
    if args.baseline is not None:
        if not os.path.isfile(os.path.join(args.baseline, "adiskq", "__init__.py")):
            parser.error(f"--baseline {args.baseline}: no adiskq package there (expected adiskq/__init__.py)")
        with_baseline: list[str] = []
        for peer in peers:
            with_baseline.append(peer)
            if peer.startswith("adiskq-"):  # the same workload on the baseline's code, right after
                with_baseline.append("baseline-" + peer.removeprefix("adiskq-"))
        peers = with_baseline
    if args.runs < 1 or args.count <= WARMUP:
        parser.error(f"--runs must be at least 1 and --count above {WARMUP}")
    runs, count = (1, 200) if args.quick else (args.runs, args.count)
    if args.interval < 1:
        parser.error("--interval must be at least 1 µs")
    os.environ[_INTERVAL_VARIABLE] = str(args.interval)  # the role processes inherit it
    cpus = None if args.cpus is None else PLACEMENTS[args.cpus]
    if cpus is not None and not set(cpus) <= os.sched_getaffinity(0):
        parser.error(
            f"--cpus {args.cpus} needs CPUs {sorted(set(cpus))}; this process may use {sorted(os.sched_getaffinity(0))}"
        )

    figures: dict[str, list[tuple[float, float, float]]] = {peer: [] for peer in peers}
    with tempfile.TemporaryDirectory(prefix="adiskq-wakeup-", dir=args.dir) as root:
        floor_program = None
        if any(peer in C_READERS for peer in peers):
            if shutil.which("cc") is None:
                parser.error("the c-* peers need a C compiler (cc): install one, or leave them out of --peers")
            floor_program = compile_floor(root)
        co_runners = [] if args.co_runner is None else start_co_runners(args.co_runner)
        try:
            for run in range(runs):
                for peer in peers:  # peers interleaved, so the machine's drift touches all alike
                    ordered = sorted(run_once(peer, count, root, args.baseline, cpus, floor_program))
                    row = (percentile(ordered, 0.5), percentile(ordered, 0.9), percentile(ordered, 0.99))
                    figures[peer].append(row)
                    print(f"run {run + 1}/{runs}  {peer:<18} p50 {row[0]:8.1f}  p99 {row[2]:8.1f} µs", file=sys.stderr)
                    check_co_runners(co_runners)
        finally:
            for co_runner in co_runners:
                co_runner.kill()
                co_runner.wait()
    summary = {peer: tuple(statistics.median(r[i] for r in rows) for i in range(3)) for peer, rows in figures.items()}
    placement = "" if cpus is None else f", consumer and producer on CPUs {cpus[0]} and {cpus[1]}"
    placement += "" if args.co_runner is None else f", co-runner: {args.co_runner}"
    print(
        f"cross-process latency, one message every {args.interval:,} µs, {count - WARMUP:,} samples a run,"
        f" medians of {runs} run(s)"
        f"{placement}, µs"
    )
    print(f"{'peer':<18} {'p50':>8} {'p90':>8} {'p99':>8}   ratio to {YARDSTICK} p50 / p99")
    base = summary.get(YARDSTICK)
    for peer, (p50, p90, p99) in summary.items():
        ratios = "" if base is None else f"   {p50 / base[0]:.2f}x / {p99 / base[2]:.2f}x"
        print(f"{peer:<18} {p50:8.1f} {p90:8.1f} {p99:8.1f}{ratios}")
    if base is not None:
        print(f"target for adiskq: p50 <= {0.65 * base[0]:.1f} µs (0.65x), p99 <= {base[2]:.1f} µs (1x)")
    if args.json:
        report: dict[str, Any] = {"runs": figures, "summary": summary, "count": count, "warmup": WARMUP}
        with open(args.json, "w") as file:
            json.dump(report, file, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
