"""Each hand-inlined copy of a hot path against the general path it copies: same files, same answers.

``Producer.push`` spells out ``Lane.try_write_one`` (while the lane is ``inline``), which spells out
``Lane.can_write_inline`` and ``write_inline``; ``push`` also spells out the disk guard's ``admit``.
The same script of messages is pushed four ways:

- ``inline``: as a user pushes (``push``'s own copy of the inline write and of ``admit``);
- ``try_write_one``: with the lane never ``inline``, so ``push`` calls ``Lane.try_write_one``;
- ``batched``: with ``try_write_one`` declining every record, so each is written by a batch's
  commit (``SegmentWriter.append``, the general write);
- ``push_many``: each message as ``push_many([Record(...)])``: the general encoding, the guard's
  ``admit`` itself and the shares' write.

Every way must write byte-identical segment files and give the same receipts, and with a disk guard
whose measurements are scripted, refuse the same pushes. Runs on both loops (``anyio_backend``);
``scripts/test`` runs this folder on both cores.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

import adiskq
from adiskq._async import lane as lane_module
from adiskq._async import producer as producer_module
from adiskq._errors import DiskUsageRefusedError
from adiskq._sansio.retention import DiskUsage
from adiskq._storage.disk_guard import DiskGuard

pytestmark = pytest.mark.anyio

WAYS: Final = ("inline", "try_write_one", "batched", "push_many")
SEGMENT_BYTES: Final = 4096  # a roll every few dozen messages
BASE_NS: Final = 1_700_000_000_000_000_000


def _messages(count: int) -> list[dict[str, Any]]:
    """The script: keys of both types, tags, headers, sizes over a roll, explicit timestamps."""
    return [
        {
            "value": (b"m%05d-" % n).ljust(20 + (n * 37) % 180, b"x"),
            "key": f"customer-{n % 7}" if n % 3 else b"raw-%d" % (n % 4),
            "tag": None if n % 4 else f"kind-{n % 3}",
            "headers": {"n": b"%d" % n} if n % 5 == 0 else None,
            "timestamp": BASE_NS + n * 1_000,
        }
        for n in range(count)
    ]


@pytest.fixture
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Reroutes ``push`` for the way under test (the patches undone after it)."""
    chosen: str = request.param
    if chosen in ("try_write_one", "batched"):

        def never_inline(self: lane_module.Lane) -> None:
            self.inline = False

        monkeypatch.setattr(lane_module.Lane, "_note_batches", never_inline)
    if chosen == "batched":
        monkeypatch.setattr(lane_module.Lane, "try_write_one", lambda *_: -1)
    return chosen


async def _push(producer: adiskq.Producer, way: str, message: dict[str, Any]) -> object:
    """The message pushed ``way``: its receipt, or the name of the error that refused it."""
    try:
        if way == "push_many":
            (receipt,) = await producer.push_many([adiskq.Record(**message)])
            return receipt
        return await producer.push(**message)
    except DiskUsageRefusedError:
        return "refused"


def _files(path: str) -> dict[str, str]:
    """Every segment file of the stream: its SHA-256, by its path in the stream."""
    found = {}
    for folder, _, names in os.walk(path):
        for name in names:
            if name.endswith((".data", ".index", ".timeindex", ".tagindex", ".keyindex")):
                full = os.path.join(folder, name)
                found[os.path.relpath(full, path)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return dict(sorted(found.items()))


async def _run(path: str, way: str, messages: list[dict[str, Any]], **options: Any) -> list[object]:
    async with adiskq.Producer(path, segment_size_bytes=SEGMENT_BYTES, **options) as producer:
        answers = [await _push(producer, way, message) for message in messages]
        if way == "inline":  # the script really took the copies under test
            assert all(lane.inline for lane in producer._lanes)
    return answers


async def _expected(tmp_path: Path, kind: str, **options: Any) -> tuple[list[object], dict[str, str]]:
    """The general path's answers and files for the script: ``batched`` (the general write), or for
    the disk guard (``refuse_writes_above`` given) ``push_many`` (the guard's own ``admit``)."""
    path = str(tmp_path / f"reference-{kind}")
    with pytest.MonkeyPatch.context() as patch:
        if "refuse_writes_above" in options:
            # push_many calls neither method the ways patch: its path is its own in every way
            answers = await _run(path, "push_many", _messages(300), **options)
        else:

            def never_inline(self: lane_module.Lane) -> None:
                self.inline = False

            patch.setattr(lane_module.Lane, "_note_batches", never_inline)
            patch.setattr(lane_module.Lane, "try_write_one", lambda *_: -1)
            answers = await _run(path, "batched", _messages(300), **options)
    return answers, _files(path)


@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize("partitions", [1, 3])
async def test_every_way_writes_the_same_files_and_receipts(tmp_path: Path, way: str, partitions: int) -> None:
    """``push``'s inline copy, ``try_write_one`` and ``push_many`` write what a batch's commit writes."""
    expected_answers, expected_files = await _expected(tmp_path, "plain", partitions=partitions)
    path = str(tmp_path / "stream")
    answers = await _run(path, way, _messages(300), partitions=partitions)
    assert answers == expected_answers
    assert all(isinstance(answer, adiskq.Receipt) for answer in answers)
    assert len({name.split(os.sep)[1] for name in expected_files}) == partitions  # every partition written
    assert sum(name.endswith(".index") for name in expected_files) > 2 * partitions  # and segments rolled
    assert _files(path) == expected_files


@pytest.mark.parametrize("way", WAYS, indirect=True)
async def test_every_way_writes_the_same_compressed_files(tmp_path: Path, way: str) -> None:
    """The same on a compressed stream (compact segments: no ``.timeindex``, a ``.tagindex`` once tagged)."""
    from support.compression import trained_dictionary

    options = {"partitions": 2, "compression": "zstd", "zstd_dictionary": trained_dictionary()}
    expected_answers, expected_files = await _expected(tmp_path, "compressed", **options)
    path = str(tmp_path / "stream")
    assert await _run(path, way, _messages(300), **options) == expected_answers
    assert _files(path) == expected_files


def _scripted_usage() -> Iterator[DiskUsage]:
    """Measurements of a file system filling up: 90% is reached at the 11th."""
    for measured in itertools.count():
        yield DiskUsage(total_bytes=1_000_000, used_bytes=890_000 + 1_000 * measured)


@pytest.mark.parametrize("way", WAYS, indirect=True)
async def test_every_way_admits_and_refuses_the_same_pushes(
    tmp_path: Path, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``push``'s spelled-out ``admit`` spends the budget and measures as ``DiskGuard.admit`` does."""
    measurements: list[int] = []

    def guard(path: str, level: float) -> DiskGuard:
        usage = _scripted_usage()

        def measure(_: str) -> DiskUsage:
            measured = next(usage)
            measurements.append(measured.used_bytes)
            return measured

        return DiskGuard(path, level, measure=measure)

    monkeypatch.setattr(producer_module, "DiskGuard", guard)
    path = str(tmp_path / "stream")
    answers = await _run(path, way, _messages(300), partitions=2, refuse_writes_above=0.9)
    reference_measurements = list(measurements)
    measurements.clear()
    expected_answers, expected_files = await _expected(tmp_path, "guarded", partitions=2, refuse_writes_above=0.9)
    assert answers == expected_answers
    assert measurements == reference_measurements
    refused = [n for n, answer in enumerate(answers) if answer == "refused"]
    assert 50 < refused[0] < 250  # the script spends several budgets, then is refused
    assert refused == list(range(refused[0], len(answers)))  # and every push after
    assert _files(path) == expected_files
