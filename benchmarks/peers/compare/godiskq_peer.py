"""go-diskq (github.com/wcharczuk/go-diskq), a single-node Kafka as a Go library: the closest peer in kind.

This module drives ``godiskq/main.go``, our small program on go-diskq's API, which bench_compare.py
builds into .cache/ from a go-diskq checkout (``--go-diskq-src``) and names in ``ADISKQ_GO_DISKQ_PEER``.
The program runs the workload in its own process, times it itself (opening and closing the queue or
consumer counted, each key and value built in the loop, as the Python peers do) and prints one JSON
line; its own peak memory is the peer's, not this Python process's.

Only the distinct-key single push, read and wake-up workloads: ``Push`` writes one message at a
time and never fsyncs (so there is no batch or durable workload to set beside adiskq's), one
partition, go-diskq's other settings at their defaults.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

from .common import Outcome

BINARY_VARIABLE = "ADISKQ_GO_DISKQ_PEER"
_TIMEOUT_S = 900.0


def _binary() -> str:
    binary = os.environ.get(BINARY_VARIABLE)
    if not binary or not os.access(binary, os.X_OK):
        raise RuntimeError(
            f"{BINARY_VARIABLE} must name the built go-diskq peer program; run bench_compare.py with "
            "--go-diskq-src PATH (a clone of https://github.com/wcharczuk/go-diskq), which builds it"
        )
    return binary


def _outcome(line: str) -> Outcome:
    result: dict[str, Any] = json.loads(line)
    return Outcome(
        seconds=result["seconds"],
        latencies_ns=result["latencies_ns"] or [],
        rss_peak_bytes=result["rss_peak_bytes"],
    )


def _run(workload: str, path: str, count: int) -> Outcome:
    done = subprocess.run(
        [_binary(), workload, str(count), path],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"go-diskq {workload} failed ({done.returncode}): {done.stderr[-3000:]}")
    return _outcome(done.stdout.strip().splitlines()[-1])


def single_keyed(path: str, count: int) -> Outcome:
    return _run("single_keyed", path, count)


def read_keyed(path: str, count: int) -> Outcome:
    """go-diskq's consumer hands messages over a channel one at a time, its only way to read."""
    return _run("read_keyed", path, count)


read_keyed_long = read_keyed  # the same reading of a log ten times longer (bench_compare.py's counts)


def latency_keyed_prepare(path: str) -> None:
    """Nothing: the consuming program creates the queue before it opens its consumer."""


def latency_keyed_consume(path: str, count: int, ready: Callable[[], None]) -> Outcome:
    """Run the consuming program; once it says "ready" (its consumer watches the partition), let the
    producer start."""
    with subprocess.Popen(
        [_binary(), "latency_keyed-consume", str(count), path],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    ) as consumer:
        assert consumer.stdout is not None
        first = consumer.stdout.readline().strip()
        if first != "ready":
            consumer.kill()
            raise RuntimeError(f"go-diskq's consumer did not start (it said {first!r})")
        ready()
        rest = consumer.stdout.read()
        if consumer.wait(timeout=_TIMEOUT_S) != 0:
            raise RuntimeError(f"go-diskq's consumer exited with {consumer.returncode}")
    return _outcome(rest.strip().splitlines()[-1])


def latency_keyed_produce(path: str, count: int) -> None:
    _run("latency_keyed-produce", path, count)
