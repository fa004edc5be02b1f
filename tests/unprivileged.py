"""Running test code as an unprivileged user, to prove what needs which permission.

Tests run as root in CI, and root ignores file permissions; so a test that claims "readers need
only read permission" forks a child that drops to the 'nobody' user and does the reading there.
"""

from __future__ import annotations

import os
import pickle
import pwd
import traceback
import warnings
from collections.abc import Callable

import pytest
from helpers.preload import import_all_of_adiskq


def as_nobody(action: Callable[[], object]) -> object:
    """Run ``action`` in a forked child that dropped to the 'nobody' user; returns what it returned.

    Fails (never skips) when that cannot be arranged: the test must prove the point or say why not.
    """
    if os.geteuid() != 0:
        pytest.fail(
            "this test proves that readers need only read permission by reading as another user, "
            "which needs root (CI runs as root); run the suite as root"
        )
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
