"""The widths of a segment's entries (``.index``, ``.timeindex``, ``.tagindex``, ``.keyindex``) are
defined once on each side: in ``adiskq/_csrc/core.h`` for every C file, and in
``adiskq/_sansio/entries.py`` for every Python module. Read from the sources, so a module or C file
that declares a width (or an entry's layout) again, or a width changed on one side only, fails here
before any byte is written wrong."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

from adiskq._sansio import entries

CHECKOUT: Final = Path(__file__).resolve().parents[2]
CSRC: Final = CHECKOUT / "adiskq" / "_csrc"
C_WIDTH: Final = re.compile(r"^#define\s+(\w*ENTRY_BYTES)\s+(\d+)", re.MULTILINE)
# The layouts of an .index and a .timeindex entry, as struct spells them.
ENTRY_LAYOUTS: Final = ("<QQQ", "<Qq")


def test_core_h_defines_each_entry_width_as_entries_py_does() -> None:
    defined = {name: int(width) for name, width in C_WIDTH.findall((CSRC / "core.h").read_text())}
    assert defined == {
        "ADQ_INDEX_ENTRY_BYTES": entries.INDEX_ENTRY_BYTES,
        "ADQ_TIMEINDEX_ENTRY_BYTES": entries.TIMEINDEX_ENTRY_BYTES,
        "ADQ_TAG_ENTRY_BYTES": entries.TAG_ENTRY_BYTES,
        "ADQ_KEY_ENTRY_BYTES": entries.KEY_ENTRY_BYTES,
    }
    assert defined["ADQ_INDEX_ENTRY_BYTES"] == 24


def test_no_other_c_file_declares_an_entry_width() -> None:
    sources = sorted(path for path in CSRC.rglob("*") if path.suffix in (".c", ".h") and path.name != "core.h")
    assert len(sources) > 20, "the C sources moved: point CSRC at them"
    found = [f"{path.relative_to(CSRC)}: {name}" for path in sources for name, _ in C_WIDTH.findall(path.read_text())]
    assert found == [], "take the width from core.h (ADQ_*_ENTRY_BYTES)"


def _declarations(path: Path) -> list[str]:
    """``X = <int>`` for a name ending in ENTRY_BYTES, and ``struct.Struct(<an entry's layout>)``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                f"{ast.unparse(target)} = {node.value.value!r}"
                for target in targets
                if ast.unparse(target).endswith("ENTRY_BYTES") and isinstance(node.value.value, int)
            ]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("struct.Struct", "Struct")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in ENTRY_LAYOUTS
        ):
            found.append(ast.unparse(node))
    return found


def test_no_other_python_module_declares_an_entry_width_or_layout() -> None:
    package = CHECKOUT / "adiskq"
    own = package / "_sansio" / "entries.py"
    assert len(_declarations(own)) >= 4, "entries.py no longer declares the widths: point this test at their home"
    found = [
        f"{path.relative_to(package)}: {declared}"
        for path in sorted(package.rglob("*.py"))
        if path != own
        for declared in _declarations(path)
    ]
    assert found == [], "take the width or layout from adiskq/_sansio/entries.py"
