"""Run one workload of one peer in this (fresh) process and print what it measured as one JSON line.

    PYTHONPATH=benchmarks/peers python -m compare.worker PEER WORKLOAD COUNT FOLDER

``latency`` (and ``latency_keyed``) runs the peer's consumer here and its producer in a child process
(``latency-produce``, ``latency_keyed-produce``), which starts pushing once the consumer has written
FOLDER/ready. The child inherits this process's environment (so ``adiskq-py``'s switch reaches it).
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
    "adiskq-py": "adiskq_peer",  # the same module on the pure-Python core: see PEER_ENVIRONMENT
    "adiskq-trio": "adiskq_peer",  # the same module (compiled core) on Trio instead of asyncio
    "sqlite-wal": "sqlite_peer",
    "redis-streams": "redis_peer",
    "persist-queue": "persistqueue_peer",
    "litequeue": "litequeue_peer",
    "go-diskq": "godiskq_peer",  # a Go program bench_compare.py builds from a go-diskq checkout
}
# What a peer's process gets in its environment beyond the benchmark's own.
PEER_ENVIRONMENT = {"adiskq-py": {"ADISKQ_NO_EXTENSIONS": "1"}, "adiskq-trio": {"ADISKQ_BENCH_BACKEND": "trio"}}
KEYLESS_WORKLOADS = ("single", "batch", "durable32", "read", "latency")
# The distinct-key table: a distinct 12-byte key per message, each message built in the timed loop,
# opening and closing counted. Only the peers whose module defines a workload run it (persist-queue
# and litequeue are queues without keys; Redis does not read back the long log).
KEYED_WORKLOADS = (
    "single_keyed",
    "batch_keyed",
    "durable32_keyed",
    "read_keyed",
    "read_keyed_long",
    "read_keyed_batches",
    "latency_keyed",
)
WORKLOADS = KEYLESS_WORKLOADS + KEYED_WORKLOADS
LATENCY_WORKLOADS = ("latency", "latency_keyed")


def runs_workload(peer: str, workload: str) -> bool:
    """Whether ``peer``'s module has ``workload`` (a latency workload needs its ``_consume``)."""
    module = importlib.import_module(f"compare.{PEERS[peer]}")
    name = f"{workload}_consume" if workload in LATENCY_WORKLOADS else workload
    return hasattr(module, name)


def _peak_rss_bytes() -> int:
    """This process's peak resident memory: VmHWM, which starts afresh at exec.

    Not ``getrusage``'s ru_maxrss: Linux carries that over from the process that forked this one, so a
    worker would report at least the size of bench_compare.py's own process.
    """
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _core() -> str | None:
    """Which adiskq core this process ran, if it imported adiskq: "compiled" or "python"."""
    adiskq = sys.modules.get("adiskq")
    if adiskq is None:
        return None
    return "compiled" if getattr(adiskq, "compiled", False) else "python"


def _call(function: Callable[..., Any], *args: Any) -> Any:
    """Async peers run on asyncio (the loop most services use; ADISKQ_BENCH_BACKEND=trio for Trio);
    sync peers are called directly."""
    if inspect.iscoroutinefunction(function):
        return anyio.run(function, *args, backend=os.environ.get("ADISKQ_BENCH_BACKEND", "asyncio"))
    return function(*args)


def _latency(peer: str, module: Any, workload: str, folder: str, count: int) -> Outcome:
    _call(getattr(module, f"{workload}_prepare"), folder)
    child = subprocess.Popen(
        [sys.executable, "-m", "compare.worker", peer, f"{workload}-produce", str(count), folder],
        stdin=subprocess.DEVNULL,
    )
    try:
        consume = getattr(module, f"{workload}_consume")
        outcome: Outcome = _call(consume, folder, count, lambda: touch(os.path.join(folder, "ready")))
    finally:
        if child.wait(timeout=120) != 0:
            raise RuntimeError(f"{peer}'s latency producer exited with {child.returncode}")
    return outcome


def main(argv: list[str]) -> int:
    peer, workload, count_text, folder = argv
    count = int(count_text)
    # Modules a peer's process imports first, as the service around it would have (bench_memory.py
    # runs SQLite in a process that has asyncio loaded, as a FastAPI service's has).
    for name in filter(None, os.environ.get("ADISKQ_BENCH_PRELOAD", "").split(",")):
        importlib.import_module(name)
    module = importlib.import_module(f"compare.{PEERS[peer]}")
    if workload.endswith("-produce") and workload.removesuffix("-produce") in LATENCY_WORKLOADS:
        wait_for_file(os.path.join(folder, "ready"))
        _call(getattr(module, workload.removesuffix("-produce") + "_produce"), folder, count)
        return 0
    if workload in LATENCY_WORKLOADS:
        outcome = _latency(peer, module, workload, folder, count)
    elif workload in WORKLOADS:
        outcome = _call(getattr(module, workload), folder, count)
    else:
        raise SystemExit(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    own_peak = _peak_rss_bytes() if outcome.rss_peak_bytes is None else outcome.rss_peak_bytes
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
                "core": _core(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
