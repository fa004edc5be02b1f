"""docs/ARCHITECTURE.md names files that exist: a module moved or renamed takes its line with it.

Every backticked file name the page gives (``_async/lane.py``, ``wire/codec.py``, ``log/append.c``,
``benchmarks/peers/bench_compare.py``) must be the end of the path of a file in the repository, its
folders included; a bare name (``notify.py``) must be some file's name. A folder (``tests/support/``)
is checked the same way when its first part is a folder of the repository's (``writers/`` is a
stream's, not the repository's).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent
PAGE: Final = ROOT / "docs" / "ARCHITECTURE.md"
# A backticked path of a source or documentation file, or a folder (ending in /).
NAMED_FILE: Final = re.compile(r"`([\w./-]+\.(?:py|c|h|md|go|toml)|[\w./-]+/)`")


def _repository_files() -> list[str]:
    """The repository's files, as git knows them (tracked, and new ones not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [name for name in listed if (ROOT / name).exists()]


def _named(text: str, files: list[str]) -> list[str]:
    """The files and the repository's folders the text names."""
    folders = {part for file in files for part in file.split("/")[:-1]}
    return sorted(
        name
        for name in set(NAMED_FILE.findall(text))
        if not name.endswith("/") or name.lstrip("./").split("/")[0] in folders
    )


def _exists(name: str, files: list[str]) -> bool:
    """Whether ``name`` is the end of some file's path (a folder: of some file's folder)."""
    if name.endswith("/"):
        folder = name.lstrip("./")
        return any(f"/{folder}" in f"/{file}" for file in files)
    return any(f"/{file}".endswith(f"/{name.lstrip('./')}") for file in files)


def test_every_file_the_architecture_page_names_exists() -> None:
    files = _repository_files()
    named = _named(PAGE.read_text(), files)
    assert len(named) > 100, "the page names the modules it describes"
    missing = [name for name in named if not _exists(name, files)]
    assert missing == [], "docs/ARCHITECTURE.md names files that are not there: update the page"


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("_async/producer.py", True),
        ("wire/codec.py", True),
        ("log/append.c", True),
        ("benchmarks/peers/", True),
        ("_async/no_such_module.py", False),
        ("_storage/lane.py", False),  # a real name in the wrong folder
        ("peers/compare/nothing/", False),
    ],
)
def test_the_check_tells_a_moved_file(name: str, found: bool) -> None:
    """The check itself: a name in another folder than the file's is not found."""
    assert _exists(name, _repository_files()) is found
