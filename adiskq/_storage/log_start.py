"""A partition's log start offset: the first offset its readers see, raised by Kafka's DeleteRecords.

The file, beside the partition's segments::

    parts/NNNNNN/log-start.json   {"log_start_offset": N}

written whole through a temporary file that is fsynced and renamed over it, then the folder fsynced
(``files.atomic_write_json``): a crash leaves the old value or the new one, never a torn file. No
file means the partition starts at its oldest segment. The value only ever rises.

- Readers start at ``max(oldest segment's base, N)``, capped at the partition's next offset:
  ``bounds``, ``stats``, a cursor that opens a segment below it (OffsetOutOfRangeError with
  ``oldest_offset`` N, as for what retention deleted), ListOffsets' earliest and Fetch.
- Vacuum deletes every sealed segment whose records all lie below N, whatever the retention.
- A value past the partition's end (a power cut took back records written with flush="async" after
  the start was raised past them) is read as the end; ``check`` reports it and ``--repair`` (as does
  the next producer's open) lowers it to the end. A file that does not parse hides nothing (read as
  absent); ``check`` reports it and ``--repair`` removes it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

from .files import DEFAULT_FILE_MODE, atomic_write_json, fsync_dir, read_json

__all__ = [
    "LOG_START_FILE",
    "load_log_start",
    "log_start_problem",
    "read_log_start",
    "remove_log_start",
    "save_log_start",
    "settle_log_start",
]

LOG_START_FILE: Final = "log-start.json"


def read_log_start(directory: str) -> int | None:
    """The stored log start offset (None: no file); ValueError for a file that does not hold one."""
    try:
        data = read_json(os.path.join(directory, LOG_START_FILE))
    except FileNotFoundError:
        return None
    offset = data.get("log_start_offset") if isinstance(data, dict) else None
    if type(offset) is not int or offset < 0:
        raise ValueError(f"{LOG_START_FILE} holds no log start offset (a whole number from 0): {data!r}")
    return offset


def load_log_start(directory: str) -> int:
    """The partition's log start offset as readers take it (0: none, or a damaged file)."""
    if not os.access(os.path.join(directory, LOG_START_FILE), os.F_OK):  # the usual case: one cheap look
        return 0
    try:
        return read_log_start(directory) or 0
    except (OSError, ValueError):
        return 0


def save_log_start(directory: str, offset: int, *, mode: int = DEFAULT_FILE_MODE) -> None:
    """Store ``offset`` as the partition's log start, durably (the caller raises it only)."""
    atomic_write_json(os.path.join(directory, LOG_START_FILE), {"log_start_offset": offset}, mode=mode)


def remove_log_start(directory: str) -> None:
    """Remove the file (``check --repair`` of a damaged one), durably."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, LOG_START_FILE))
        fsync_dir(directory)


def settle_log_start(directory: str, next_offset: int, *, mode: int = DEFAULT_FILE_MODE) -> str | None:
    """Recovery's part (a producer's open): a log start past the partition's end is lowered to the
    end, a file that does not parse is removed; what was done, in words (None: nothing to do)."""
    try:
        start = read_log_start(directory)
    except (OSError, ValueError):
        remove_log_start(directory)
        return f"removed {LOG_START_FILE}, which held no log start offset (readers ignored it)"
    if start is None or start <= next_offset:
        return None
    save_log_start(directory, next_offset, mode=mode)
    return f"lowered the log start offset from {start} to {next_offset}, the partition's end"


def log_start_problem(directory: str, next_offset: int | None) -> str | None:
    """What ``check`` says of the partition's log start file (None: nothing wrong); ``next_offset``:
    the partition's end, if known."""
    try:
        start = read_log_start(directory)
    except ValueError as error:
        return f"{error}; readers ignore it"
    if start is not None and next_offset is not None and start > next_offset:
        return (
            f"the log start offset {start} is past the partition's end {next_offset} (records written after "
            "DeleteRecords were lost in a crash): no record from the end on would be readable"
        )
    return None
