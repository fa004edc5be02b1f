"""The shared producers' locks under ``locks/``: one ``flock`` per file, dropped by the kernel when
its holder dies, so there is no stale lock and no timeout to break one.

* ``locks/setup`` — held while a shared producer opens (creates the stream, grows it, recovers) or
  closes (writes the clean-close record when it is the last one);
* ``locks/vacuum`` — one vacuum at a time;
* ``locks/turn`` — a shared producer's turn at writing, taken before any partition's lock (and
  ``turn.queue``): producers take turns, writing every partition during their turn;
* ``locks/partition-NNNNNN`` — held around every append to that partition: the holder checks the
  partition's tail, appends, and lets go. Beside it, ``partition-NNNNNN.queue`` keeps it fair.

``flock`` is not fair: a holder that lets go and takes the lock again at once (a producer pushing in
a loop) wins over a process the kernel has only just woken, so a waiter could starve. So a waiter
takes the ``.queue`` lock exclusively before it waits for the lock itself, and an attempt that does
not wait (``try_acquire``) first checks, with a shared ``.queue`` lock, that nobody is queued: while
someone is, it fails and the caller queues too.

The order they are taken in is always setup, then vacuum, then the turn, then a partition (the Spark sink takes
several partitions, in ascending order), so no two producers can wait for each other.

The looks that do not wait (``try_acquire``, ``contended``) never raise for a failed probe of the
queue (``flock`` may fail, e.g. ``ENOLCK``): they answer as if someone were queued, so the caller lets
go or takes the waiting road, which is always safe. A holder that got an exception instead would
skip the release that follows, and keep every other writer waiting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Final

from .._sansio.naming import LOCKS_DIR, partition_lock_name
from .files import DEFAULT_FILE_MODE, dir_mode

__all__ = ["FileLock", "partition_lock", "setup_lock", "turn_lock", "vacuum_lock"]

_FLAGS: Final = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class FileLock:
    """An exclusive ``flock`` on one file of ``locks/`` (created when first taken)."""

    __slots__ = ("_fd", "_queue", "held", "mode", "path")

    def __init__(self, path: str, *, mode: int = DEFAULT_FILE_MODE, queued: bool = False) -> None:
        self.path = path
        self.mode = mode
        self._fd: int | None = None
        # The lock waiters queue on, for locks that are taken often (see the module docstring).
        self._queue = FileLock(path + ".queue", mode=mode) if queued else None
        self.held = False

    def _descriptor(self) -> int:
        fd = self._fd
        if fd is None:
            directory = os.path.dirname(self.path)
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory, dir_mode(self.mode))
            fd = self._fd = os.open(self.path, _FLAGS, self.mode)
        return fd

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; False if another holder has it."""
        if self.held:
            return True
        queue = self._queue
        if queue is not None and not queue._probe():
            return False  # a waiter is queued: it goes first
        try:
            fcntl.flock(self._descriptor(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            if queue is not None:
                queue._unlock()
        self.held = True
        return True

    def contended(self) -> bool:
        """True when another holder is queued for this lock (only a queued lock knows)."""
        queue = self._queue
        if queue is None:
            return False
        if not queue._probe():
            return True
        queue._unlock()
        return False

    def _probe(self) -> bool:
        """Take this (queue) lock shared without waiting: True if taken (the caller unlocks), False
        if a waiter holds it, or if the probe itself failed (see the module docstring)."""
        try:
            fcntl.flock(self._descriptor(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: queued; any other: cannot tell, so answer "queued"
            return False
        return True

    def acquire(self) -> None:
        """Take the lock, waiting for its holder (holds are short: an append, an open, a vacuum)."""
        if self.held:
            return
        if self._queue is None:
            fcntl.flock(self._descriptor(), fcntl.LOCK_EX)
        else:
            with self._queue:  # first in the queue, then waiting for the holder to let go
                fcntl.flock(self._descriptor(), fcntl.LOCK_EX)
        self.held = True

    def release(self) -> None:
        """Let go of the lock; harmless when not held."""
        if self.held:
            self.held = False
            self._unlock()

    def _unlock(self) -> None:
        """``LOCK_UN``; should even that fail, close the file, which drops the lock for certain (a lock
        believed released but still held would stop every other writer)."""
        fd = self._fd
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            self._fd = None
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Let go and close the file; twice is harmless."""
        fd, self._fd = self._fd, None
        self.held = False
        if fd is not None:
            # Closing the last descriptor drops the lock too; Linux frees the descriptor even when
            # close reports an error, so there is nothing to retry.
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._queue is not None:
            self._queue.close()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _path(stream_path: str, name: str) -> str:
    return os.path.join(stream_path, LOCKS_DIR, name)


def setup_lock(stream_path: str, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock shared producers hold while they open or close."""
    return FileLock(_path(stream_path, "setup"), mode=mode)


def vacuum_lock(stream_path: str, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock a vacuum holds: one at a time."""
    return FileLock(_path(stream_path, "vacuum"), mode=mode)


def turn_lock(stream_path: str, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock a shared producer holds for its turn at writing (before any partition's lock)."""
    return FileLock(_path(stream_path, "turn"), mode=mode, queued=True)


def partition_lock(stream_path: str, partition: int, mode: int = DEFAULT_FILE_MODE) -> FileLock:
    """The lock held around every append to ``partition``."""
    return FileLock(_path(stream_path, partition_lock_name(partition)), mode=mode, queued=True)
