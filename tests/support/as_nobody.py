"""Runs the adiskq command line, or a Python snippet, as the unprivileged user ``nobody``:
``python -m support.as_nobody ARGS`` or ``python -m support.as_nobody --python CODE ARGS``.

Started by ``tests/support/unprivileged.py`` (``nobody_command``), which puts a copy of the adiskq package
that every user may read first on ``PYTHONPATH`` and names it in ``ADISKQ_READABLE_PACKAGE``. The test
suite runs as root, and root reads any file, so permission errors can only be seen by another user.
The interpreter lives where ``nobody`` may not go (under /root), so it cannot be started as
``nobody``; instead this process starts as root, imports everything the code may need, then gives up
root for good (groups, group, user) before running it.
"""

from __future__ import annotations

import io
import os
import pwd
import sys

# What the commands import when they run, imported while the interpreter's files are readable.
import aiofiles  # noqa: F401
import anyio
import anyio._backends._asyncio  # noqa: F401
import rich.box
import rich.progress
import rich.text  # noqa: F401

import adiskq.cli
import adiskq.cli.output
from support.preload import import_all_of_adiskq, only_this_copy


def _warm_up() -> None:
    """Render a table and a progress bar once, so rich has loaded what rendering needs."""
    out = adiskq.cli.output.console(file=io.StringIO())
    table = adiskq.cli.output.table("a", "b", right=("b",))
    table.add_row("x", "1")
    out.print(table)
    out.print("text")
    with adiskq.cli.output.progress_bar("warm", total=1) as bar:
        bar.advance(bar.task_ids[0], 1)


def main() -> None:
    # adiskq must come from the readable copy: what is imported lazily after the drop (and the
    # compiled core's file) is read from there, not from a checkout nobody may not enter.
    package = os.environ.get("ADISKQ_READABLE_PACKAGE")
    if not package or not adiskq.__file__ or not adiskq.__file__.startswith(package + os.sep):
        raise SystemExit(
            f"adiskq was imported from {adiskq.__file__}, not a readable copy: use tests/support/unprivileged.py"
        )
    import_all_of_adiskq()
    _warm_up()
    only_this_copy()
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)
    try:
        os.setuid(0)
    except PermissionError:
        pass
    else:
        raise SystemExit("could not give up root")
    os.chdir("/")
    if sys.argv[1:2] == ["--python"]:
        code = sys.argv[2]
        sys.argv = ["-c", *sys.argv[3:]]
        exec(compile(code, "<as nobody>", "exec"), {"__name__": "__main__"})
        return
    sys.argv = ["adiskq", *sys.argv[1:]]
    adiskq.cli.main()


if __name__ == "__main__":
    main()
