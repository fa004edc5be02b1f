"""A topic is created whole or not at all: every system call of the creation failed in turn, and a
crash before every call; each leaves ROOT with no topic or the whole one, and the gateway's start
removes what a crash left. The rename that publishes the topic comes only once everything in it is
on stable storage."""

from __future__ import annotations

import errno
import os
import pathlib
import shutil

import anyio
import pytest
from confluent_kafka.admin import AdminClient
from gateway_process import GatewayProcess
from support.cli import invoke
from support.syscalls import Call, Syscalls

import adiskq
from adiskq._async import partition_writes
from adiskq._storage.stream import StreamReader, StreamWriter
from adiskq._storage.stream_creation import SCRATCH_PREFIX, build_stream, remove_leftovers

PARTITIONS = 3


def _tree(path: str) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``path``, by relative path."""
    found: dict[str, bytes | None] = {}
    for folder, folders, files in os.walk(path):
        for name in folders:
            found[os.path.relpath(os.path.join(folder, name), path)] = None
        for name in files:
            full = os.path.join(folder, name)
            found[os.path.relpath(full, path)] = pathlib.Path(full).read_bytes()
    return found


def _whole_or_nothing(root: str) -> list[str]:
    """What is wrong with ROOT after a failed or crashed creation (the leftovers removed first)."""
    remove_leftovers(root)
    entries = os.listdir(root)
    if not entries:
        return []
    if entries != ["t"]:
        return [f"ROOT holds {entries}"]
    try:
        stream = StreamReader.open(os.path.join(root, "t"))
    except Exception as error:
        return [f"the topic is there but does not open: {error!r}"]
    if stream.partition_count != PARTITIONS:
        return [f"the topic has {stream.partition_count} partitions, not {PARTITIONS}"]

    async def write_each() -> None:
        async with adiskq.Producer(os.path.join(root, "t")) as producer:
            for partition in range(PARTITIONS):
                await partition_writes.write(producer, partition, [adiskq.Record(b"after")])

    anyio.run(write_each)
    stats = adiskq.stats(os.path.join(root, "t"))
    if [p.next_offset for p in stats.partitions] != [1] * PARTITIONS:
        return [f"the topic does not take a message a partition: {stats}"]
    return []


def _counted_calls(root: str, monkeypatch: pytest.MonkeyPatch) -> int:
    syscalls = Syscalls(root, monkeypatch)
    syscalls.start()
    build_stream(root, "t", PARTITIONS)
    count = syscalls.stop()
    monkeypatch.undo()
    shutil.rmtree(os.path.join(root, "t"))
    return count


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC, errno.EMFILE])
def test_every_failed_call_leaves_no_topic_or_the_whole_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    root = str(tmp_path / "root")
    os.mkdir(root)
    count = _counted_calls(root, monkeypatch)
    assert count > 20, f"only {count} calls counted"
    problems = []
    for number in range(1, count + 1):
        with monkeypatch.context() as patch:
            syscalls = Syscalls(root, patch)
            syscalls.start(fail_at=number, code=code)
            failed = None
            try:
                build_stream(root, "t", PARTITIONS)
            except OSError as error:
                failed = error
            syscalls.stop()
        if failed is None and not os.path.isdir(os.path.join(root, "t")):
            problems.append(f"call #{number}: no error and no topic")
        leftovers = [name for name in os.listdir(root) if name.startswith(SCRATCH_PREFIX)]
        if leftovers:  # a failed creation cleans up after itself
            problems.append(f"call #{number}: a failed creation left {leftovers}")
        problems += [f"call #{number}: {problem}" for problem in _whole_or_nothing(root)]
        shutil.rmtree(os.path.join(root, "t"), ignore_errors=True)
    assert problems == [], "\n".join(problems[:20])


def test_a_crash_before_every_call_leaves_no_topic_or_the_whole_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process killed before each call; and the rename happens only when the scratch stream is,
    as a power cut would leave it, exactly what is on disk (every file and folder fsynced)."""
    root = str(tmp_path / "root")
    os.mkdir(root)
    saved = tmp_path / "crashes"
    saved.mkdir()
    syscalls = Syscalls(root, monkeypatch)
    states: list[tuple[Call, str]] = []
    problems: list[str] = []

    def before(call: Call) -> None:
        state = str(saved / f"{call.number:05d}")
        shutil.copytree(root, state, symlinks=True)
        states.append((call, state))
        if call.name == "rename" and os.path.basename(call.path).startswith(SCRATCH_PREFIX):
            assert syscalls.durable is not None
            power = str(saved / f"{call.number:05d}-power")
            syscalls.durable.materialize(power, torn=False)
            scratch = os.path.basename(call.path)
            if _tree(os.path.join(power, scratch)) != _tree(call.path):
                problems.append(f"call #{call.number}: the scratch stream is renamed before all of it is fsynced")

    syscalls.before_call = before
    syscalls.start(track_durability=True)
    build_stream(root, "t", PARTITIONS)
    syscalls.stop()
    assert any(call.name == "rename" for call, _state in states), "the creation renamed nothing"
    for call, state in states:
        problems += [f"crash before call #{call.number} ({call.name}): {p}" for p in _whole_or_nothing(state)]
    assert problems == [], "\n".join(problems[:20])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_gateway_removes_a_creation_a_crash_cut_short(tmp_path: pathlib.Path, backend: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    scratch = root / (SCRATCH_PREFIX + "0123456789abcdef")
    StreamWriter.open(str(scratch), partitions=2).close()
    with GatewayProcess(root, backend) as gateway:
        assert os.listdir(root) == []
        assert AdminClient({"bootstrap.servers": gateway.bootstrap}).list_topics(timeout=10).topics == {}
        assert "a topic creation that did not finish" in gateway.log()


def test_check_names_an_unfinished_creation_and_repair_removes_it(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    build_stream(str(root), "done", 1)
    scratch = SCRATCH_PREFIX + "0123456789abcdef"
    StreamWriter.open(str(root / scratch), partitions=2).close()
    found = invoke("check", str(root))
    assert found.exit_code == 1
    assert scratch in found.output
    assert "did not finish" in found.output
    assert sorted(os.listdir(root)) == sorted([scratch, "done"])  # a check alone changes nothing
    repaired = invoke("check", "--repair", str(root))
    assert repaired.exit_code == 0, repaired.output
    assert os.listdir(root) == ["done"]
