"""The ``owner`` lock: one exclusive producer, or any number of shared ones, held with ``flock``.

An exclusive producer (the default) holds ``LOCK_EX``; shared producers (``shared=True``) hold
``LOCK_SH``, so the two kinds exclude each other while shared ones coexist (each then appends under
a partition's own lock, ``flocks.py``).

The kernel drops a ``flock`` when the last descriptor of its open file closes — including when the
holding process is killed — so there is never a stale lock to clean up (go-diskq's ``owner`` file
outlived crashed producers). An exclusive holder's text names it for error messages and ``stats``;
shared holders write nothing here (there are several): every producer is listed in ``writers/``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from typing import Final

from .._sansio.naming import OWNER_FILE
from .files import DEFAULT_FILE_MODE, flock_held, pread_exact, write_all
from .writers import describe_writers, live_writers

__all__ = ["OwnerLock", "describe_holder", "owner_text", "read_holder", "read_owner"]

# stats() probes the lock with a shared flock for an instant; a producer that loses that race
# tries again this many times, a millisecond apart, before calling the stream locked.
_PROBE_RETRIES: Final = 5


def describe_holder(info: dict[str, object] | None) -> str | None:
    """``pid 123 on host "box"``, from the owner file's text (or a lease's, or the Kafka gateway's hold)."""
    if not info:
        return None
    if info.get("kafka_group"):  # the Kafka gateway's hold on a group with live Kafka consumers
        return f"Kafka consumers through the gateway at pid {info.get('pid')} on host {info.get('host')!r}"
    return f"pid {info.get('pid')} on host {info.get('host')!r}"


def read_holder(fd: int) -> dict[str, object] | None:
    """The ``{"pid", "host", ...}`` a lock holder wrote into its file (owner, lease), or None."""
    raw = pread_exact(fd, 4096, 0)
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def owner_text(stream_path: str) -> dict[str, object] | None:
    """The owner file's ``{"id", "pid", "host"}`` as last written, without probing the lock (a
    producer empties it when it closes); None when there is none or it cannot be read."""
    try:
        fd = os.open(os.path.join(stream_path, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return read_holder(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_owner(stream_path: str) -> dict[str, object] | None:
    """The live producer's ``{"id", "pid", "host"}``, or None when no producer holds the lock."""
    try:
        fd = os.open(os.path.join(stream_path, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return (read_holder(fd) or {}) if flock_held(fd) else None
    finally:
        os.close(fd)


class OwnerLock:
    """The ``flock`` on ``STREAM/owner``: exclusive, or shared with ``shared=True``."""

    def __init__(self, stream_path: str, *, mode: int = DEFAULT_FILE_MODE, shared: bool = False) -> None:
        self.path = os.path.join(stream_path, OWNER_FILE)
        self.mode = mode
        self.shared = shared
        self.id = os.urandom(16).hex()  # random, like uuid4 (whose module costs 0.2 MiB)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False if another holder has it."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, self.mode)
        for attempt in range(_PROBE_RETRIES):
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == _PROBE_RETRIES - 1:
                    os.close(fd)
                    return False
                time.sleep(0.001)
            except BaseException:
                os.close(fd)
                raise
        if self.shared:
            self._fd = fd  # several hold it: each is named in writers/, not here
            return True
        try:
            info = {"id": self.id, "pid": os.getpid(), "host": socket.gethostname()}
            os.ftruncate(fd, 0)
            write_all(fd, json.dumps(info).encode())
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                os.close(fd)
                raise
            # A full disk must not stop a producer from opening to delete data; the text is only
            # a courtesy for error messages.
        self._fd = fd
        return True

    def holder(self) -> tuple[str | None, bool | None]:
        """Who holds the lock now, in words (or None), and whether they are shared producers."""
        stream_path = os.path.dirname(self.path)
        writers = [w for w in live_writers(stream_path) if w.id != self.id]
        if writers:
            return describe_writers(writers), any(w.shared for w in writers)
        owner = read_owner(stream_path)
        if owner:
            return describe_holder(owner), False
        return None, None  # nobody named (a producer that could not register on a full disk)

    def release(self) -> None:
        """Drop the lock; the file stays (deleting it would race with the next producer)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if not self.shared:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
