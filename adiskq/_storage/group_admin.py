"""Administration of named consumer groups from outside them: who holds a group, moving its offsets.

A member of a group holds its partitions through ``flock`` leases on files under ``groups/NAME/``
(the OS drops a lease when its holder dies). ``holders`` finds every such file that is locked now,
whatever its name, so it keeps working as the lease files change; ``offsets.lock``, which members
hold only for the instant of a commit, is not a lease. ``set_offsets`` stores offsets under that
same lock (``offsets.update_offsets``), so it never interleaves with a member's commit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from .files import DEFAULT_FILE_MODE, flock_held
from .lock import describe_holder, read_holder
from .offsets import LOCK_FILE, OFFSETS_FILE, group_dir, update_offsets

__all__ = ["holders", "set_offsets"]


def _lease_files(directory: str) -> Iterator[str]:
    for root, _, names in os.walk(directory):
        for name in names:
            if name in (OFFSETS_FILE, LOCK_FILE) or name.startswith("."):
                continue
            yield os.path.join(root, name)


def holders(stream_path: str, name: str) -> list[tuple[str, str]]:
    """``(lease file, holder)`` for every lease of the group that a live member holds now."""
    held: list[tuple[str, str]] = []
    for path in _lease_files(group_dir(stream_path, name)):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if flock_held(fd):
                info = read_holder(fd)
                held.append((path, (describe_holder(info) if info and "pid" in info else None) or "a member"))
        except OSError:
            continue
        finally:
            os.close(fd)
    return held


def set_offsets(
    stream_path: str, name: str, offsets: Mapping[int, int], *, replace: bool = False, mode: int = DEFAULT_FILE_MODE
) -> dict[int, int]:
    """Store these committed offsets over the group's others (kept, unless ``replace``); returns all.

    ``replace`` is for an offsets file that cannot be read: it is replaced without being read.
    """
    return update_offsets(stream_path, name, offsets, mode=mode, replace=replace)
