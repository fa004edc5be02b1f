"""Crash after every system call: the process dying there, and the power failing there.

Each workload of ``support.sweep_workloads`` runs once with every call on the stream's files counted;
before each call, the stream is saved as a crash right there would leave it (``support.syscalls``):
the process dying (every write kept), the power failing (only what was fsynced kept), and the power
failing with whole sectors of unsynced appends kept. Each saved state must then open (recovery
included) and hold: for a dead process, every message acknowledged by then; after a power cut, a
readable stream of messages that were pushed, in order, and with flush="sync" every acknowledged
message and every message a reader could see by then (none is ever taken back). A fourth state
adds rot to the dead process's: the newest committed record of each partition gets a bit flip,
and recovery must keep it damaged at its offset (reading it raises there, every other acknowledged
message reads back, no offset is cut or reused). CI runs every other prefix, with the rot in every
fourth state; ``-m slow`` runs all.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct

import anyio
import pytest
from support.sweep_workloads import FLUSHED, WORKLOADS, Run, stream_messages
from support.syscalls import Call, Syscalls

import adiskq
from adiskq._sansio.codec import TransactionFields
from adiskq._storage.stream import StreamReader, StreamWriter
from adiskq._storage.transaction_outcomes import scan_transactions

pytestmark = pytest.mark.anyio

CASES = [(name, flush) for name in WORKLOADS for flush in (("async", "sync") if name in FLUSHED else ("async",))]


@dataclasses.dataclass
class CrashState:
    """A saved crash state and what the workload had been told, and readers could see, by then."""

    number: int
    call: str
    died: str
    power: str
    torn: str
    acked: dict[tuple[int, int], bytes]
    seen: dict[tuple[int, int], bytes]


Found = dict[tuple[int, int], bytes]


def _readable(path: str) -> tuple[Found, dict[int, int], list[str]]:
    """Open (with recovery), then read every message: what was read, each partition's oldest offset,
    and problems if the stream does not open or some offset cannot be read."""
    try:
        StreamWriter.open(path).close()
    except Exception as error:
        return {}, {}, [f"the stream does not open: {type(error).__name__}: {error}"]
    found = stream_messages(path)
    partitions = adiskq.stats(path).partitions
    problems = []
    for p in partitions:
        readable = {offset for (q, offset) in found if q == p.partition}
        unreadable = set(range(p.oldest_offset, p.next_offset)) - readable - _held_by_transactions(path, p.partition)
        if unreadable:
            problems.append(
                f"partition {p.partition}: {p.next_offset - p.oldest_offset} offsets, {len(readable)} readable; "
                f"not readable though no transaction holds them: {sorted(unreadable)}"
            )
    return found, {p.partition: p.oldest_offset for p in partitions}, problems


def _held_by_transactions(path: str, partition: int) -> set[int]:
    """The offsets a reader may rightly not deliver: a transaction's records and markers (an
    aborted one's records and every marker are never delivered), and everything from the first
    record of a transaction still open (the last stable offset) on."""
    reader = StreamReader.open(path).partition(partition)
    held: set[int] = set()
    open_first: dict[int, int] = {}

    def note(offset: int, fields: TransactionFields) -> None:
        held.add(offset)
        if fields.commit is None:
            open_first.setdefault(fields.producer_id, offset)
        else:
            open_first.pop(fields.producer_id, None)

    oldest, end = reader.bounds()
    scan_transactions(reader, oldest, note, markers_only=False)
    if open_first:
        held.update(range(min(open_first.values()), end))
    return held


def _differing(expected: Found, found: Found, oldest: dict[int, int]) -> list[tuple[tuple[int, int], bytes]]:
    """The expected messages not found as they were (not counting what vacuum removed on purpose)."""
    return [
        (place, value)
        for place, value in expected.items()
        if place[1] >= oldest.get(place[0], 0) and found.get(place) != value
    ]


def _rot_newest(path: str) -> dict[int, int]:
    """Flip the last byte of the newest committed record of each partition (the last ``.index``
    entry of its newest segment that has one, whose record ``.data`` holds whole); the damaged
    offset of each partition."""
    damaged: dict[int, int] = {}
    parts = os.path.join(path, "parts")
    for folder in sorted(os.listdir(parts)) if os.path.isdir(parts) else []:
        names = sorted(n for n in os.listdir(os.path.join(parts, folder)) if n.endswith(".index"))
        for name in reversed(names):
            index = os.path.join(parts, folder, name)
            data = index[: -len("index")] + "data"
            with open(index, "rb") as file:
                raw = file.read()
            if len(raw) < 24 or not os.path.exists(data):
                continue
            offset, position, size = struct.unpack_from("<QQQ", raw, (len(raw) // 24 - 1) * 24)
            if size and position + size <= os.path.getsize(data):
                with open(data, "r+b") as file:
                    file.seek(position + size - 1)
                    byte = file.read(1)
                    file.seek(-1, os.SEEK_CUR)
                    file.write(bytes([byte[0] ^ 1]))
                damaged[int(folder)] = offset
            break
    return damaged


def _check_rot(state: CrashState) -> list[str]:
    """The dead process's state with its newest records rotted: each stays damaged at its offset."""
    path = state.died + "-rot"
    shutil.copytree(state.died, path)
    damaged = _rot_newest(path)
    try:
        StreamWriter.open(path).close()
    except Exception as error:
        return [f"rot: the stream does not open: {type(error).__name__}: {error}"]
    problems = []
    for partition, offset in damaged.items():
        try:
            adiskq.read(path, partition, offset)
            problems.append(f"rot: the damaged {(partition, offset)} was read back")
        except adiskq.CorruptRecordError as error:
            if error.offset != offset:
                problems.append(f"rot: reading {(partition, offset)} raised for offset {error.offset}")
        except adiskq.Error as error:
            problems.append(f"rot: {(partition, offset)} was cut: {type(error).__name__}: {error}")
    found = stream_messages(path)
    oldest = {p.partition: p.oldest_offset for p in adiskq.stats(path).partitions}
    problems += [
        f"rot: acknowledged {place}={value!r} is {found.get(place)!r}"
        for place, value in _differing(state.acked, found, oldest)
        if damaged.get(place[0]) != place[1]
    ]
    return problems


