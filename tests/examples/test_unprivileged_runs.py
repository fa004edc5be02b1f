"""Tests that run code as another user all go through ``tests/support/unprivileged.py``, which imports adiskq
from a copy every user may read: the suite then passes in a checkout under a private folder."""

from __future__ import annotations

import os
import pathlib
import re

from support.paths import TESTS_DIR
from support.unprivileged import readable_package, run_as_nobody

# The only files that may give up root: the helper and the process it starts.
DROPPING_PRIVILEGES = re.compile(r"\bset(e?uid|e?gid|groups)\(")
ALLOWED = {os.path.join("support", "unprivileged.py"), os.path.join("support", "as_nobody.py")}


def test_only_the_unprivileged_helper_gives_up_root() -> None:
    """No test drops to another user on its own (that is how a run from a private folder broke
    before): each goes through tests/support/unprivileged.py."""
    offenders = [
        str(path.relative_to(TESTS_DIR))
        for path in pathlib.Path(TESTS_DIR).rglob("*.py")
        if str(path.relative_to(TESTS_DIR)) not in ALLOWED and DROPPING_PRIVILEGES.search(path.read_text())
    ]
    assert offenders == []


def test_code_run_as_nobody_imports_adiskq_from_the_readable_copy() -> None:
    """A snippet run as nobody gets adiskq (and a module nothing imported before the drop) from a
    copy of the package every user may read, not from the checkout."""
    done = run_as_nobody(
        "x",
        code="import os, sys, adiskq, adiskq.cli.upgrade; print(os.geteuid(), adiskq.__file__, sys.argv[1:])",
    )
    assert done.returncode == 0, done.stderr
    uid, imported_from, argv = done.stdout.split(maxsplit=2)
    assert int(uid) != 0
    assert imported_from.startswith(readable_package() + os.sep)
    assert argv.strip() == "['x']"
    assert os.stat(readable_package()).st_mode & 0o005 == 0o005  # anyone may enter and list it
