"""Waiting for a stream that does not exist yet: a reader opened with ``wait_for_stream=True``.

The stream's folder, or the folders above it, may be missing. The wait watches the nearest folder
that exists (with inotify, for any new entry; the stream's own folder for its ``settings.json``,
which a producer writes last when it creates a stream), looks again once it is armed, and sleeps
until an event or the notifier's backup poll; then it goes down to the new nearest folder. Where
inotify is missing the poll alone wakes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .._errors import ClosedError
from .._sansio.naming import SETTINGS_FILE
from . import wakeup
from .notify import Notifier

__all__ = ["nearest_folder", "wait_for_stream"]


def nearest_folder(path: str) -> tuple[str, bool]:
    """The folder to watch for ``path`` to become a stream, and whether it is ``path`` itself."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return path, True
    folder = os.path.dirname(path)
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder, False


async def wait_for_stream(
    path: str,
    *,
    notifier: Notifier,
    waiter: wakeup.Waiter,
    exists: Callable[[], bool],
    closed: Callable[[], bool],
    closed_message: str,
) -> None:
    """Return once ``exists()`` is true (a producer created the stream at ``path``).

    ``waiter`` is the reader's own, so closing the reader wakes this wait (``ClosedError``).
    """
    while not exists():
        if closed():
            raise ClosedError(closed_message)
        folder, is_stream_folder = nearest_folder(path)
        watch = notifier.watch(folder, waiter, folder_suffix=SETTINGS_FILE if is_stream_folder else "")
        try:
            notifier.read_unread()
            waiter.arm()
            try:
                # Looked at again once armed: a creation before the arm is seen here, one after wakes us.
                if exists() or nearest_folder(path) != (folder, is_stream_folder):
                    continue
                await notifier.wait(waiter, notifier.poll_seconds, kernel=True)
            finally:
                waiter.disarm()
        finally:
            notifier.unwatch(watch, waiter)
    if closed():
        raise ClosedError(closed_message)