def _check(state: CrashState, run: Run, flush: str, rot: bool = False) -> list[str]:
    problems: list[str] = _check_rot(state) if rot else []
    pushed = run.attempted | run.setup
    died, oldest, trouble = _readable(state.died)
    problems += [f"process died: {p}" for p in trouble]
    problems += [
        f"process died: acknowledged {place}={value!r} is {died.get(place)!r}"
        for place, value in _differing(state.acked, died, oldest)
    ]
    for kind, path in (("power cut", state.power), ("power cut, torn sectors", state.torn)):
        found, oldest, trouble = _readable(path)
        problems += [f"{kind}: {p}" for p in trouble]
        problems += [
            f"{kind}: {place}={value!r} was never pushed" for place, value in found.items() if value not in pushed
        ]
        if flush == "sync":
            problems += [
                f"{kind}: acknowledged {place}={value!r} is {found.get(place)!r}"
                for place, value in _differing(state.acked, found, oldest)
            ]
            problems += [
                f"{kind}: {place}={value!r} was seen by a reader, then taken back"
                for place, value in _differing(state.seen, found, oldest)
            ]
    return [f"before call #{state.number} ({state.call}): {p}" for p in problems]


async def _sweep(
    tmp: str, name: str, flush: str, monkeypatch: pytest.MonkeyPatch, every: int, rot_every: int
) -> tuple[int, list[str]]:
    path = os.path.join(tmp, "stream")
    saved = os.path.join(tmp, "crashes")
    os.mkdir(saved)
    syscalls = Syscalls(path, monkeypatch)
    run = Run(path, flush)
    states: list[CrashState] = []

    hook_errors: list[str] = []

    def save(call: Call) -> None:
        if (call.number - 1) % every:
            return
        try:
            died, power, torn = syscalls.save_crash_states(saved, call.number)
            seen = stream_messages(path)
        except Exception as error:  # the sweep itself failed: say so, never skip the point quietly
            hook_errors.append(f"saving the state before call #{call.number} ({call.name}) failed: {error!r}")
            return
        states.append(CrashState(call.number, call.name, died, power, torn, dict(run.acked), seen))

    syscalls.before_call = save
    with anyio.fail_after(60):
        await WORKLOADS[name](run, lambda: syscalls.start(track_durability=True), syscalls.stop)
    assert states, f"{name} made no system call on the stream"
    assert len(states) == (len(syscalls.calls) + every - 1) // every, "a crash point was not saved"
    problems: list[str] = hook_errors + syscalls.errors
    problems += [f"the workload failed with no fault injected: {error!r}" for error in run.failures]
    for number, state in enumerate(states):
        problems += _check(state, run, flush, rot=number % rot_every == 0)
    return len(states), problems


@pytest.mark.parametrize(("name", "flush"), CASES)
async def test_a_crash_before_any_call_keeps_every_promise(
    tmp_path: object, name: str, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash states before the calls of the operation (every other one in CI): every promise holds."""
    count, problems = await _sweep(os.fspath(tmp_path), name, flush, monkeypatch, every=2, rot_every=4)
    assert problems == [], f"{len(problems)} violations in {count} crash points:\n" + "\n".join(problems[:30])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "flush"), CASES)
async def test_a_crash_before_every_call_keeps_every_promise(
    tmp_path: object, name: str, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full sweep: a crash state before every call."""
    count, problems = await _sweep(os.fspath(tmp_path), name, flush, monkeypatch, every=1, rot_every=1)
    print(f"crash sweep {name}/{flush}: {count} prefixes x 4 states (the fourth rotted), {len(problems)} violations")
    assert problems == [], f"{len(problems)} violations in {count} crash points:\n" + "\n".join(problems[:30])
