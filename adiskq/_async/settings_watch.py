"""Noticing that ``settings.json`` was replaced: a producer added partitions a group should follow."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._sansio.naming import SETTINGS_FILE
from .._storage.stream import StreamReader
from . import wakeup

if TYPE_CHECKING:
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

    ``notifier`` None: the watch is made later, by ``watch_with`` (a consumer's first wait). The
    file's signature is taken now and the first ``changed()`` compares with it, so a replacement
    between the two is noticed.
    """

    def __init__(
        self, stream: StreamReader, notifier: Notifier | None, waiter: wakeup.Waiter, *, on_events: bool = False
    ) -> None:
        self.stream = stream
        self._path = os.path.join(stream.path, SETTINGS_FILE)
        self._signature = self._stat()
        self._notifier: Notifier | None = None
        self._noting = _NotingWaiter(waiter) if on_events else None
        # The watch wakes the noting stand-in, which wakes the reader's waiter.
        self._waiter: wakeup.Waiter = waiter if self._noting is None else self._noting  # type: ignore[assignment]
        self._watch: Watch | None = None
        self._closed = False
        if notifier is not None:
            self.watch_with(notifier)

    def watch_with(self, notifier: Notifier) -> None:
        """Watch the file with ``notifier`` (once; nothing after ``close``)."""
        if self._notifier is None and not self._closed:
            self._notifier = notifier
            self._watch = notifier.watch(self.stream.path, self._waiter, folder_suffix=SETTINGS_FILE)
            if self._noting is not None:
                self._noting.noted = True  # a replacement before the watch began shows at the next look

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
        self._closed = True
        if self._watch is not None and self._notifier is not None:
            self._notifier.unwatch(self._watch, self._waiter)
            self._watch = None
