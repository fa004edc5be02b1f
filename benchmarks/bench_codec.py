"""Nanoseconds per record of the codec alone, beside the physical limit of copying the same bytes.

Issue 16 measures the per-record work apart from I/O and the async layer: ``encode_batch`` (values,
keys and timestamps to record bytes) and ``decode_messages`` (record bytes to checked ``Message``s) of
``adiskq._sansio.codec``, on batches of 1,000 records with 100-byte values and distinct 12-byte keys.
Beside them, the floor no codec can go below: copying the batch's bytes once (``bytes(bytearray)``,
one ``memcpy``), and joining the 1,000 encoded records into one buffer (``b"".join``, what every
writer does with them). It measures whichever core ``import adiskq`` gives: run it again with
``ADISKQ_NO_EXTENSIONS=1`` for the pure-Python one.

    python benchmarks/bench_codec.py            # medians of 15 repeats of ~0.2 s each
    python benchmarks/bench_codec.py --quick    # a second: checks that it works
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

from compare.common import BATCH_SIZE, VALUES, key  # noqa: E402

import adiskq  # noqa: E402
from adiskq._sansio.codec import decode_messages, encode_batch  # noqa: E402


def core_name() -> str:
    """What runs: ``adiskq.compiled`` where the package has it (issue 16's switch), else "python"."""
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


def measure(repeats: int, target_s: float) -> list[tuple[str, float]]:
    """(what, ns per record) for the codec's two calls and the two copies of the same bytes."""
    values = list(VALUES)
    keys = [key(i) for i in range(BATCH_SIZE)]
    timestamps = [1_790_000_000_000_000_000 + i for i in range(BATCH_SIZE)]
    records = encode_batch(values, keys, timestamps)
    data = b"".join(records)
    mutable = bytearray(data)
    messages = decode_messages(data, 0, 0, BATCH_SIZE)
    assert [m.key for m in messages] == keys
    assert [m.value for m in messages] == values

    def per_record(call: Callable[[], object]) -> float:
        return time_per_call(call, repeats, target_s) / BATCH_SIZE * 1e9

    return [
        ("encode_batch", per_record(lambda: encode_batch(values, keys, timestamps))),
        ("decode_messages", per_record(lambda: decode_messages(data, 0, 0, BATCH_SIZE))),
        ("memcpy of the batch (bytes(bytearray))", per_record(lambda: bytes(mutable))),
        ("b''.join of the 1,000 records", per_record(lambda: b"".join(records))),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 short repeats: checks that it works")
    parser.add_argument("--repeats", type=int, default=15, help="timed loops per figure; the median is shown")
    args = parser.parse_args(argv)
    repeats, target_s = (3, 0.02) if args.quick else (args.repeats, 0.2)
    figures = measure(repeats, target_s)
    batch_bytes = sum(len(v) for v in VALUES) + BATCH_SIZE * (24 + len(key(0)))
    print(f"core: {core_name()}")
    print(
        f"{BATCH_SIZE:,}-record batches, {len(VALUES[0])}-byte values, {len(key(0))}-byte distinct keys "
        f"({batch_bytes:,} bytes a batch); median of {repeats} repeats"
    )
    memcpy = figures[2][1]
    width = max(len(name) for name, _ in figures)
    for name, ns in figures:
        print(f"  {name:<{width}}  {ns:>9,.1f} ns/record  {ns / memcpy:>7,.1f}× memcpy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
