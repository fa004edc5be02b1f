"""Write-fault injection for tests: writes or fdatasync to chosen files fail as a full or broken disk would."""

from __future__ import annotations

import os
from typing import Any

import pytest


class DiskFaults:
    """Makes writes (or fdatasync) to files with a given suffix fail, as a full or broken disk would."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.failing: dict[str, int] = {}  # writes to files with this suffix fail with this errno
        self.failing_syncs: dict[str, int] = {}  # the same for fdatasync
        self.short_write_then_fail = False
        self.short_write_min_bytes = 2  # only a write of at least this many bytes is cut short
        real_write, real_writev, real_fdatasync = os.write, os.writev, os.fdatasync

        def path_of(fd: int) -> str:
            try:
                return os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                return ""

        def failure(fd: int, failing: dict[str, int]) -> int | None:
            path = path_of(fd)
            for suffix, code in failing.items():
                if path.endswith(suffix):
                    return code
            return None

        def write(fd: int, data: Any) -> int:
            code = failure(fd, self.failing)
            if code is not None:
                if self.short_write_then_fail and len(data) >= self.short_write_min_bytes:
                    self.short_write_then_fail = False
                    return real_write(fd, memoryview(data)[: len(data) // 2])
                raise OSError(code, os.strerror(code))
            return real_write(fd, data)

        def writev(fd: int, buffers: Any) -> int:
            code = failure(fd, self.failing)
            if code is not None:
                raise OSError(code, os.strerror(code))
            return real_writev(fd, buffers)

        def fdatasync(fd: int) -> None:
            code = failure(fd, self.failing_syncs)
            if code is not None:
                raise OSError(code, os.strerror(code))
            real_fdatasync(fd)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "writev", writev)
        monkeypatch.setattr(os, "fdatasync", fdatasync)
