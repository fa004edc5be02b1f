"""Run one workload of one peer in this (fresh) process and print what it measured as one JSON line.

    PYTHONPATH=benchmarks python -m compare.worker PEER WORKLOAD COUNT FOLDER

``latency`` runs the peer's consumer here and its producer in a child process (``latency-produce``),
which starts pushing once the consumer has written FOLDER/ready.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import anyio

from .common import Outcome, disk_bytes, touch, wait_for_file

PEERS = {
    "adiskq": "adiskq_peer",
    "sqlite-wal": "sqlite_peer",
    "redis-streams": "redis_peer",
    "persist-queue": "persistqueue_peer",
    "litequeue": "litequeue_peer",
}
WORKLOADS = ("single", "batch", "durable32", "read", "latency")


def _call(function: Callable[..., Any], *args: Any) -> Any:
    """Async peers run on asyncio (the loop most services use); sync peers are called directly."""
    if inspect.iscoroutinefunction(function):
        return anyio.run(function, *args, backend="asyncio")
    return function(*args)


def _latency(peer: str, module: Any, folder: str, count: int) -> Outcome:
    _call(module.latency_prepare, folder)
    child = subprocess.Popen(
        [sys.executable, "-m", "compare.worker", peer, "latency-produce", str(count), folder],
        stdin=subprocess.DEVNULL,
    )
    try:
        outcome: Outcome = _call(module.latency_consume, folder, count, lambda: touch(os.path.join(folder, "ready")))
    finally:
        if child.wait(timeout=120) != 0:
            raise RuntimeError(f"{peer}'s latency producer exited with {child.returncode}")
    return outcome


def main(argv: list[str]) -> int:
    peer, workload, count_text, folder = argv
    count = int(count_text)
    module = importlib.import_module(f"compare.{PEERS[peer]}")
    if workload == "latency-produce":
        wait_for_file(os.path.join(folder, "ready"))
        _call(module.latency_produce, folder, count)
        return 0
    if workload == "latency":
        outcome = _latency(peer, module, folder, count)
    elif workload in WORKLOADS:
        outcome = _call(getattr(module, workload), folder, count)
    else:
        raise SystemExit(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(
        json.dumps(
            {
                "peer": peer,
                "workload": workload,
                "count": count,
                "seconds": outcome.seconds,
                "rss_peak_bytes": own_peak + outcome.extra_rss_bytes,
                "disk_bytes": disk_bytes(folder),
                "latencies_ns": outcome.latencies_ns,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
