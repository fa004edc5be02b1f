"""The widths of a segment's entries (``.index``, ``.timeindex``, ``.tagindex``, ``.keyindex``) are
defined once on each side: in ``adiskq/_csrc/core.h`` for every C file, and in the Python modules
that are the compiled core's reference. Read from the sources, so a C file that declares its own
width again, or a width changed on one side only, fails here before any byte is written wrong."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from adiskq._sansio import keyindex, run_entries, tags

CSRC: Final = Path(__file__).resolve().parents[2] / "adiskq" / "_csrc"
WIDTH: Final = re.compile(r"^#define\s+(\w*ENTRY_BYTES)\s+(\d+)", re.MULTILINE)


def test_core_h_defines_each_entry_width_as_the_reference_does() -> None:
    defined = {name: int(width) for name, width in WIDTH.findall((CSRC / "core.h").read_text())}
    assert defined == {
        "ADQ_INDEX_ENTRY_BYTES": run_entries.INDEX_ENTRY_BYTES,
        "ADQ_TIMEINDEX_ENTRY_BYTES": run_entries.TIMEINDEX_ENTRY_BYTES,
        "ADQ_TAG_ENTRY_BYTES": tags.ENTRY_BYTES,
        "ADQ_KEY_ENTRY_BYTES": keyindex.ENTRY_BYTES,
    }
    assert defined["ADQ_INDEX_ENTRY_BYTES"] == 24


def test_no_other_c_file_declares_an_entry_width() -> None:
    sources = sorted(path for path in CSRC.rglob("*") if path.suffix in (".c", ".h") and path.name != "core.h")
    assert len(sources) > 20, "the C sources moved: point CSRC at them"
    found = [f"{path.relative_to(CSRC)}: {name}" for path in sources for name, _ in WIDTH.findall(path.read_text())]
    assert found == [], "take the width from core.h (ADQ_*_ENTRY_BYTES)"
