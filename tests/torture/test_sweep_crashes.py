"""Crash after every system call: the process dying there, and the power failing there.

Each workload of ``sweep_workloads`` runs once with every call on the stream's files counted;
before each call, the stream is saved as a crash right there would leave it (``helpers.syscalls``):
the process dying (every write kept), the power failing (only what was fsynced kept), and the power
failing with whole sectors of unsynced appends kept. Each saved state must then open (recovery
included) and hold: for a dead process, every message acknowledged by then; after a power cut, a
readable stream of messages that were pushed, in order, and with flush="sync" every acknowledged
message and every message a reader could see by then (none is ever taken back). CI runs every
prefix of the smaller workloads and every other prefix of the larger ones; ``-m slow`` runs all.
"""

from __future__ import annotations

import dataclasses
import os

import anyio
import pytest
from helpers.syscalls import Call, Syscalls
from sweep_workloads import FLUSHED, WORKLOADS, Run, stream_messages

import adiskq
from adiskq._storage.stream import StreamWriter

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
        readable = sum(1 for (q, _) in found if q == p.partition)
        if readable != p.next_offset - p.oldest_offset:
            problems.append(f"partition {p.partition}: {p.next_offset - p.oldest_offset} offsets, {readable} readable")
    return found, {p.partition: p.oldest_offset for p in partitions}, problems


def _differing(expected: Found, found: Found, oldest: dict[int, int]) -> list[tuple[tuple[int, int], bytes]]:
    """The expected messages not found as they were (not counting what vacuum removed on purpose)."""
    return [
        (place, value)
        for place, value in expected.items()
        if place[1] >= oldest.get(place[0], 0) and found.get(place) != value
    ]


def _check(state: CrashState, run: Run, flush: str) -> list[str]:
    problems: list[str] = []
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


async def _sweep(tmp: str, name: str, flush: str, monkeypatch: pytest.MonkeyPatch, every: int) -> tuple[int, list[str]]:
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
    for state in states:
        problems += _check(state, run, flush)
    return len(states), problems


@pytest.mark.parametrize(("name", "flush"), CASES)
async def test_a_crash_before_any_call_keeps_every_promise(
    tmp_path: object, name: str, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash states before the calls of the operation (every other one in CI): every promise holds."""
    count, problems = await _sweep(os.fspath(tmp_path), name, flush, monkeypatch, every=2)
    assert problems == [], f"{len(problems)} violations in {count} crash points:\n" + "\n".join(problems[:30])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "flush"), CASES)
async def test_a_crash_before_every_call_keeps_every_promise(
    tmp_path: object, name: str, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full sweep: a crash state before every call."""
    count, problems = await _sweep(os.fspath(tmp_path), name, flush, monkeypatch, every=1)
    print(f"crash sweep {name}/{flush}: {count} prefixes x 3 states, {len(problems)} violations")
    assert problems == [], f"{len(problems)} violations in {count} crash points:\n" + "\n".join(problems[:30])
