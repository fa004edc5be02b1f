"""W2 of ``bench_compare.py --keyed`` (or W1, or a peer's loop) for ``valgrind --tool=callgrind``.

Instruction counts do not move with the machine's load, so the cost of a record is decided by them:
run it twice, with N records and with M, and divide the difference by N - M (the opening, the closing
and the interpreter's start cancel out). ``MODE`` picks what runs:

    push     W2: push_many of 1,000 Records built in the loop (bench_compare's adiskq peer)
    single   W1: a push a message (N messages)
    none     the adiskq peer's loop alone: the same Records built in anyio.run, nothing pushed
    sqlite   SQLite's executemany of 1,000 rows in a transaction (its peer)
    sqlnone  SQLite's loop alone: its (now, key, value) tuples built, nothing inserted

    N=120000 valgrind --tool=callgrind python benchmarks/instructions/push_many_instructions.py asyncio   # and N=20000
    MODE=sqlite N=120000 valgrind --tool=callgrind python benchmarks/instructions/push_many_instructions.py

Run it from a folder without an ``adiskq`` of its own (the package is imported from the path).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

# benchmarks/, for the modules the benchmarks share (callgrind.py, peers/compare/, bench_codec.py)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import anyio
from peers.compare import adiskq_peer, sqlite_peer
from peers.compare.common import BATCH_SIZE, key, message_value

from adiskq import Record


async def records_alone(count: int) -> None:
    """The adiskq peer's loop without the pushes: each batch's Records built, then dropped."""
    record = Record
    for first in range(0, count, BATCH_SIZE):
        batch = [record(message_value(n), key(n)) for n in range(first, first + BATCH_SIZE)]
        del batch


def main() -> None:
    count = int(os.environ["N"])
    mode = os.environ.get("MODE", "push")
    backend = sys.argv[1] if len(sys.argv) > 1 else "asyncio"
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "stream")
    if mode == "push":
        anyio.run(adiskq_peer.batch_keyed, path, count, backend=backend)
    elif mode == "single":
        anyio.run(adiskq_peer.single_keyed, path, count, backend=backend)
    elif mode == "none":
        anyio.run(records_alone, count, backend=backend)
    elif mode == "sqlite":
        os.makedirs(path)
        sqlite_peer.batch_keyed(path, count)
    elif mode == "sqlnone":
        for first in range(0, count, BATCH_SIZE):
            rows = [(time.time_ns(), key(n), message_value(n)) for n in range(first, first + BATCH_SIZE)]
            del rows
    else:
        raise SystemExit(f"MODE is push, single, none, sqlite or sqlnone, not {mode!r}")


if __name__ == "__main__":
    main()
