"""The bytes on disk of a fixed script of writes (``tests/format_script.py``) never change by accident.

Every file the script writes is compared, by its SHA-256, with ``format_manifest.sha256``: a change
to the write path that moves one byte of a ``.data``, an index, a side column, a dictionary or the
settings fails here, naming the files. A deliberate format change rewrites the manifest
(``python tests/format_script.py --update``) in the same commit. Runs on both loops; ``scripts/test``
runs this folder on both cores, which must write the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import format_script
import pytest

pytestmark = pytest.mark.anyio


async def test_the_script_writes_the_manifest_s_bytes(tmp_path: Path) -> None:
    await format_script.write(str(tmp_path))
    found = format_script.digests(str(tmp_path))
    expected = format_script.read_manifest()
    assert format_script.differences(found, expected) == []
    assert len(found) == len(expected) > 50


def test_the_manifest_covers_every_kind_of_file() -> None:
    """Each stream of the script is there, with each kind of segment file it should hold."""
    paths = list(format_script.read_manifest())
    streams = {
        "singles",
        "batched",
        "many/one",
        "many/spread",
        "compressed",
        "shared",
        "kafka",
        "kafka-compressed",
        "kafka-headers",
    }
    assert {path.split("/parts/")[0] for path in paths if path.endswith(".index")} == streams
    for suffix in (".data", ".index", ".timeindex", ".tagindex", ".keyindex", "settings.json"):
        assert any(path.endswith(suffix) for path in paths), suffix
    assert any(path.startswith("compressed/dictionaries/") for path in paths)


def test_the_clock_is_pinned_while_the_script_writes() -> None:
    """Default timestamps come from the pinned clock (so the manifest holds on any day)."""
    import time

    with format_script.pinned_clock():
        first, second = time.time_ns(), time.time_ns()
    assert (first, second) == (format_script.CLOCK_START_NS, format_script.CLOCK_START_NS + 1_000)
    assert time.time_ns() > second  # and the real clock is back
