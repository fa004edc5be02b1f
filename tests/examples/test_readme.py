"""The README's complete programs (the Python blocks that end in ``anyio.run(main)``) run as printed."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
from support.paths import ROOT_DIR

README = pathlib.Path(ROOT_DIR, "README.md").read_text()
PROGRAMS = [block for block in re.findall(r"```python\n(.*?)```", README, re.DOTALL) if "anyio.run(main" in block]


def title(block: str) -> str:
    """A test id: the first name the program imports from adiskq, or the first line that is not an import."""
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith(("import", "from"))]
    return re.sub(r"\W+", "-", lines[0])[:40].strip("-")


def test_the_readme_has_programs() -> None:
    """The quick start and each feature's example are found (the pattern still matches)."""
    assert len(PROGRAMS) >= 5


@pytest.mark.parametrize("program", PROGRAMS, ids=[title(block) for block in PROGRAMS])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_readme_program_runs(program: str, backend: str, tmp_path: pathlib.Path) -> None:
    """Run in a fresh folder (its streams are relative paths), on asyncio and on Trio, it exits 0."""
    if backend == "trio":
        program = program.replace("anyio.run(main)", 'anyio.run(main, backend="trio")')
    script = tmp_path / "program.py"
    script.write_text(program)
    result = subprocess.run(
        [sys.executable, os.fspath(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
