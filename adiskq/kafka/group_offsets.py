"""Offsets committed by Kafka consumer groups, stored as the library's own groups store theirs.

A Kafka group NAME's committed offsets for topic T live in stream T's ``groups/NAME/offsets.json``
(``adiskq/_storage/offsets.py``: partition -> next offset, replaced atomically and fsynced, under
the group's ``offsets.lock``), so ``adiskq groups`` shows them and ``adiskq offsets --reset-to``
moves them, as for a ``ConsumerGroup``. Beside it, two files only the gateway writes::

    groups/NAME/kafka-metadata.json   {"PARTITION": {"offset": N, "metadata": "..."}}: the metadata
                                      string of the last commit, kept only when not empty. It is
                                      answered only while offsets.json still holds that same offset,
                                      so offsets moved by hand never come back with stale metadata.
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

__all__ = ["METADATA_FILE", "Committed", "GroupHold", "fetch_offsets", "store_offsets"]

METADATA_FILE: Final = "kafka-metadata.json"
HOLD_FILE: Final = "kafka.lock"


@dataclass(frozen=True, slots=True)
class Committed:
    """A partition's committed offset (-1: none) and the metadata string committed with it."""

    offset: int
    metadata: str


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
        text = ""
        if isinstance(entry, dict) and entry.get("offset") == offset and isinstance(entry.get("metadata"), str):
            text = str(entry["metadata"])
        answer[partition] = Committed(offset, text)
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
        if commit.metadata:
            changed[str(partition)] = {"offset": commit.offset, "metadata": commit.metadata}
        else:
            changed.pop(str(partition), None)
    if changed != metadata:
        atomic_write_json(os.path.join(directory, METADATA_FILE), changed, durable=durable)


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
