"""The crash producer, noting every fsync so the parent can simulate a power cut.

    python -m tests.support.powerloss_producer PATH FLUSH BACKEND ROUND FSYNC_LOG

Each fsync/fdatasync that returns appends ``path<TAB>size`` to FSYNC_LOG: the file's size when the
call began, which is what the call made durable. Everything after it is lost in a power cut.
"""

from __future__ import annotations

import os
import sys

import anyio

from tests.support import crash_producer


def note_fsyncs(log_path: str) -> None:
    """Wrap os.fsync and os.fdatasync so each durable point is written to the log."""
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def noted(fd: int, real: object = real) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            size = os.fstat(fd).st_size
            real(fd)  # type: ignore[operator]
            os.write(log, f"{path}\t{size}\n".encode())

        setattr(os, name, noted)


if __name__ == "__main__":
    path, flush, backend, round_, log_path = sys.argv[1:6]
    note_fsyncs(log_path)
    anyio.run(crash_producer.main, path, flush, int(round_), backend=backend)
