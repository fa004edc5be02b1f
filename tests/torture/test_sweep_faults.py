"""Fail every system call of every operation, one at a time, with ENOSPC, EIO and EFBIG.

For each workload of ``support.sweep_workloads`` the calls on the stream's files are counted in one clean
run (N), then the workload runs again once per k in 1..N with the k-th call failing. After each run:
the call raised or returned within a bound (no hang), the process went on (the workload's last push
after the fault succeeded), and the reopened stream holds every acknowledged message, every message
a reader could see when the fault struck, and nothing else of the failed call. CI runs every k with
one errno each (rotating); ``-m slow`` runs every k with every errno.
"""

from __future__ import annotations

import os
import shutil

import anyio
import pytest
from support.sweep_workloads import FLUSHED, WORKLOADS, Run, oldest_offsets, stream_messages, violations
from support.syscalls import FAULTS, Call, Syscalls

from adiskq._storage.stream import StreamWriter

pytestmark = pytest.mark.anyio

CASES = [(name, flush) for name in WORKLOADS for flush in (("async", "sync") if name in FLUSHED else ("async",))]


Seen = dict[tuple[int, int], bytes]


async def _run(
    path: str, name: str, flush: str, syscalls: Syscalls, fail_at: int | None, code: int
) -> tuple[Run, Seen]:
    """One run of a workload; returns it and what readers could see when the fault struck."""
    run = Run(path, flush)
    seen: Seen = {}

    def capture(call: Call) -> None:
        seen.update(stream_messages(path))

    syscalls.on_fault = capture
    with anyio.fail_after(30):  # nothing hangs
        await WORKLOADS[name](run, lambda: syscalls.start(fail_at=fail_at, code=code), syscalls.stop)
    return run, seen


def _reopened(path: str) -> None:
    """Open the stream as a producer would (recovery included) and close it: it must open."""
    StreamWriter.open(path).close()


async def _sweep(tmp: str, name: str, flush: str, monkeypatch: pytest.MonkeyPatch, full: bool) -> tuple[int, list[str]]:
    tmp = os.path.realpath(tmp)  # noqa: ASYNC240 - a test folder on local disk
    syscalls = Syscalls(tmp, monkeypatch)
    clean = os.path.join(tmp, "clean")
    syscalls.root = clean
    await _run(clean, name, flush, syscalls, None, 0)
    count = len(syscalls.calls)
    assert count > 0, f"{name} made no system call on the stream"
    problems: list[str] = []
    cases = 0
    for k in range(1, count + 1):
        codes = list(FAULTS.items()) if full else [list(FAULTS.items())[k % len(FAULTS)]]
        for label, code in codes:
            path = os.path.join(tmp, f"k{k}-{label}")
            syscalls.root = path
            cases += 1
            try:
                run, seen = await _run(path, name, flush, syscalls, k, code)
            except Exception as error:  # the workload could not go on after the fault cleared
                problems.append(f"{name}/{flush} k={k} {label}: {type(error).__name__}: {error}")
                continue
            finally:
                syscalls.stop()
            _reopened(path)
            found = violations(run, seen, survived=stream_messages(path), oldest=oldest_offsets(path))
            problems += [f"{name}/{flush} k={k} ({syscalls.calls[k - 1].name}) {label}: {p}" for p in found]
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(path + "-checkpoint", ignore_errors=True)
    return cases, problems


@pytest.mark.parametrize(("name", "flush"), CASES)
async def test_every_call_failing_keeps_every_promise(
    tmp_path: object, name: str, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each system call of the operation failing in turn (one errno each, rotating): no promise broken."""
    cases, problems = await _sweep(os.fspath(tmp_path), name, flush, monkeypatch, full=False)
    assert problems == [], f"{len(problems)} violations in {cases} cases:\n" + "\n".join(problems[:30])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "flush"), CASES)
async def test_every_call_failing_with_every_errno_keeps_every_promise(
    tmp_path: object, name: str, flush: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The full sweep: every call, with ENOSPC, EIO and EFBIG."""
    cases, problems = await _sweep(os.fspath(tmp_path), name, flush, monkeypatch, full=True)
    print(f"sweep {name}/{flush}: {cases} cases, {len(problems)} violations")
    assert problems == [], f"{len(problems)} violations in {cases} cases:\n" + "\n".join(problems[:30])
