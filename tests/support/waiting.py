"""Test support: wait for a condition about files, woken by what changes them, never on a timer.

The condition is looked at again whenever a file in one of the ``folders`` is created, written,
moved or deleted (inotify; a folder watch covers the files directly in it), or, for the sync form,
when one of the ``processes`` exits (its pidfd).
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Callable, Iterable

import anyio
from asyncinotify import Inotify, Mask

_CHANGES = Mask.CREATE | Mask.MODIFY | Mask.MOVED_TO | Mask.DELETE | Mask.CLOSE_WRITE


def _watching(folders: Iterable[str]) -> Inotify:
    inotify = Inotify()
    for folder in folders:
        inotify.add_watch(folder, _CHANGES)
    return inotify


def wait_for(
    condition: Callable[[], bool],
    what: str,
    folders: Iterable[str],
    *,
    processes: Iterable[subprocess.Popen[bytes]] = (),
    timeout: float = 20.0,
) -> None:
    """Until ``condition()`` holds; AssertionError after ``timeout`` seconds, or at once when one
    of ``processes`` exits meanwhile."""
    deadline = time.monotonic() + timeout
    with contextlib.ExitStack() as stack:
        inotify = stack.enter_context(_watching(folders))
        exits: dict[int, subprocess.Popen[bytes]] = {}
        for process in processes:
            pidfd = os.pidfd_open(process.pid)
            stack.callback(os.close, pidfd)
            exits[pidfd] = process
        while not condition():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out after {timeout} s waiting for {what}"
            ready, _, _ = select.select([inotify.fd, *exits], [], [], remaining)
            for fd in ready:
                if fd == inotify.fd:
                    os.read(fd, 65536)  # which file changed does not matter: the condition decides
                elif exits[fd].poll() is not None:
                    raise AssertionError(f"process {exits[fd].args!r} exited while waiting for {what}")


async def until_changed(condition: Callable[[], bool], folders: Iterable[str]) -> None:
    """``wait_for`` for async tests (the caller bounds the time with ``anyio.fail_after``): the event
    loop waits on the inotify descriptor."""
    with _watching(folders) as inotify:
        while not condition():
            await anyio.wait_readable(inotify.fd)
            os.read(inotify.fd, 65536)
