"""Offsets committed by Kafka consumer groups, stored as the library's own groups store theirs.

A Kafka group NAME's committed offsets for topic T live in stream T's ``groups/NAME/offsets.json``
(``adiskq/_storage/offsets.py``: partition -> next offset, replaced atomically and fsynced, under
the group's ``offsets.lock``), so ``adiskq groups`` shows them and ``adiskq offsets --reset-to``
moves them, as for a ``ConsumerGroup``. Beside it, two files only the gateway writes::

    groups/NAME/kafka-metadata.json   {"PARTITION": {"offset": N, "metadata": "...", "leader_epoch": E}}:
                                      the metadata string and leader epoch of the last commit, kept
                                      only when the string is not empty or the epoch is not -1
                                      (either key may be absent: "" and -1). They are answered only
                                      while offsets.json still holds that same offset, so offsets
                                      moved by hand never come back with stale metadata or epoch.
    groups/NAME/kafka-group.json      {"protocol_type": "consumer"}: the protocol type of the Kafka
                                      group that last had members, so a group whose members all left
                                      (Empty) is still listed as a consumer group after a restart, as
                                      Kafka keeps it. Absent: a group that only committed offsets.
    groups/NAME/kafka.lock            flock'ed by the gateway while the Kafka group has members,
                                      holding {"pid", "host", "kafka_group"}: ``adiskq offsets``
                                      refuses to move a group in use, as for the library's members.

Synchronous (it fsyncs): the server runs it in a worker thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from .._storage.files import DEFAULT_FILE_MODE, atomic_write_json, read_json, write_all
from .._storage.offsets import ensure_group_dir, group_dir, load_offsets, update_offsets

__all__ = [
    "GROUP_FILE",
    "METADATA_FILE",
    "Committed",
    "GroupHold",
    "delete_offsets",
    "fetch_offsets",
    "load_protocol_type",
    "store_offsets",
    "store_protocol_type",
]

METADATA_FILE: Final = "kafka-metadata.json"
GROUP_FILE: Final = "kafka-group.json"
NO_LEADER_EPOCH: Final = -1
HOLD_FILE: Final = "kafka.lock"


@dataclass(frozen=True, slots=True)
class Committed:
    """A partition's committed offset (-1: none), and the metadata string and leader epoch (-1:
    none) committed with it."""

    offset: int
    metadata: str
    leader_epoch: int = NO_LEADER_EPOCH


def _load_metadata(directory: str) -> dict[str, dict[str, object]]:
    try:
        data = read_json(os.path.join(directory, METADATA_FILE))
    except (FileNotFoundError, ValueError):
        return {}  # a damaged file loses only metadata strings, never offsets
    return data if isinstance(data, dict) else {}


def fetch_offsets(stream_path: str, group: str, partitions: Iterable[int] | None) -> dict[int, Committed]:
    """The committed offsets of these partitions (None: every partition with a commit)."""
    stored = load_offsets(stream_path, group)
    metadata = _load_metadata(group_dir(stream_path, group))
    chosen = sorted(stored) if partitions is None else list(partitions)
    answer: dict[int, Committed] = {}
    for partition in chosen:
        offset = stored.get(partition, -1)
        entry = metadata.get(str(partition))
        text, epoch = "", NO_LEADER_EPOCH
        if isinstance(entry, dict) and entry.get("offset") == offset:
            found_text, found_epoch = entry.get("metadata", ""), entry.get("leader_epoch", NO_LEADER_EPOCH)
            text = found_text if isinstance(found_text, str) else ""
            epoch = found_epoch if type(found_epoch) is int else NO_LEADER_EPOCH
        answer[partition] = Committed(offset, text, epoch)
    return answer


def store_offsets(stream_path: str, group: str, commits: Mapping[int, Committed], *, durable: bool = True) -> None:
    """Store these commits: the offsets first (what consumers resume from), then their metadata.

    A crash between the two leaves metadata that names another offset, which is then not
    answered: the offset is never lost, at worst its metadata string is.
    """
    update_offsets(stream_path, group, {p: c.offset for p, c in commits.items()}, durable=durable)
    directory = group_dir(stream_path, group)
    metadata = _load_metadata(directory)
    changed = dict(metadata)
    for partition, commit in commits.items():
        entry: dict[str, object] = {"offset": commit.offset}
        if commit.metadata:
            entry["metadata"] = commit.metadata
        if commit.leader_epoch != NO_LEADER_EPOCH:
            entry["leader_epoch"] = commit.leader_epoch
        if len(entry) > 1:
            changed[str(partition)] = entry
        else:
            changed.pop(str(partition), None)
    if changed != metadata:
        atomic_write_json(os.path.join(directory, METADATA_FILE), changed, durable=durable)


def delete_offsets(stream_path: str, group: str, partitions: Iterable[int], *, durable: bool = True) -> None:
    """Forget the group's commits of these partitions (OffsetDelete): each then has none."""
    gone = {str(partition) for partition in partitions}

    def without(offsets: dict[int, int]) -> dict[int, int]:
        return {p: o for p, o in offsets.items() if str(p) not in gone}

    stored = load_offsets(stream_path, group)
    if any(str(p) in gone for p in stored):
        update_offsets(stream_path, group, without(stored), durable=durable, replace=True)
    directory = group_dir(stream_path, group)
    metadata = _load_metadata(directory)
    kept = {p: entry for p, entry in metadata.items() if p not in gone}
    if kept != metadata:
        atomic_write_json(os.path.join(directory, METADATA_FILE), kept, durable=durable)


def load_protocol_type(stream_path: str, group: str) -> str:
    """The protocol type the group's members last had ("" when none is stored)."""
    try:
        data = read_json(os.path.join(group_dir(stream_path, group), GROUP_FILE))
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return ""
    found = data.get("protocol_type") if isinstance(data, dict) else None
    return found if isinstance(found, str) else ""


def store_protocol_type(stream_path: str, group: str, protocol_type: str, *, durable: bool = True) -> None:
    """Remember the group's protocol type (written only when it changes)."""
    if not protocol_type or load_protocol_type(stream_path, group) == protocol_type:
        return
    directory = ensure_group_dir(stream_path, group, durable=durable, mode=DEFAULT_FILE_MODE)
    atomic_write_json(os.path.join(directory, GROUP_FILE), {"protocol_type": protocol_type}, durable=durable)


class GroupHold:
    """The gateway's flock on ``groups/NAME/kafka.lock`` of one stream while a Kafka group has members."""

    def __init__(self, stream_path: str, group: str) -> None:
        self.stream_path = stream_path
        self.group = group
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True between ``acquire`` and ``release``."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the flock; if another gateway on the same folder holds it, the group is shown in use anyway."""
        if self._fd is not None:
            return
        directory = ensure_group_dir(self.stream_path, self.group, durable=True, mode=DEFAULT_FILE_MODE)
        path = os.path.join(directory, HOLD_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, DEFAULT_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            info = {"pid": os.getpid(), "host": socket.gethostname(), "kafka_group": self.group}
            write_all(fd, json.dumps(info).encode())
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Drop the flock (the file stays, empty, like a given-back lease)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)
