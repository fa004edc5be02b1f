"""Every system call adiskq makes on a stream, counted, failed on purpose, or crashed after.

The sweeps of ``tests/torture/test_sweep_*.py`` walk each operation the way SQLite's I/O-error tests and the
ALICE study ("All File Systems Are Not Created Equal", OSDI 2014) do:

* **fault injection**: the k-th call on the stream's files fails with ENOSPC, EIO or EFBIG, for every k;
* **crash after every call**: before each call, the stream as a crash right there would leave it is
  saved twice: as the process dying (every write kept: a copy of the folder) and as the power
  failing (only what was fsynced kept: each file as of its last fsync/fdatasync, each folder's
  entries as of its last fsync, or, torn, with whole 512-byte sectors of unsynced appends kept).

Only calls on paths under the stream's folder count (the test's own files, Python's and pytest's
do not). The calls are the ``os`` and ``fcntl`` functions adiskq uses, looked up by attribute at
call time, so replacing the attributes reaches every caller.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

SECTOR_BYTES = 512

# name -> how to find the path a call touches from its arguments
_FD_CALLS = ("write", "writev", "pwrite", "fsync", "fdatasync", "ftruncate")
_PATH_CALLS = ("open", "mkdir", "unlink", "rename", "replace")
FAULTS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO, "EFBIG": errno.EFBIG, "short-ENOSPC": -errno.ENOSPC}
# A negative errno is a disk filling up during a write: the k-th call, a write, writes half of its
# bytes and returns that count; the next write on the stream fails with the errno.


class Call(NamedTuple):
    """One counted call: its number (from 1), the function, the path it touched."""

    number: int
    name: str
    path: str


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


class _Durable:
    """What a power cut would leave: file contents as of their last fsync, folder entries as of theirs."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.folders: dict[str, dict[str, tuple[bool, int]]] = {}  # path -> name -> (is a folder, inode)
        self.contents: dict[int, bytes] = {}  # inode -> bytes
        for folder, names, files in os.walk(root):
            self.sync_folder(folder)
            for name in files:
                path = os.path.join(folder, name)
                with open(path, "rb") as file:
                    self.contents[os.stat(path).st_ino] = file.read()
            del names

    def sync_folder(self, path: str) -> None:
        entries = {}
        for entry in os.scandir(path):
            info = entry.stat(follow_symlinks=False)
            entries[entry.name] = (stat.S_ISDIR(info.st_mode), info.st_ino)
        self.folders[path] = entries

    def sync_fd(self, fd: int, path: str) -> None:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            self.sync_folder(path)
        else:  # through /proc: adiskq's descriptors are often write-only
            with open(f"/proc/self/fd/{fd}", "rb") as file:
                self.contents[info.st_ino] = file.read()

    def materialize(self, target: str, *, torn: bool) -> None:
        """Write the durable state to ``target`` (torn: plus whole sectors of unsynced appends)."""

        def build(source: str, destination: str) -> None:
            os.mkdir(destination)
            for name, (is_folder, inode) in self.folders.get(source, {}).items():
                source_path, destination_path = os.path.join(source, name), os.path.join(destination, name)
                if is_folder:
                    build(source_path, destination_path)
                    continue
                content = self.contents.get(inode, b"")
                if torn:
                    content = _with_whole_sectors(content, source_path, inode)
                with open(destination_path, "wb") as file:
                    file.write(content)

        build(self.root, target)


def _with_whole_sectors(durable: bytes, path: str, inode: int) -> bytes:
    """The durable bytes plus the whole sectors of what was appended since (if the file is the same)."""
    try:
        if os.stat(path).st_ino != inode:
            return durable
        with open(path, "rb") as file:
            current = file.read()
    except OSError:
        return durable
    if not current.startswith(durable):
        return durable
    kept = len(current) // SECTOR_BYTES * SECTOR_BYTES
    return current[: max(kept, len(durable))]


