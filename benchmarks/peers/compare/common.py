"""What every peer module shares: the payload, the workload shapes, and how an outcome is reported."""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import struct
import threading
import time
from collections.abc import Callable, Iterator

BATCH_SIZE = 1000  # records per batch in the batch workload (and when a reader asks for a page)
# Every message carries 100 bytes of value, drawn in turn from 1,000 distinct random values (the same
# in every run): a peer that compresses (Redis's RDB-format AOF rewrite does) gains nothing from
# repetition that real payloads would not have.
_random = random.Random(20_240_601)
VALUES = tuple(_random.randbytes(100) for _ in range(BATCH_SIZE))
VALUE_TEXTS = tuple(_random.randbytes(50).hex() for _ in range(BATCH_SIZE))  # 100 characters, for litequeue
CONCURRENCY = 32  # producers in the durable workload, each acknowledged only after fsync
LATENCY_INTERVAL_S = 0.001  # the latency producer pushes one message a millisecond
KEYED_LATENCY_INTERVAL_S = 0.0005  # the keyed latency workload's producer: 2,000 messages a second
POLL_INTERVAL_S = 0.001  # how often a polling consumer (the SQLite-based peers) looks for new rows
FAST_POLL_INTERVAL_S = 0.0001  # SQLite's poll in the keyed latency workload: latency bought with CPU

_STAMP = struct.Struct("<q")


@dataclasses.dataclass(slots=True)
class Outcome:
    """What one workload function measured: its timed seconds, plus what only it can see."""

    seconds: float = 0.0
    extra_rss_bytes: int = 0  # memory outside this process that the peer needs (redis-server)
    latencies_ns: list[int] = dataclasses.field(default_factory=list)
    # The peak memory of the process that did the work, when that is not the worker (go-diskq's runs
    # in its own program); None: the worker's own peak.
    rss_peak_bytes: int | None = None


def threads_timed(work: Callable[[], None], count: int = CONCURRENCY) -> float:
    """Seconds for ``count`` threads to each run ``work``, timed from the moment they all start."""
    start = threading.Barrier(count + 1)

    def run() -> None:
        start.wait()
        work()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def now_ns() -> int:
    """CLOCK_MONOTONIC: one clock for every process on the machine, so latencies cross processes."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def values(count: int) -> Iterator[bytes]:
    """``count`` values, cycling through VALUES."""
    return itertools.islice(itertools.cycle(VALUES), count)


def key(number: int) -> bytes:
    """The ``number``-th distinct key: 12 bytes, ``b"ord-00000042"`` (distinct below 10**8)."""
    return b"ord-%08d" % number


_BODIES = tuple(random_value[:88] for random_value in VALUES)


def message_value(number: int) -> bytes:
    """The ``number``-th keyed message's 100-byte value, built afresh as a caller's loop builds one:
    88 random bytes (cycling through 1,000) and the number in 12 digits. The keyed workloads call
    ``key`` and ``message_value`` inside their timed loops, for every peer alike."""
    return _BODIES[number % BATCH_SIZE] + b"%012d" % number


def task_numbers(count: int, tasks: int = CONCURRENCY) -> list[range]:
    """``count`` message numbers split among ``tasks`` producers as evenly as they go (10,000 among 32:
    16 tasks of 313 and 16 of 312), each task its own run of numbers."""
    share, rest = divmod(count, tasks)
    ranges, first = [], 0
    for task in range(tasks):
        size = share + (task < rest)
        ranges.append(range(first, first + size))
        first += size
    return ranges


def texts(count: int) -> Iterator[str]:
    """``count`` 100-character texts, cycling through VALUE_TEXTS."""
    return itertools.islice(itertools.cycle(VALUE_TEXTS), count)


def stamped_value() -> bytes:
    """A 100-byte value whose first 8 bytes are the time it was made."""
    return _STAMP.pack(now_ns()) + VALUES[0][8:]


def stamped_text() -> str:
    """The text form of ``stamped_value`` (for litequeue): 20 digits, then 80 more characters."""
    return f"{now_ns():020d}" + VALUE_TEXTS[0][20:]


def latency_of(value: bytes) -> int:
    stamp: int = _STAMP.unpack_from(value)[0]
    return now_ns() - stamp


def latency_of_text(value: str) -> int:
    return now_ns() - int(value[:20])


def paced(count: int, push: Callable[[], object], interval_s: float = LATENCY_INTERVAL_S) -> None:
    """Call ``push`` ``count`` times, one every ``interval_s`` on an absolute schedule."""
    started = time.monotonic()
    for i in range(count):
        delay = started + i * interval_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        push()


def wait_for_file(path: str, timeout_s: float = 30.0) -> None:
    """Wait (polling, with a deadline) until ``path`` exists: how a producer child waits for its consumer."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.005)


def touch(path: str) -> None:
    with open(path, "w"):
        pass


def disk_bytes(path: str) -> int:
    """Bytes the folder takes on disk (allocated blocks, so preallocation and slack count too)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total
