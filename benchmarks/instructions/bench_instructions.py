"""Instructions per record of the per-record paths, under ``valgrind --tool=callgrind``, on each core.

Timings on this machine move with its load; instruction counts do not (the same binary, inputs and
environment give the same count). Each path runs twice in a fresh interpreter under callgrind, with
N records and with none; the difference over N is the path's cost per record, start-up excluded.
Both cores run in the same invocation: the compiled one, and the pure-Python reference
(``ADISKQ_NO_EXTENSIONS=1``), which is what every path ran before the compiled core.

    python benchmarks/instructions/bench_instructions.py            # 20,000 records a path
    python benchmarks/instructions/bench_instructions.py --records 2000 --paths decode

Paths (100-byte values, a distinct 12-byte key per record): ``encode`` (a batch of records),
``push_many`` (the producer's encoding of Records: placement, key hash, record, receipts), ``decode``
(a buffer of records to Messages), ``scan`` (recovery's scan of a buffer), ``memcpy`` (copying the
same bytes: the physical floor), ``batches`` (W4 of ``bench_compare.py --keyed``: a log of N records
in one partition read back with ``Consumer.batches(max_messages=1000)`` on asyncio, the consumer's
opening and closing counted, and each batch dropped as the next arrives, as a reading loop drops it),
``async_for`` (W4's ``async for message in consumer`` over the same log, a default ``Consumer`` with
``end="close"``, its opening and closing counted: the consumer's modules are imported before the count,
so it is the reading and what opening a consumer costs in a process that has opened one before).
"""

from __future__ import annotations

import argparse
import os
import sys

# benchmarks/, for the modules the benchmarks share (callgrind.py, peers/compare/, bench_codec.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import callgrind

SETUP = """
import os
from adiskq._sansio import core
from adiskq._sansio.values import Record
N = {n}
values = [bytes(range(100))] * N
keys = [b"order-%06d" % i for i in range(N)]
stamps = list(range(N))
buffer = b"".join(core.encode_batch(values, keys, stamps)) if N else b""
records = [Record(v, key=k.decode()) for v, k in zip(values, keys)]
"""

PATHS = {
    "encode": "core.encode_batch(values, keys, stamps)",
    "push_many": (
        "encoded = core.encode_records(records, 1, 1)\n"
        "if encoded is None:\n"
        "    from adiskq._sansio.codec import encode_batch\n"
        "    from adiskq._sansio.core import place\n"
        "    placed = [place(r.key, 1) for r in records]\n"
        "    encode_batch(values, [p[0] for p in placed], stamps)\n"
        "core.receipts(0, 0, N)"
    ),
    "decode": "core.decode_messages(buffer, 0, 0, N)",
    "scan": "core.scan_columns(buffer)",
    "memcpy": "bytes(bytearray(buffer))",
    "batches": "anyio.run(read, folder)",
    "async_for": "anyio.run(read_each, folder)",
}

# What a path needs beyond SETUP, run before the path and before its "pass" alike.
PATH_SETUP = {
    "batches": """
import tempfile, anyio, adiskq
folder, empty = tempfile.mkdtemp(), tempfile.mkdtemp()
async def write(folder, count):
    async with adiskq.Producer(folder, partitions=1) as producer:
        for first in range(0, count, 1000):
            await producer.push_many([Record(v, key=k) for v, k in zip(values[first:first + 1000], keys[first:first + 1000])])
async def read(folder):
    async with adiskq.Consumer(folder, partition=0, start="oldest", end="close") as consumer:
        async for batch in consumer.batches(max_messages=1000):
            pass
anyio.run(write, folder, N)
anyio.run(write, empty, 0)
anyio.run(read, empty)  # what a consumer imports, imported before the count
""",
}
PATH_SETUP["async_for"] = (
    PATH_SETUP["batches"]
    + """
async def read_each(folder):
    async with adiskq.Consumer(folder, end="close") as consumer:
        async for message in consumer:
            pass
"""
)

CORES = {"compiled": {}, "python": {"ADISKQ_NO_EXTENSIONS": "1"}}


def instructions(code: str, env: dict[str, str]) -> int:
    return callgrind.count([sys.executable, "-c", code], env={**os.environ, **env, "PYTHONHASHSEED": "0"})


def per_record(path: str, core: str, records: int) -> float:
    env = CORES[core]
    setup = SETUP.format(n=records) + PATH_SETUP.get(path, "")
    full = instructions(setup + PATHS[path], env)
    base = instructions(setup + "pass", env)
    return (full - base) / records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--paths", default=",".join(PATHS), help="subset of: " + ", ".join(PATHS))
    args = parser.parse_args(argv)
    callgrind.require()
    print(f"instructions per record, {args.records:,} records, 100-byte values, 12-byte keys")
    print(f"{'path':<10} {'compiled':>10} {'python':>10} {'ratio':>7}")
    for path in args.paths.split(","):
        compiled = per_record(path, "compiled", args.records)
        python = per_record(path, "python", args.records)
        print(f"{path:<10} {compiled:>10,.0f} {python:>10,.0f} {python / compiled:>6.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
