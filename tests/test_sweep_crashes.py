"""Crash after every system call: the process dying there, and the power failing there.

Each write workload of ``sweep_workloads`` runs once with every call on the stream's files counted;
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
from sweep_workloads import WORKLOADS, Run, stream_messages

from adiskq._storage.stream import StreamWriter

pytestmark = pytest.mark.anyio

CRASH_WORKLOADS = ("push", "push_many-1p", "push_many-3p", "roll", "close", "recovery")
CASES = [
    (name, flush) for name in CRASH_WORKLOADS for flush in (("async", "sync") if name != "recovery" else ("sync",))
]


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


def _readable(path: str) -> tuple[dict[tuple[int, int], bytes], list[str]]:
    """Open (with recovery), then read every message; problems if it cannot or some offset fails."""
    try:
        StreamWriter.open(path).close()
    except Exception as error:
        return {}, [f"the stream does not open: {type(error).__name__}: {error}"]
    import adiskq

    found = stream_messages(path)
    problems = [
        f"partition {p.partition}: {p.next_offset - p.oldest_offset} offsets but only "
        f"{sum(1 for (q, _) in found if q == p.partition)} readable"
        for p in adiskq.stats(path).partitions
        if sum(1 for (q, _) in found if q == p.partition) != p.next_offset - p.oldest_offset
    ]
    return found, problems


def _check(state: CrashState, run: Run, flush: str) -> list[str]:
    problems: list[str] = []
    pushed = run.attempted | run.setup
    died, trouble = _readable(state.died)
    problems += [f"process died: {p}" for p in trouble]
    problems += [
        f"process died: acknowledged {place}={value!r} is {died.get(place)!r}"
        for place, value in state.acked.items()
        if died.get(place) != value
    ]
    for kind, path in (("power cut", state.power), ("power cut, torn sectors", state.torn)):
        found, trouble = _readable(path)
        problems += [f"{kind}: {p}" for p in trouble]
        problems += [
            f"{kind}: {place}={value!r} was never pushed" for place, value in found.items() if value not in pushed
        ]
        if flush == "sync":
            problems += [
                f"{kind}: acknowledged {place}={value!r} is {found.get(place)!r}"
                for place, value in state.acked.items()
                if found.get(place) != value
            ]
            problems += [
                f"{kind}: {place}={value!r} was seen by a reader, then taken back"
                for place, value in state.seen.items()
                if found.get(place) != value
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
