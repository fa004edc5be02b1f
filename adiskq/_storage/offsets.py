"""Committed offsets of named consumer groups: ``groups/NAME/offsets.json``.

The file maps each partition (as a string) to the next offset the group will read, the same shape
as Spark's offsets. It is replaced atomically (write a temporary file, fsync, rename, fsync the
folder), so after a crash it holds the old or the new value, never a torn one.

Members of a group store through ``update_offsets``: under ``groups/NAME/offsets.lock`` (a
``flock``, dropped by the OS if the holder dies) they read the file, change only the partitions
they hold, and replace it, so members holding different partitions never undo each other's commits.
A member stopped while it holds that lock (SIGSTOP, a debugger) keeps it: every wait for it is
bounded (``timeout_seconds``, ``LockTimeoutError`` naming the holder), so the others go on.

A group opened with ``tags=`` also keeps ``groups/NAME/tags.json``, ``{"tags": [sorted tags]}``
(written the same way when a member opens with other tags than stored; deleted when one opens
without): what its lag counts (``adiskq/_storage/lag.py``). Members that disagree: the last opened wins.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Final

from .._errors import CorruptStreamError
from .._sansio.naming import GROUPS_DIR, group_folder, group_of_folder
from .files import DEFAULT_FILE_MODE, atomic_write_json, dir_mode, fsync_dir, read_json
from .flocks import SHARED_LOCK_TIMEOUT_SECONDS, FileLock

__all__ = [
    "OFFSETS_FILE",
    "ensure_group_dir",
    "group_dir",
    "list_groups",
    "load_group_tags",
    "load_offsets",
    "save_group_tags",
    "save_offsets",
    "update_offsets",
]

OFFSETS_FILE: Final = "offsets.json"
LOCK_FILE: Final = "offsets.lock"
TAGS_FILE: Final = "tags.json"


def group_dir(stream_path: str, name: str) -> str:
    """The folder of a named group: ``groups/`` and the name, or its encoding for a name that is not
    a plain folder name (a Kafka group id such as ``app:billing``: ``naming.group_folder``)."""
    return os.path.join(stream_path, GROUPS_DIR, group_folder(name))


def list_groups(stream_path: str) -> list[str]:
    """Names of the groups that have a folder, sorted (encoded folder names decoded)."""
    try:
        folders = os.listdir(os.path.join(stream_path, GROUPS_DIR))
    except FileNotFoundError:
        return []
    found = []
    for folder in folders:
        name = group_of_folder(folder)
        if name is not None and os.path.isdir(os.path.join(stream_path, GROUPS_DIR, folder)):
            found.append(name)
    return sorted(found)


def load_offsets(stream_path: str, name: str) -> dict[int, int]:
    """Partition -> next offset to read, as last committed; empty if never committed."""
    path = os.path.join(group_dir(stream_path, name), OFFSETS_FILE)
    try:
        data = read_json(path)
    except FileNotFoundError:
        return {}
    except ValueError as error:
        raise CorruptStreamError(f"{path} is not valid JSON ({error}); delete it to restart the group") from None
    if not isinstance(data, dict):
        raise CorruptStreamError(f"{path} does not hold a JSON object; delete it to restart the group")
    try:
        return {int(partition): int(offset) for partition, offset in data.items()}
    except (TypeError, ValueError):
        raise CorruptStreamError(f"{path} holds something other than offsets; delete it to restart the group") from None


def ensure_group_dir(stream_path: str, name: str, *, durable: bool, mode: int) -> str:
    """The group's folder, created (with ``groups/``) if missing; ``durable`` fsyncs the new entries."""
    directory = group_dir(stream_path, name)
    if not os.path.isdir(directory):
        groups = os.path.dirname(directory)
        folder_mode = dir_mode(mode)
        for folder in (groups, directory):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, folder_mode)
        if durable:
            fsync_dir(groups)
            fsync_dir(stream_path)
    return directory


def save_offsets(
    stream_path: str, name: str, offsets: Mapping[int, int], *, durable: bool = True, mode: int = DEFAULT_FILE_MODE
) -> None:
    """Replace the group's committed offsets atomically."""
    directory = ensure_group_dir(stream_path, name, durable=durable, mode=mode)
    atomic_write_json(
        os.path.join(directory, OFFSETS_FILE),
        {str(partition): offset for partition, offset in sorted(offsets.items())},
        durable=durable,
        mode=mode,
    )


def update_offsets(
    stream_path: str,
    name: str,
    offsets: Mapping[int, int],
    *,
    durable: bool = True,
    mode: int = DEFAULT_FILE_MODE,
    replace: bool = False,
    timeout_seconds: float = SHARED_LOCK_TIMEOUT_SECONDS,
) -> dict[int, int]:
    """Store ``offsets`` over the group's committed ones (other partitions kept); returns all of them.

    Runs under the group's lock, so concurrent members (threads or processes) each keep their own
    partitions' commits; waiting for it at most ``timeout_seconds`` (0: not at all), then
    ``LockTimeoutError`` (nothing stored). ``replace`` stores ``offsets`` alone without reading what
    is stored (for an offsets file that cannot be read).
    """
    directory = ensure_group_dir(stream_path, name, durable=durable, mode=mode)
    lock = FileLock(os.path.join(directory, LOCK_FILE), mode=mode, stream_path=stream_path)
    try:
        lock.acquire(timeout_seconds)
        stored = None if replace else load_offsets(stream_path, name)
        merged = {**(stored or {}), **offsets}
        if merged != stored:
            save_offsets(stream_path, name, merged, durable=durable, mode=mode)
        return merged
    finally:
        lock.close()  # releases the flock


def load_group_tags(stream_path: str, name: str) -> frozenset[str] | None:
    """The tags the group was last opened with (None: every message; also for a file that is not
    one this module writes, so a damaged one makes the lag count everything, never fail)."""
    try:
        data = read_json(os.path.join(group_dir(stream_path, name), TAGS_FILE))
    except (FileNotFoundError, ValueError):
        return None
    tags = data.get("tags") if isinstance(data, dict) else None
    if not isinstance(tags, list) or not tags or not all(isinstance(tag, str) for tag in tags):
        return None
    return frozenset(tags)


def save_group_tags(
    stream_path: str, name: str, tags: frozenset[str] | None, *, durable: bool = True, mode: int = DEFAULT_FILE_MODE
) -> None:
    """Store the tags a group is opened with (None: delete them); nothing is written when unchanged."""
    path = os.path.join(ensure_group_dir(stream_path, name, durable=durable, mode=mode), TAGS_FILE)
    if load_group_tags(stream_path, name) == tags:
        return
    if tags is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        if durable:
            fsync_dir(os.path.dirname(path))
        return
    atomic_write_json(path, {"tags": sorted(tags)}, durable=durable, mode=mode)
