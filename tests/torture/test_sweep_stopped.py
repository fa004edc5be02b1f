"""A stopped holder of every lock: each operation beside it ends in a bounded time, as it must.

For every lock a process can hold and then be stopped with (SIGSTOP, Ctrl-Z, a debugger, a frozen
container) — shared producers' ``setup``, ``vacuum``, ``turn`` and a partition's, and a named
group's ``offsets.lock`` — a child takes it and is stopped, and each operation runs beside it: a
shared producer opening, pushing (one partition, and a batch over two), vacuuming and closing,
``adiskq write --shared``, and a group member reading, committing and closing. Each must either go
on (succeed within seconds) or, where it needs the lock, fail after ``lock_timeout`` with
``LockTimeoutError`` naming the holder's pid; never hang. Then the holder resumes and lets go, and
everything acknowledged reads back at its offset, and a producer pushes again. CI runs each lock
with one operation (rotating); ``-m slow`` runs every lock with every operation.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable

import anyio
import pytest
from support.cli import run as run_cli
from support.stopped import StoppedHolder, stopped_holder

import adiskq
from adiskq._sansio.core import fnv1_32

pytestmark = pytest.mark.anyio

LOCK_TIMEOUT = 0.5
# Generous: a loaded CI machine. A hang is what this catches, and it would last for ever.
BOUND_SECONDS = 15.0

LOCKS = ["setup", "vacuum", "turn", "partition-0", "offsets-g"]
# A key of partition 0 (of two), so the pushes below need that partition's lock.
KEY0 = next(key for key in (b"%d" % i for i in range(100)) if fnv1_32(key) % 2 == 0)


def ack(acked: dict[tuple[int, int], bytes], receipt: adiskq.Receipt, value: bytes) -> None:
    acked[(receipt.partition, receipt.offset)] = value


async def open_producer(path: str, acked: dict[tuple[int, int], bytes]) -> None:
    async with adiskq.Producer(path, shared=True, lock_timeout=LOCK_TIMEOUT) as producer:
        ack(acked, await producer.push(b"opened", key=KEY0), b"opened")


async def push(path: str, acked: dict[tuple[int, int], bytes], producer: adiskq.Producer) -> None:
    ack(acked, await producer.push(b"pushed", key=KEY0), b"pushed")


async def push_many(path: str, acked: dict[tuple[int, int], bytes], producer: adiskq.Producer) -> None:
    records = [adiskq.Record(b"many-%d" % i, key=b"%d" % i) for i in range(6)]
    try:
        receipts: list[adiskq.Receipt | None] = list(await producer.push_many(records))
    except adiskq.PartialWriteError as error:
        for receipt, record in zip(error.receipts, records, strict=True):
            if receipt is not None:
                ack(acked, receipt, record.value)
        raise
    for receipt, record in zip(receipts, records, strict=True):
        assert receipt is not None
        ack(acked, receipt, record.value)


async def vacuum(path: str, acked: dict[tuple[int, int], bytes], producer: adiskq.Producer) -> None:
    await producer.vacuum(adiskq.Retention(max_bytes=10**9))


async def close(path: str, acked: dict[tuple[int, int], bytes], producer: adiskq.Producer) -> None:
    await producer.aclose()


async def cli_write(path: str, acked: dict[tuple[int, int], bytes]) -> None:
    result = await anyio.to_thread.run_sync(
        lambda: run_cli("write", path, "--shared", "--lock-timeout", str(LOCK_TIMEOUT), input=b"cli\n")
    )
    if result.returncode != 0:
        raise adiskq.LockTimeoutError(path, "?", LOCK_TIMEOUT, result.stderr)  # carries the CLI's words


async def group(path: str, acked: dict[tuple[int, int], bytes]) -> None:
    async with adiskq.ConsumerGroup(path, "g", commit_interval=0.01) as members:
        count = 0
        async for message in members:
            members.commit(message)
            count += 1
            if count == 2:
                break


Standalone = Callable[[str, dict[tuple[int, int], bytes]], Awaitable[None]]
OnOpen = Callable[[str, dict[tuple[int, int], bytes], adiskq.Producer], Awaitable[None]]

# Operations that open what they use, and operations on a producer opened before the holder stopped.
STANDALONE: dict[str, Standalone] = {"open": open_producer, "cli-write": cli_write, "group": group}
ON_OPEN: dict[str, OnOpen] = {"push": push, "push-many": push_many, "vacuum": vacuum, "close": close}
OPERATIONS = [*STANDALONE, *ON_OPEN]

# Which operations need which lock (and so must time out beside its stopped holder); the others go on.
NEEDS = {
    "setup": {"open", "cli-write"},
    "vacuum": {"open", "cli-write"},
    "turn": {"open", "push", "push-many", "cli-write"},  # opening pushes one message
    "partition-0": {"open", "cli-write", "push", "push-many"},
    "offsets-g": set(),
}


async def _case(path: str, lock: str, operation: str) -> list[str]:
    """One operation beside one stopped holder; the problems found."""
    acked: dict[tuple[int, int], bytes] = {}
    async with adiskq.Producer(path, partitions=2, shared=True) as setup:
        for i in range(4):
            value = b"setup-%d" % i
            ack(acked, await setup.push(value, key=b"%d" % i), value)
    problems: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        producer = None
        if operation in ON_OPEN:
            producer = await stack.enter_async_context(adiskq.Producer(path, shared=True, lock_timeout=LOCK_TIMEOUT))
        with stopped_holder(path, lock) as holder:
            problems += await _beside(path, lock, operation, acked, producer, holder)
            holder.resume_and_release()
        if producer is not None and operation != "close":
            ack(acked, await producer.push(b"after", key=KEY0), b"after")
    async with adiskq.Producer(path, shared=True) as again:
        ack(acked, await again.push(b"again", key=b"1"), b"again")
    for (partition, offset), value in acked.items():
        if adiskq.read(path, partition, offset).value != value:
            problems.append(f"{lock}/{operation}: acknowledged {value!r} not at {partition}:{offset}")
    return problems


async def _beside(
    path: str,
    lock: str,
    operation: str,
    acked: dict[tuple[int, int], bytes],
    producer: adiskq.Producer | None,
    holder: StoppedHolder,
) -> list[str]:
    started = time.monotonic()
    outcome = "went on"
    try:
        with anyio.fail_after(BOUND_SECONDS):
            if producer is None:
                await STANDALONE[operation](path, acked)
            else:
                await ON_OPEN[operation](path, acked, producer)
    except TimeoutError:
        return [f"{lock}/{operation}: still waiting after {BOUND_SECONDS} s (a hang)"]
    except adiskq.LockTimeoutError as error:
        outcome = "timed out"
        if f"pid {holder.pid} " not in str(error):
            return [f"{lock}/{operation}: the error does not name the holder (pid {holder.pid}): {error}"]
    except adiskq.PartialWriteError as error:
        outcome = "timed out"
        if not isinstance(error.__cause__, adiskq.LockTimeoutError):
            return [f"{lock}/{operation}: {type(error).__name__}: {error}"]
    except Exception as error:
        return [f"{lock}/{operation}: {type(error).__name__}: {error}"]
    expected = "timed out" if operation in NEEDS[lock] else "went on"
    if outcome != expected:
        return [f"{lock}/{operation}: {outcome}, expected it {expected}"]
    if time.monotonic() - started > LOCK_TIMEOUT + 10:
        return [f"{lock}/{operation}: took {time.monotonic() - started:.1f} s"]
    return []


def _sampled() -> list[tuple[str, str]]:
    """Each lock with one operation, the operation rotating with the lock."""
    return [(lock, OPERATIONS[index % len(OPERATIONS)]) for index, lock in enumerate(LOCKS)]


@pytest.mark.parametrize(("lock", "operation"), _sampled())
async def test_an_operation_beside_a_stopped_holder_goes_on_or_times_out(
    stream_path: str, lock: str, operation: str
) -> None:
    """One operation beside a stopped holder of the lock: it goes on, or fails after lock_timeout
    naming the holder if it needs that lock; then everything acknowledged reads back."""
    assert await _case(stream_path, lock, operation) == []


@pytest.mark.slow
async def test_every_operation_beside_every_stopped_holder_goes_on_or_times_out(tmp_path: object) -> None:
    """The full sweep: every lock, every operation."""
    problems: list[str] = []
    cases = 0
    for lock in LOCKS:
        for operation in OPERATIONS:
            cases += 1
            problems += await _case(os.path.join(os.fspath(tmp_path), f"{lock}-{operation}"), lock, operation)
    print(f"stopped-holder sweep: {cases} cases, {len(problems)} problems")
    assert problems == [], f"{len(problems)} problems in {cases} cases:\n" + "\n".join(problems)
