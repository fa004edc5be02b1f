"""What serializers cost: push and read with and without them, in one run; and, against another
checkout, that a producer and a consumer without serializers are as fast as before.

Workloads (one task awaiting each ``push`` of a ~100-byte value; ``async for`` over every message),
each on asyncio and Trio, best of ``--runs``:

* ``bytes``: no serializer (the values are bytes, as before serializers existed);
* ``json``: ``adiskq.serializers.JSON`` (a dict of four fields);
* ``msgspec``: ``msgspec_json(Order)`` (a ``msgspec.Struct`` of the same four fields);
* ``pydantic``: ``pydantic_json(Order)`` (a pydantic model of them).

Each line gives messages a second and the ratio to ``bytes`` in the same run.

    python benchmarks/bench_serializers.py                  # 100,000 messages, best of 5
    python benchmarks/bench_serializers.py --quick          # small sizes, for the test suite
    python benchmarks/bench_serializers.py --base ../main   # bytes only: this checkout over another's
                                                            # adiskq, process by process, alternating

``--base`` runs the ``bytes`` workloads in fresh processes, each side in turn (``PYTHONPATH`` picks
the checkout), and prints the median of this checkout's rate over the base's per workload.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import anyio

import adiskq

BACKENDS = ("asyncio", "trio")

# A variant: how its i-th value is made, and the serializer and deserializer (None: plain bytes).
Variant = tuple[Callable[[int], object], Callable[[Any], bytes] | None, Callable[[bytes], Any] | None]


def order_fields(i: int) -> dict[str, Any]:
    return {"id": i, "customer": f"customer-{i % 100:03d}", "amount": 12.5, "note": "n" * 40}


def plain_value(i: int) -> bytes:
    return json.dumps(order_fields(i)).encode()


def variants() -> dict[str, Variant]:
    """Every variant; imported here, so that ``--base`` runs the bytes one with a checkout that
    has no serializers."""
    import msgspec
    import pydantic

    from adiskq.serializers import JSON, msgspec_json, pydantic_json

    class Order(msgspec.Struct):
        id: int
        customer: str
        amount: float
        note: str

    class OrderModel(pydantic.BaseModel):
        id: int
        customer: str
        amount: float
        note: str

    orders, models = msgspec_json(Order), pydantic_json(OrderModel)
    return {
        "bytes": (plain_value, None, None),
        "json": (order_fields, JSON.serializer, JSON.deserializer),
        "msgspec": (lambda i: Order(**order_fields(i)), orders.serializer, orders.deserializer),
        "pydantic": (lambda i: OrderModel(**order_fields(i)), models.serializer, models.deserializer),
    }


PLAIN: Variant = (plain_value, None, None)


async def push_all(path: str, count: int, variant: Variant) -> float:
    make, serializer, _ = variant
    values = [make(i) for i in range(count)]
    # Without a serializer, no such argument: the producer is opened as before serializers existed.
    options: dict[str, Any] = {} if serializer is None else {"value_serializer": serializer}
    async with adiskq.Producer(path, **options) as producer:
        push = producer.push
        started = time.perf_counter()
        for value in values:
            await push(value, key="customer-001")
        return count / (time.perf_counter() - started)


async def read_all(path: str, count: int, variant: Variant) -> float:
    _, _, deserializer = variant
    options: dict[str, Any] = {} if deserializer is None else {"value_deserializer": deserializer}
    seen = 0
    started = time.perf_counter()
    async with adiskq.Consumer(path, end="close", **options) as consumer:
        async for _ in consumer:
            seen += 1
    assert seen == count
    return count / (time.perf_counter() - started)


def best(runs: int, measure: Callable[[], float]) -> float:
    return max(measure() for _ in range(runs))


def measure_variant(folder: str, count: int, runs: int, variant: Variant, backend: str) -> tuple[float, float]:
    """(push rate, read rate) of one variant on one backend, best of ``runs``."""
    streams: list[str] = []

    def push_once() -> float:
        path = tempfile.mkdtemp(dir=folder)
        shutil.rmtree(path)
        streams.append(path)
        return anyio.run(push_all, path, count, variant, backend=backend)

    push_rate = best(runs, push_once)
    read_rate = best(runs, lambda: anyio.run(read_all, streams[-1], count, variant, backend=backend))
    for path in streams:
        shutil.rmtree(path, ignore_errors=True)
    return push_rate, read_rate


def run_in_one_process(count: int, runs: int) -> None:
    folder = tempfile.mkdtemp(prefix="adiskq-bench-serializers-")
    try:
        print(f"{count:,} messages, one task awaiting each push; async for reads them back; best of {runs}, msg/s:")
        for backend in BACKENDS:
            plain: tuple[float, float] | None = None
            for name, variant in variants().items():
                push_rate, read_rate = measure_variant(folder, count, runs, variant, backend)
                plain = plain or (push_rate, read_rate)
                print(
                    f"  {backend:<8} {name:<9} push {push_rate:>10,.0f} (x{push_rate / plain[0]:.2f} bytes)   "
                    f"read {read_rate:>10,.0f} (x{read_rate / plain[1]:.2f} bytes)"
                )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- this checkout against another: the bytes workloads, in alternating fresh processes ------------

_ONE_SIDE = """
import json, sys
sys.argv = [sys.argv[0]]
import bench_serializers as bench
count, runs, folder = {count}, {runs}, {folder!r}
out = {{}}
for backend in bench.BACKENDS:
    push_rate, read_rate = bench.measure_variant(folder, count, runs, bench.PLAIN, backend)
    out["push " + backend], out["read " + backend] = push_rate, read_rate
print(json.dumps(out))
"""


def side(checkout: str, count: int, runs: int, folder: str) -> dict[str, float]:
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.abspath(checkout), here]))
    code = _ONE_SIDE.format(count=count, runs=runs, folder=folder)
    # Run in ``folder``, not a checkout: `python -c` puts its working folder before PYTHONPATH.
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=folder, capture_output=True, text=True, check=True
    )
    figures: dict[str, float] = json.loads(result.stdout)
    return figures


def run_against(base: str, count: int, runs: int, rounds: int) -> None:
    this = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = tempfile.mkdtemp(prefix="adiskq-bench-serializers-")
    ratios: dict[str, list[float]] = {}
    try:
        print(f"without serializers, this checkout over {base} ({count:,} messages, {rounds} rounds, best of {runs}):")
        for round_number in range(rounds):
            order = [(this, "new"), (base, "base")]
            if round_number % 2:
                order.reverse()
            figures = {name: side(checkout, count, runs, folder) for checkout, name in order}
            for workload, rate in figures["new"].items():
                ratios.setdefault(workload, []).append(rate / figures["base"][workload])
        for workload, values in ratios.items():
            print(
                f"  {workload:<13} x{statistics.median(values):.3f}  (rounds: {', '.join(f'{v:.2f}' for v in values)})"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (for the test suite)")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--base", help="another checkout: compare the bytes workloads with its adiskq")
    parser.add_argument("--rounds", type=int, default=10, help="with --base: alternating rounds")
    args = parser.parse_args()
    count = args.messages or (2_000 if args.quick else 100_000)
    runs = args.runs or (1 if args.quick else 5)
    if args.base:
        run_against(args.base, count, runs, args.rounds)
    else:
        run_in_one_process(count, runs)


if __name__ == "__main__":
    main()
