"""Noticing that ``settings.json`` was replaced: a producer added partitions a group should follow."""

from __future__ import annotations

import os

from .._sansio.naming import SETTINGS_FILE
from .._storage.stream import StreamReader
from . import wakeup
from .notify import Notifier, Watch

__all__ = ["SettingsWatch"]


class SettingsWatch:
    """Notices when ``settings.json`` is replaced (a producer added partitions)."""

    def __init__(self, stream: StreamReader, notifier: Notifier, waiter: wakeup.Waiter) -> None:
        self.stream = stream
        self._path = os.path.join(stream.path, SETTINGS_FILE)
        self._signature = self._stat()
        self._notifier = notifier
        self._waiter = waiter
        self._watch: Watch | None = notifier.watch(stream.path, waiter, folder_suffix=SETTINGS_FILE)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def changed(self) -> bool:
        """True (once) when the settings file was replaced since the last look; reloads it then."""
        signature = self._stat()
        if signature == self._signature:
            return False
        self._signature = signature
        self.stream.refresh()
        return True

    def close(self) -> None:
        """Drop the watch; closing twice is harmless."""
        if self._watch is not None:
            self._notifier.unwatch(self._watch, self._waiter)
            self._watch = None