class Syscalls:
    """Counts the calls on one stream's files; fails one, or saves crash states before each."""

    def __init__(self, root: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = os.path.realpath(root)
        self.calls: list[Call] = []
        self.fail_at: int | None = None
        self.errno = errno.EIO
        self.on_fault: Callable[[Call], None] | None = None  # runs just before the injected failure
        self.before_call: Callable[[Call], None] | None = None  # runs before each counted call
        self.active = False
        self._short_then = 0  # the errno the next write fails with, after a short write
        self.durable: _Durable | None = None
        self.errors: list[str] = []  # failures of the sweep's own bookkeeping
        self._lock = threading.RLock()
        self._in_hook = threading.local()
        for name in _FD_CALLS + _PATH_CALLS:
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name)))
        monkeypatch.setattr(fcntl, "flock", self._wrap("flock", fcntl.flock))

    def start(self, *, fail_at: int | None = None, code: int = errno.EIO, track_durability: bool = False) -> None:
        """Count from here (the state now is taken as durable when ``track_durability``)."""
        self.calls = []
        self._short_then = 0
        self.fail_at = fail_at
        self.errno = code
        self.durable = _Durable(self.root) if track_durability else None
        self.active = True

    def stop(self) -> int:
        """Stop counting (and failing); returns how many calls were counted."""
        self.active = False
        self.fail_at = None
        return len(self.calls)

    def _path(self, name: str, args: tuple[Any, ...]) -> str:
        if name in _FD_CALLS or name == "flock":
            return _fd_path(args[0])
        path = args[0]
        if not isinstance(path, str | bytes | os.PathLike):
            return ""
        return os.path.realpath(os.fsdecode(path))

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if not self.active or getattr(self._in_hook, "on", False):
                return real(*args, **kwargs)
            path = self._path(name, args)
            if not path.startswith(self.root):
                return real(*args, **kwargs)
            with self._lock:
                counted = Call(len(self.calls) + 1, name, path)
                self.calls.append(counted)
                self._in_hook.on = True
                try:
                    if self.before_call is not None:
                        self.before_call(counted)
                    if counted.number == self.fail_at and self.on_fault is not None:
                        self.on_fault(counted)
                finally:
                    self._in_hook.on = False
            if counted.number == self.fail_at:
                if self.errno < 0 and name == "write" and len(args[1]) > 1:
                    self.fail_at = None
                    self._short_then = -self.errno
                    return real(args[0], memoryview(args[1])[: len(args[1]) // 2])
                code = abs(self.errno)
                raise OSError(code, f"{os.strerror(code)} (injected at {name} #{counted.number})")
            if self._short_then and name in ("write", "writev", "pwrite"):
                code, self._short_then = self._short_then, 0
                if self.on_fault is not None:  # what readers can see now, the short write included
                    self._in_hook.on = True
                    try:
                        self.on_fault(counted)
                    finally:
                        self._in_hook.on = False
                raise OSError(code, f"{os.strerror(code)} (injected after a short write)")
            result = real(*args, **kwargs)
            if self.durable is not None and name in ("fsync", "fdatasync"):
                with self._lock:
                    try:
                        self.durable.sync_fd(args[0], path)
                    except Exception as error:  # the sweep's own failure: reported, never passed to adiskq
                        self.errors.append(f"tracking {name} of {path} failed: {error!r}")
            return result

        return call

    def save_crash_states(self, target: str, number: int) -> tuple[str, str, str]:
        """Save the stream as a crash before call ``number`` would leave it: (process death, power
        cut, power cut with torn sectors). Call from ``before_call``."""
        died, power, torn = (os.path.join(target, f"{number:05d}-{kind}") for kind in ("died", "power", "torn"))
        shutil.copytree(self.root, died, symlinks=True)
        assert self.durable is not None
        self.durable.materialize(power, torn=False)
        self.durable.materialize(torn, torn=True)
        return died, power, torn
