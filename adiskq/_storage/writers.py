"""The open producers of a stream: ``writers/`` holds one small file per producer, flocked while open.

A file is named by its producer's id and holds ``{"id", "pid", "host", "shared", "opened_ns"}``. Its
producer takes an exclusive ``flock`` on it before the file has its name (it is written under a dot
name, locked, then renamed), and keeps it until it closes (the file is unlinked first). So a named
file whose lock is free belongs to a producer that died: ``live_writers`` skips it, and the next
producer to open removes it. The kernel drops the lock of a killed process, so nothing goes stale.
Readers (``stats``, ``check``) only need read permission: a shared ``flock`` probe works on a
read-only descriptor.
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

from .._sansio.naming import WRITERS_DIR
from .._sansio.values import WriterInfo
from .files import DEFAULT_FILE_MODE, dir_mode, flock_held, pread_exact, write_all

__all__ = ["WriterEntry", "describe_writers", "live_writers"]

_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
# A dot file (a registration being written) older than this belongs to a producer that died first.
_STALE_SCRATCH_SECONDS: Final = 60.0


def describe_writers(writers: list[WriterInfo]) -> str | None:
    """``pid 12 on host "a" (shared), pid 13 on host "a" (shared)``, or None for no writer."""
    if not writers:
        return None
    return ", ".join(f"pid {w.pid} on host {w.host!r}{' (shared)' if w.shared else ''}" for w in writers)


def _parse(raw: bytes) -> WriterInfo | None:
    try:
        data = json.loads(raw)
        return WriterInfo(str(data["id"]), int(data["pid"]), str(data["host"]), bool(data["shared"]))
    except (ValueError, KeyError, TypeError):
        return None


def live_writers(stream_path: str, *, remove_dead: bool = False) -> list[WriterInfo]:
    """Every producer that has the stream open now, oldest registration first.

    ``remove_dead`` also deletes the files producers that died left (only a producer does this:
    readers never write).
    """
    directory = os.path.join(stream_path, WRITERS_DIR)
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[tuple[int, str, WriterInfo]] = []
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith("."):
            if remove_dead:
                _remove_stale_scratch(path)
            continue
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        except OSError:
            continue  # gone meanwhile (closed), or not ours to read
        try:
            if not flock_held(fd):
                if remove_dead:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                continue
            info = _parse(pread_exact(fd, 4096, 0))
            opened = os.fstat(fd).st_mtime_ns
        except OSError:
            continue
        finally:
            os.close(fd)
        if info is not None:
            found.append((opened, name, info))
    return [info for _, _, info in sorted(found, key=lambda item: (item[0], item[1]))]


def _remove_stale_scratch(path: str) -> None:
    with contextlib.suppress(OSError):
        if time.time() - os.lstat(path).st_mtime > _STALE_SCRATCH_SECONDS:
            os.unlink(path)


class WriterEntry:
    """This producer's file in ``writers/``, flocked from ``register`` to ``unregister``."""

    def __init__(self, stream_path: str, writer_id: str, *, shared: bool, mode: int = DEFAULT_FILE_MODE) -> None:
        self.directory = os.path.join(stream_path, WRITERS_DIR)
        self.id = writer_id
        self.shared = shared
        self.mode = mode
        self.path = os.path.join(self.directory, writer_id)
        self._fd: int | None = None

    def register(self) -> None:
        """Write and lock the file under a dot name, then give it its name (a best effort: a full
        disk must not stop a producer from opening, so ENOSPC leaves it unlisted)."""
        if self._fd is not None:
            return
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.directory, dir_mode(self.mode))
        scratch = os.path.join(self.directory, f".{self.id}.tmp")
        info = {
            "id": self.id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "shared": self.shared,
            "opened_ns": time.time_ns(),
        }
        fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, self.mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # nobody else knows this name yet: never waits
            write_all(fd, json.dumps(info).encode())
            os.rename(scratch, self.path)
        except OSError as error:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(scratch)
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                return
            raise
        self._fd = fd

    def unregister(self) -> None:
        """Remove the file, then let go of its lock; twice is harmless."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(fd)
