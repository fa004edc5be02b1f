"""Noticing that ``settings.json`` was replaced: a producer added partitions a group should follow."""

from __future__ import annotations

import os

from .._sansio.naming import SETTINGS_FILE
from .._storage.stream import StreamReader
from . import wakeup
from .notify import Notifier, Watch

__all__ = ["SettingsWatch"]


class _NotingWaiter:
    """Stands for a reader's waiter in the settings watch: notes that the watch fired, then wakes it.

    The notifier wakes a watch's waiters that are not ``fired``; this one never is, so every event
    (and every overflow) is noted.
    """

    __slots__ = ("noted", "waiter")
    fired = False

    def __init__(self, waiter: wakeup.Waiter) -> None:
        self.waiter = waiter
        self.noted = True  # look once at first

    def wake(self) -> None:
        self.noted = True
        self.waiter.wake()


class SettingsWatch:
    """Notices when ``settings.json`` is replaced (a producer added partitions).

    ``on_events``: ``changed()`` looks at the file only after the watch fired (or when asked to,
    ``force=True``, after a poll's timeout): a consumer's wait then costs no ``stat``.
    """

    def __init__(
        self, stream: StreamReader, notifier: Notifier, waiter: wakeup.Waiter, *, on_events: bool = False
    ) -> None:
        self.stream = stream
        self._path = os.path.join(stream.path, SETTINGS_FILE)
        self._signature = self._stat()
        self._notifier = notifier
        self._noting = _NotingWaiter(waiter) if on_events else None
        # The watch wakes the noting stand-in, which wakes the reader's waiter.
        self._waiter: wakeup.Waiter = waiter if self._noting is None else self._noting  # type: ignore[assignment]
        self._watch: Watch | None = notifier.watch(stream.path, self._waiter, folder_suffix=SETTINGS_FILE)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def changed(self, *, force: bool = False) -> bool:
        """True (once) when the settings file was replaced since the last look; reloads it then."""
        noting = self._noting
        if noting is not None:
            if not (noting.noted or force):
                return False
            noting.noted = False
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
