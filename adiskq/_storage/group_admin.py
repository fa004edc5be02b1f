"""Administration of named consumer groups from outside them: who holds a group, moving its offsets.

A member of a group holds its partitions through ``flock`` leases on files under ``groups/NAME/``
(the OS drops a lease when its holder dies). ``holders`` finds every such file that is locked now,
whatever its name, so it keeps working as the lease files change; ``offsets.lock``, which members
hold only for the instant of a commit, is not a lease. ``set_offsets`` stores offsets under that
same lock (``offsets.update_offsets``), so it never interleaves with a member's commit; and it holds
the leases of the partitions it moves (as a member would) from its check that no member is there
until the offsets are stored, so a member that joins meanwhile cannot take them: it takes them once
they are free, and reads the new offsets then (a member reads its start after taking a lease).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator, Mapping

from .._sansio.naming import partition_dir_name
from .files import DEFAULT_FILE_MODE, dir_mode, flock_held
from .leases import LEASE_SUFFIX, LEASES_DIR
from .lock import describe_holder, read_holder
from .offsets import LOCK_FILE, OFFSETS_FILE, TAGS_FILE, ensure_group_dir, group_dir, update_offsets

__all__ = ["GroupInUse", "holders", "holding_leases", "set_offsets"]


class GroupInUse(Exception):
    """Live members hold the group; ``holders`` lists ``(lease file, holder)``."""

    def __init__(self, held: list[tuple[str, str]]) -> None:
        super().__init__(", ".join(sorted({holder for _, holder in held})))
        self.holders = held


def _lease_files(directory: str) -> Iterator[str]:
    for root, _, names in os.walk(directory):
        for name in names:
            if name in (OFFSETS_FILE, LOCK_FILE, TAGS_FILE) or name.startswith("."):
                continue
            yield os.path.join(root, name)


def holders(stream_path: str, name: str, *, ours: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """``(lease file, holder)`` for every lease of the group that a live member holds now (not
    counting the lease files in ``ours``, held by the caller)."""
    held: list[tuple[str, str]] = []
    for path in _lease_files(group_dir(stream_path, name)):
        if path in ours:
            continue
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


@contextlib.contextmanager
def holding_leases(
    stream_path: str, name: str, partitions: list[int], mode: int = DEFAULT_FILE_MODE
) -> Iterator[frozenset[str]]:
    """Hold the leases of these partitions for the block; GroupInUse if a member holds one."""
    leases_dir = os.path.join(ensure_group_dir(stream_path, name, durable=False, mode=mode), LEASES_DIR)
    with contextlib.suppress(FileExistsError):
        os.mkdir(leases_dir, dir_mode(mode))
    held: dict[str, int] = {}
    try:
        for partition in partitions:
            path = os.path.join(leases_dir, partition_dir_name(partition) + LEASE_SUFFIX)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise GroupInUse(holders(stream_path, name, ours=frozenset(held))) from None
            except BaseException:
                os.close(fd)
                raise
            held[path] = fd
        yield frozenset(held)
    finally:
        for fd in held.values():
            os.close(fd)  # drops the flock


def set_offsets(
    stream_path: str,
    name: str,
    offsets: Mapping[int, int],
    *,
    replace: bool = False,
    mode: int = DEFAULT_FILE_MODE,
    only_if_unused: bool = False,
) -> dict[int, int]:
    """Store these committed offsets over the group's others (kept, unless ``replace``); returns all.

    ``replace`` is for an offsets file that cannot be read: it is replaced without being read.
    ``only_if_unused`` raises ``GroupInUse`` (storing nothing) while any member of the group lives,
    and holds the partitions' leases from that check until the offsets are stored.
    """
    if not only_if_unused:
        return update_offsets(stream_path, name, offsets, mode=mode, replace=replace)
    with holding_leases(stream_path, name, sorted(offsets), mode) as ours:
        held = holders(stream_path, name, ours=ours)
        if held:
            raise GroupInUse(held)
        return update_offsets(stream_path, name, offsets, mode=mode, replace=replace)
