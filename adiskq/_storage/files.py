"""Small, careful file operations: no symlinks followed, whole writes, atomic replaces, dir fsyncs."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Sequence
from typing import Final

from .._errors import CorruptStreamError

__all__ = [
    "DEFAULT_FILE_MODE",
    "atomic_write_json",
    "fsync_dir",
    "open_append",
    "open_read",
    "pread_exact",
    "read_file",
    "read_json",
    "write_all",
    "writev_all",
]

DEFAULT_FILE_MODE: Final = 0o644
# Segment files are never symlinks: following one would let a planted link redirect writes (or
# reads) outside the stream, so every open refuses them (ELOOP).
_NOFOLLOW: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_IOV_MAX: Final = 1024
_JSON_READ_BYTES: Final = 65_536  # settings, offsets and ledgers are far smaller: one read and the end


def _refuse_link(path: str) -> CorruptStreamError:
    return CorruptStreamError(
        f"{path} is a symbolic link: adiskq never follows links inside a stream, since one could "
        "redirect its reads or writes elsewhere. Replace it with the real file, or remove it"
    )


def open_read(path: str) -> int:
    """A read-only descriptor; FileNotFoundError if missing, CorruptStreamError for a symlink."""
    try:
        return os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refuse_link(path) from None
        raise


def open_append(path: str, *, create: bool, mode: int = DEFAULT_FILE_MODE) -> int:
    """A write-only, append-only descriptor (created if ``create``); never through a symlink."""
    flags = os.O_WRONLY | os.O_APPEND | _NOFOLLOW | (os.O_CREAT if create else 0)
    try:
        return os.open(path, flags, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refuse_link(path) from None
        raise


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte; a regular file may accept fewer bytes than asked (at a full disk)."""
    written = os.write(fd, data)
    if written == len(data):
        return
    view = memoryview(data)
    while written < len(view):
        written += os.write(fd, view[written:])


def writev_all(fd: int, buffers: Sequence[bytes]) -> None:
    """Write all buffers in order with as few ``writev`` calls as the kernel allows."""
    if len(buffers) == 1:
        write_all(fd, buffers[0])
        return
    for start in range(0, len(buffers), _IOV_MAX):
        chunk = buffers[start : start + _IOV_MAX]
        expected = sum(map(len, chunk))
        written = os.writev(fd, chunk)
        if written != expected:
            # A short write (full disk): finish byte by byte through write_all.
            write_all(fd, memoryview(b"".join(chunk))[written:])


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Up to ``size`` bytes at ``position``; fewer only where the file ends."""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def dir_mode(file_mode: int) -> int:
    """The mode of a folder whose files get ``file_mode``: x wherever they have r."""
    return file_mode | ((file_mode & 0o444) >> 2)


def flock_held(fd: int) -> bool:
    """True while someone holds the file's exclusive ``flock`` (probed with a shared one for an
    instant, which only an exclusive holder refuses)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def read_file(path: str) -> bytes | None:
    """A whole file's bytes (never through a symlink), or None if it does not exist."""
    try:
        fd = open_read(path)
    except FileNotFoundError:
        return None
    try:
        return pread_exact(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """Make the folder's entries (files created, renamed or deleted) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, mode: int = DEFAULT_FILE_MODE, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` through a temporary file renamed over it: readers see the old
    or the new file, never a torn one (and one that has the old file open or mapped keeps it)."""
    directory = os.path.dirname(path) or "."
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, mode)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if durable:
        fsync_dir(directory)


def atomic_write_json(path: str, value: object, *, mode: int = DEFAULT_FILE_MODE, durable: bool = True) -> None:
    """Replace ``path`` with ``value`` as JSON, as ``atomic_write`` does."""
    atomic_write(path, (json.dumps(value, indent=2, sort_keys=True) + "\n").encode(), mode=mode, durable=durable)


def read_json(path: str) -> object:
    """The JSON value in ``path`` (FileNotFoundError, OSError or ValueError as they come).

    Read with ``os.read`` until the end: a buffered file object would add an ``ioctl``, two
    ``lseek`` and two ``fstat`` calls to each of the small files read on every open.
    """
    fd = open_read(path)
    try:
        chunks = []
        while chunk := os.read(fd, _JSON_READ_BYTES):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return json.loads(b"".join(chunks))
