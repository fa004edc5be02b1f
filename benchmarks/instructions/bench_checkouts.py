"""This checkout's producer, consumer and group against another checkout's, in instructions per message.

Timings on a shared machine move by ±30% from one run to the next; instruction counts under
``valgrind --tool=callgrind`` do not, so a change that must not slow the hot paths down (a new
feature that is off, a refactoring) is measured here. Each workload runs in a fresh interpreter
with N messages and with none, on each side; the difference over N is its cost per message, the
interpreter's start-up and the stream's opening excluded. ``PYTHONPATH`` picks the checkout (each
must have its compiled core built in place, or both run the pure-Python one).

Workloads, each on asyncio and Trio, without serializers: ``push`` (one task awaiting each push of
a 100-byte value, one key), ``push_many`` (batches of 1,000 Records), ``async for`` and
``batches()`` (a one-partition stream of N messages read back with ``Consumer(path)``), ``follow``
(a ``Consumer(path)`` in the producer's event loop, woken for each of N pushes), ``group follow``
(the same with a named ``ConsumerGroup`` that commits each message; its store and rebalance
intervals are an hour, so that no store or look at the members depends on the clock).

    python benchmarks/instructions/bench_checkouts.py --base ../main              # 20,000 messages a workload
    python benchmarks/instructions/bench_checkouts.py --base ../main --messages 2000 --workloads push
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

# benchmarks/, for the modules the benchmarks share (callgrind.py, peers/compare/, bench_codec.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import callgrind

WORKLOADS = ("push", "push_many", "async for", "batches", "follow", "group follow")
BACKENDS = ("asyncio", "trio")

PROGRAM = """
import os, sys, anyio, adiskq
workload, backend, count, folder = {workload!r}, {backend!r}, {count}, {folder!r}
path = os.path.join(folder, "stream")

async def push():
    async with adiskq.Producer(path) as producer:
        for _ in range(count):
            await producer.push(b"v" * 100, key="customer-001")

async def push_many():
    records = [adiskq.Record(b"v" * 100, key="customer-001")] * 1000
    async with adiskq.Producer(path) as producer:
        for _ in range(count // 1000):
            await producer.push_many(records)

async def each():
    async with adiskq.Consumer(path, end="close") as consumer:
        async for _ in consumer:
            pass

async def batches():
    async with adiskq.Consumer(path, end="close") as consumer:
        async for _ in consumer.batches(max_messages=1000):
            pass

async def each_push_read(producer, reader, on_message):
    # The reader in the producer's event loop, woken for each push: the producer pushes the next
    # message once the reader has the last one (and on_message has taken it).
    send, receive = anyio.create_memory_object_stream(1)
    async def consume():
        async for message in reader:
            on_message(message)
            await send.send(None)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(consume)
        for _ in range(count):
            await producer.push(b"v" * 100, key="customer-001")
            await receive.receive()
        tasks.cancel_scope.cancel()

async def follow():
    # A consumer of every partition, woken for each push.
    async with adiskq.Producer(path) as producer, adiskq.Consumer(path, start="newest") as consumer:
        await each_push_read(producer, consumer, lambda message: None)

async def group_follow():
    # follow, read by one member of a named group that commits each message it gets.
    group = adiskq.ConsumerGroup(path, "bench", start="newest", commit_interval=3600, rebalance_interval=3600)
    async with adiskq.Producer(path) as producer, group:
        await each_push_read(producer, group, group.commit)

work = {{
    "push": push, "push_many": push_many, "async for": each, "batches": batches, "follow": follow,
    "group follow": group_follow,
}}[workload]
if backend == "trio":
    # Trio shuffles each batch of runnable tasks with its own random generator: seeded, every run
    # takes the same schedule, and the counts of the two checkouts differ by their code alone.
    import trio._core._run
    trio._core._run._r.seed(0)
anyio.run(work, backend=backend)
"""

WRITE = """
import os, time, sys
from adiskq._sansio.codec import encode_record
from adiskq._storage.stream import StreamWriter
path, count = sys.argv[1], int(sys.argv[2])
writer = StreamWriter.open(path, partitions=1)
record = encode_record(b"v" * 100, b"customer-001", time.time_ns())
for start in range(0, count, 10_000):
    size = min(10_000, count - start)
    writer.partitions[0].append([record] * size, [time.time_ns()] * size)
writer.close()
"""


def instructions(code: str, env: dict[str, str], folder: str) -> int:
    """Instructions the interpreter ran for ``code``, as callgrind counts them."""
    # In ``folder``, not a checkout: `python -c` puts its folder before PYTHONPATH.
    return callgrind.count([sys.executable, "-c", code], env=env, cwd=folder)


def per_message(checkout: str, workload: str, backend: str, count: int) -> float:
    """Instructions per message of one workload with ``checkout``'s adiskq."""
    # One hash seed for every run: str hashes move dict and set layouts, and with them the counts.
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout), PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))
    totals = []
    for n in (count, 0):
        folder = tempfile.mkdtemp(prefix="adiskq-bench-checkouts-")
        try:
            if workload in ("async for", "batches"):
                stream = os.path.join(folder, "stream")
                subprocess.run([sys.executable, "-c", WRITE, stream, str(n)], env=env, cwd=folder, check=True)
            code = PROGRAM.format(workload=workload, backend=backend, count=n, folder=folder)
            totals.append(instructions(code, env, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return (totals[0] - totals[1]) / count


def imported_from(checkout: str) -> str:
    """Where ``import adiskq`` finds the package with ``checkout`` on PYTHONPATH (it must be there)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    code = "import adiskq, os; print(os.path.dirname(adiskq.__file__), adiskq.compiled)"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the other checkout (its folder holding adiskq/)")
    parser.add_argument("--messages", type=int, default=20_000, help="messages a workload (a multiple of 1,000)")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    args = parser.parse_args(argv)
    callgrind.require()
    if args.messages < 1000 or args.messages % 1000:
        parser.error("--messages: a positive multiple of 1,000")
    this = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    print(f"instructions per message, {args.messages:,} messages; this checkout over {args.base}:")
    for checkout in (args.base, this):
        print(f"  {checkout}: adiskq from {imported_from(checkout)}")
    for workload in args.workloads:
        for backend in BACKENDS:
            base = per_message(args.base, workload, backend, args.messages)
            new = per_message(this, workload, backend, args.messages)
            print(f"  {workload:<10} {backend:<8} base {base:>9,.0f}   this {new:>9,.0f}   x{base / new:.3f} as fast")
    return 0


if __name__ == "__main__":
    sys.exit(main())
