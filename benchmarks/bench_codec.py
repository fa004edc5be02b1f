"""Nanoseconds per record of the codec alone, beside the physical limit of copying the same bytes.

This measures the per-record work apart from I/O and the async layer: ``encode_batch`` (values,
keys and timestamps to record bytes) and ``decode_messages`` (record bytes to checked ``Message``s) of
``adiskq._sansio.core`` (the compiled core, or the reference with ADISKQ_NO_EXTENSIONS=1), on
batches of 1,000 records with 100-byte values and distinct 12-byte keys.
Beside them, the floor no codec can go below: copying the batch's bytes once (``bytes(bytearray)``,
one ``memcpy``), and joining the 1,000 encoded records into one buffer (``b"".join``, what every
writer does with them). It measures whichever core ``import adiskq`` gives: run it again with
``ADISKQ_NO_EXTENSIONS=1`` for the pure-Python one.

    python benchmarks/bench_codec.py            # medians of 15 repeats of ~0.2 s each
    python benchmarks/bench_codec.py --quick    # a second: checks that it works
    python benchmarks/bench_codec.py --instructions   # instructions per record under callgrind

``--instructions`` counts what the machine's noise cannot move: each call runs in a child process
under ``valgrind --tool=callgrind``, 100 batches of it after the same set-up (``PYTHONHASHSEED=0``),
and the count of a child that only does the set-up is subtracted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import callgrind  # noqa: E402
from peers.compare.common import BATCH_SIZE, VALUES, key  # noqa: E402

import adiskq  # noqa: E402
from adiskq._sansio.core import decode_messages, encode_batch  # noqa: E402  (the core in use)


def core_name() -> str:
    """What runs: ``adiskq.compiled`` where the package has it (the switch between the cores), else "python"."""
    if hasattr(adiskq, "compiled"):
        return f"adiskq.compiled = {adiskq.compiled!r}"
    return "python (adiskq.compiled is not defined: only the pure-Python core exists)"


def time_per_call(call: Callable[[], object], repeats: int, target_s: float) -> float:
    """Median seconds per ``call`` over ``repeats`` timed loops of about ``target_s`` each."""
    loops = 1
    while True:  # calibrate: enough calls that one loop takes about target_s
        started = time.perf_counter()
        for _ in range(loops):
            call()
        if time.perf_counter() - started >= target_s / 4:
            break
        loops *= 2
    loops = max(1, int(loops * target_s / max(time.perf_counter() - started, 1e-9)))
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(loops):
            call()
        samples.append((time.perf_counter() - started) / loops)
    return statistics.median(samples)


def calls() -> dict[str, Callable[[], object]]:
    """The four calls measured, each over one batch, by name (after checking the codec round-trips)."""
    values = list(VALUES)
    keys = [key(i) for i in range(BATCH_SIZE)]
    timestamps = [1_790_000_000_000_000_000 + i for i in range(BATCH_SIZE)]
    records = encode_batch(values, keys, timestamps)
    data = b"".join(records)
    mutable = bytearray(data)
    messages = decode_messages(data, 0, 0, BATCH_SIZE)
    assert [m.key for m in messages] == keys
    assert [m.value for m in messages] == values

    return {
        "encode_batch": lambda: encode_batch(values, keys, timestamps),
        "decode_messages": lambda: decode_messages(data, 0, 0, BATCH_SIZE),
        "memcpy of the batch (bytes(bytearray))": lambda: bytes(mutable),
        "b''.join of the 1,000 records": lambda: b"".join(records),
    }


def measure(repeats: int, target_s: float) -> list[tuple[str, float]]:
    """(what, ns per record) for the codec's two calls and the two copies of the same bytes."""
    return [(name, time_per_call(call, repeats, target_s) / BATCH_SIZE * 1e9) for name, call in calls().items()]


INSTRUCTION_BATCHES = 100  # batches each child runs under callgrind: enough to drown the set-up's jitter


def _child(name: str) -> None:
    """Under callgrind: the set-up, then INSTRUCTION_BATCHES calls of ``name`` ("" for none)."""
    chosen = calls()
    for _ in range(INSTRUCTION_BATCHES if name else 0):
        chosen[name]()


def _instructions(name: str) -> int:
    """Instructions callgrind counted in a child that runs ``name``'s batches."""
    return callgrind.count(
        [sys.executable, os.path.abspath(__file__), "--child", name], env=dict(os.environ, PYTHONHASHSEED="0")
    )


def measure_instructions() -> list[tuple[str, float]]:
    """(what, instructions per record): each call's child minus the set-up-only child."""
    callgrind.require()
    baseline = _instructions("")
    return [(name, (_instructions(name) - baseline) / (INSTRUCTION_BATCHES * BATCH_SIZE)) for name in calls()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 short repeats: checks that it works")
    parser.add_argument("--repeats", type=int, default=15, help="timed loops per figure; the median is shown")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # a callgrind child's call
    args = parser.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return 0
    repeats, target_s = (3, 0.02) if args.quick else (args.repeats, 0.2)
    batch_bytes = sum(len(v) for v in VALUES) + BATCH_SIZE * (24 + len(key(0)))
    print(f"core: {core_name()}")
    shape = (
        f"{BATCH_SIZE:,}-record batches, {len(VALUES[0])}-byte values, {len(key(0))}-byte distinct keys "
        f"({batch_bytes:,} bytes a batch)"
    )
    if args.instructions:
        print(f"{shape}; instructions under callgrind, {INSTRUCTION_BATCHES} batches less the set-up alone")
        figures, unit = measure_instructions(), "instructions/record"
    else:
        print(f"{shape}; median of {repeats} repeats")
        figures, unit = measure(repeats, target_s), "ns/record"
    memcpy = figures[2][1]
    width = max(len(name) for name, _ in figures)
    for name, figure in figures:
        print(f"  {name:<{width}}  {figure:>9,.1f} {unit}  {figure / memcpy:>7,.1f}× memcpy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
