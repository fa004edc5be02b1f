"""Running test code as an unprivileged user, to prove what needs which permission: the one place
every test that does so goes through.

Tests run as root in CI, and root ignores file permissions; so a test that claims "readers need
only read permission" runs the reading as the 'nobody' user, one of two ways:

- ``as_nobody(action)``: a forked child of the test process drops to 'nobody' and calls ``action``;
  every adiskq module is imported first (``support/preload.py``), so nothing is read from the
  checkout after the drop;
- ``run_as_nobody(...)`` / ``nobody_command(...)``: a new process (``support/as_nobody.py``) starts as
  root, imports adiskq from ``readable_package()`` (a copy of the package every user may read),
  drops to 'nobody', then runs the command line or a Python snippet.

Either way nothing is imported from the checkout as 'nobody', so the suite passes in a checkout under
a private folder (a home directory, mode 700): ``scripts/test`` runs these tests again from such a
copy to prove it. ``tests/examples/test_unprivileged_runs.py`` fails if a test drops privileges
anywhere else.
"""

from __future__ import annotations

import atexit
import os
import pickle
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable

import pytest

import adiskq
from support.paths import TESTS_DIR
from support.preload import import_all_of_adiskq, only_this_copy

__all__ = ["as_nobody", "nobody_command", "readable_package", "run_as_nobody"]

_readable: list[str] = []  # the session's readable copy of the package, once made


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "this test proves what an unprivileged user may do by running code as another user, which "
            "needs root (CI runs as root); run the suite as root"
        )


def readable_package() -> str:
    """A folder holding a copy of the adiskq package that every user may read (one a session,
    removed at exit): put on ``sys.path``, it is where a process that drops to 'nobody' imports
    adiskq from, wherever the checkout lies."""
    if not _readable:
        root = tempfile.mkdtemp(prefix="adiskq-readable-")
        shutil.copytree(
            os.path.dirname(adiskq.__file__),
            os.path.join(root, "adiskq"),
            ignore=shutil.ignore_patterns("__pycache__", "_csrc", "*.egg-info"),
        )
        for folder, _, files in os.walk(root):
            os.chmod(folder, 0o755)
            for name in files:
                path = os.path.join(folder, name)
                os.chmod(path, os.stat(path).st_mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        atexit.register(shutil.rmtree, root, True)
        _readable.append(root)
    return _readable[0]


def nobody_command(*args: str, code: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``adiskq ARGS`` (or Python ``code`` with ``args`` as
    ``sys.argv[1:]``) as 'nobody', adiskq imported from ``readable_package()``; run it in ``TESTS_DIR``."""
    _require_root()
    command = [sys.executable, "-m", "support.as_nobody", *(("--python", code) if code is not None else ()), *args]
    package = readable_package()
    environment = {**os.environ, "PYTHONPATH": package, "ADISKQ_READABLE_PACKAGE": package}
    return command, environment


def run_as_nobody(*args: str, code: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``nobody_command(*args, code=code)`` and return what it did (text output)."""
    command, environment = nobody_command(*args, code=code)
    return subprocess.run(
        command, cwd=TESTS_DIR, env=environment, capture_output=True, text=True, timeout=timeout, check=False
    )


def as_nobody(action: Callable[[], object]) -> object:
    """Run ``action`` in a forked child that dropped to the 'nobody' user; returns what it returned.

    Fails (never skips) when that cannot be arranged: the test must prove the point or say why not.
    """
    _require_root()
    import_all_of_adiskq()  # the child cannot import from a checkout nobody may not enter
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() while other threads run (anyio's idle workers from earlier
        # tests may): the child only reads files and writes to a pipe, touching no lock they hold.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            only_this_copy()
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            try:
                result: object = ("ok", action())
            except BaseException as error:
                result = ("error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(result, pipe)
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        raw = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged child failed"
    outcome, value = pickle.loads(raw)
    assert outcome == "ok", value
    return value
