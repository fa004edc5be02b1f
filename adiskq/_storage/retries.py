"""A named group's retries on disk: its retry stream, where its dead letters go, and what waits.

Layout, beside the group's offsets:

    groups/NAME/retries/             the group's retry stream: an adiskq stream of its own, with
                                     one partition per partition of the source stream; a message
                                     retried from source partition p is appended to its partition p
                                     (fsynced before ``retry()`` returns), so the member that holds
                                     p (by its lease) delivers p's retries as well
    groups/NAME/retries/groups/NAME/offsets.json
                                     how far the group has finished its retries: per partition, the
                                     lowest retry record not yet done (records are delivered in the
                                     order they fall due, so some after it may be done already; a
                                     member that takes the partition over skips those listed in
                                     finished.json)
    groups/NAME/retries/groups/NAME/finished.json
                                     {"p": [retry offsets]}: per partition, the retry records at or
                                     above its retry commit that are done already (stored with the
                                     commits, under finished.lock), so that no member delivers a
                                     finished retry again while an older one still waits
    groups/NAME/dead-letters.json    {"path": ..., "max_attempts": ...}: where the group sends its
                                     dead letters (kept so that ``adiskq retries`` finds them)
    groups/NAME/dead-letters/        the dead-letter stream when the group names none

Records of the retry stream are the message as pushed, with the headers ``_sansio/retries.py``
describes. The retry stream is written by shared writers (several members, several processes).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Final, NamedTuple

from .._errors import SettingsMismatchError, StreamNotFoundError
from .._sansio import retries as headers
from .._sansio.values import Message
from .files import DEFAULT_FILE_MODE, atomic_write_json, read_json
from .flocks import SHARED_LOCK_TIMEOUT_SECONDS, FileLock
from .offsets import ensure_group_dir, group_dir, load_offsets
from .stream import StreamReader, StreamWriter

__all__ = [
    "PendingRetry",
    "RetryAppender",
    "RetrySettings",
    "default_dead_letter_path",
    "load_finished",
    "load_retry_settings",
    "pending_retries",
    "retry_stream_path",
    "save_retry_settings",
    "unusable_stream_folder",
    "update_finished",
]

RETRIES_DIR: Final = "retries"
# The retry stream's segments are small, so that the ones whose retries are all done (below the
# group's retry commits) are deleted soon after (``RetryAppender.trim``).
RETRY_SEGMENT_BYTES: Final = 1 << 20
DEAD_LETTERS_DIR: Final = "dead-letters"
SETTINGS_FILE: Final = "dead-letters.json"
FINISHED_FILE: Final = "finished.json"
FINISHED_LOCK: Final = "finished.lock"


class RetrySettings(NamedTuple):
    """Where a group's dead letters go, and after how many deliveries (None: only when asked)."""

    dead_letter_path: str
    max_attempts: int | None


def retry_stream_path(stream_path: str, name: str) -> str:
    """The folder of the group's retry stream."""
    return os.path.join(group_dir(stream_path, name), RETRIES_DIR)


def default_dead_letter_path(stream_path: str, name: str) -> str:
    """Where a group that names no dead-letter stream keeps its dead letters."""
    return os.path.join(group_dir(stream_path, name), DEAD_LETTERS_DIR)


def load_retry_settings(stream_path: str, name: str) -> RetrySettings:
    """The group's dead-letter settings as last stored (the defaults where none, or unreadable)."""
    default = RetrySettings(default_dead_letter_path(os.path.abspath(stream_path), name), None)
    try:
        data = read_json(os.path.join(group_dir(stream_path, name), SETTINGS_FILE))
    except (FileNotFoundError, ValueError):
        return default
    if not isinstance(data, dict) or not isinstance(data.get("path"), str):
        return default
    attempts = data.get("max_attempts")
    return RetrySettings(data["path"], attempts if isinstance(attempts, int) and attempts > 0 else None)


def save_retry_settings(stream_path: str, name: str, settings: RetrySettings, *, mode: int = DEFAULT_FILE_MODE) -> None:
    """Store the group's dead-letter settings (nothing is written when they are unchanged)."""
    directory = ensure_group_dir(stream_path, name, durable=True, mode=mode)
    path = os.path.join(directory, SETTINGS_FILE)
    if os.path.exists(path) and load_retry_settings(stream_path, name) == settings:
        return
    atomic_write_json(path, {"path": settings.dead_letter_path, "max_attempts": settings.max_attempts}, mode=mode)


def unusable_stream_folder(path: str, *, create: bool) -> str | None:
    """Why a stream cannot be written at ``path``, or None if it can (a stream, an empty folder, or
    nothing yet under a folder that takes one). ``create`` makes the folder now if it is missing."""
    if os.path.lexists(path):
        if not os.path.isdir(path):
            return "it is a file, not a folder"
        # (A folder without settings.json may be a stream another member is creating right now:
        # what else is in it is the stream's opening to judge.)
        if not os.access(path, os.W_OK | os.X_OK):
            return "this process may not write in it"
        return None
    if create:
        try:
            os.makedirs(path)
        except FileExistsError:
            return None  # made meanwhile (another member)
        except OSError as error:
            return f"it cannot be created: {error.strerror or error}"
        return None
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"this process may not write in {parent}"
    return None


def load_finished(stream_path: str, name: str) -> dict[int, set[int]]:
    """Partition -> the retry records done above the group's stored retry commit (empty where none,
    or for a file this module did not write: those retries are then delivered again, at least once)."""
    path = os.path.join(group_dir(retry_stream_path(stream_path, name), name), FINISHED_FILE)
    try:
        data = read_json(path)
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    finished: dict[int, set[int]] = {}
    for partition, offsets in data.items():
        if isinstance(partition, str) and partition.isdigit() and isinstance(offsets, list):
            finished[int(partition)] = {o for o in offsets if isinstance(o, int) and not isinstance(o, bool)}
    return finished


def update_finished(
    stream_path: str,
    name: str,
    finished: Mapping[int, list[int]],
    *,
    mode: int = DEFAULT_FILE_MODE,
    timeout_seconds: float = SHARED_LOCK_TIMEOUT_SECONDS,
) -> None:
    """Store these partitions' finished retry records over the stored ones (other partitions kept;
    an empty list drops the partition), atomically and fsynced, under the group's ``finished.lock``."""
    directory = ensure_group_dir(retry_stream_path(stream_path, name), name, durable=True, mode=mode)
    lock = FileLock(os.path.join(directory, FINISHED_LOCK), mode=mode, stream_path=stream_path)
    try:
        lock.acquire(timeout_seconds)
        stored = {p: sorted(o) for p, o in load_finished(stream_path, name).items()}
        merged = {**stored, **finished}
        merged = {p: offsets for p, offsets in merged.items() if offsets}
        if merged != stored:
            atomic_write_json(
                os.path.join(directory, FINISHED_FILE), {str(p): merged[p] for p in sorted(merged)}, mode=mode
            )
    finally:
        lock.close()


class RetryAppender:
    """Appends retry records to a group's retry stream, each fsynced before ``append`` returns.

    Opened on the first append (as a shared writer: the other members append too) and kept open
    until ``close``. Thread-safe: appends from several worker threads take turns.
    """

    def __init__(self, stream_path: str, name: str, *, mode: int = DEFAULT_FILE_MODE) -> None:
        self.stream_path = stream_path
        self.name = name
        self.path = retry_stream_path(stream_path, name)
        self.mode = mode
        self._writer: StreamWriter | None = None
        self._lock = threading.Lock()

    def _open(self, partitions: int) -> StreamWriter:
        writer = self._writer
        if writer is not None and writer.settings.partition_count >= partitions:
            return writer
        if writer is not None:  # the source stream grew: the retry stream grows with it
            self._writer = None
            writer.close()
        ensure_group_dir(self.stream_path, self.name, durable=True, mode=self.mode)
        try:
            existing = StreamReader.open(self.path).partition_count
        except StreamNotFoundError:
            existing = 0
        try:
            writer = StreamWriter.open(
                self.path,
                partitions=partitions if partitions > existing else None,
                segment_size_bytes=RETRY_SEGMENT_BYTES if existing == 0 else None,
                key_index=False,  # nobody looks retries up by key
                mode=self.mode,
                shared=True,
                lock_timeout=10.0,
            )
        except SettingsMismatchError as error:
            raise SettingsMismatchError(
                f"group {self.name!r} cannot store a retry of partition {partitions - 1}: the stream gained "
                f"partitions, and its retry stream ({self.path}) grows with it only while no other member of "
                "the group has stored a retry since it opened. Restart the group's members; the retry was not "
                f"stored ({error})"
            ) from None
        self._writer = writer
        return writer

    def append(self, partition: int, partitions: int, record: bytes, timestamp_ns: int) -> int:
        """Append one encoded record to ``partition`` (the retry stream has at least ``partitions``),
        fsync it, and return its offset."""
        with self._lock:
            writer = self._open(max(partitions, partition + 1))
            target = writer.partitions[partition]
            with writer.appending([partition]):
                offset = target.append([record], [timestamp_ns])
            target.sync()
            return offset

    def trim(self, finished: Mapping[int, int]) -> int:
        """Delete the sealed segments of the retry stream whose retries are all done: those that end
        at or below ``finished[p]``, the group's stored retry commit of partition p. Returns how many."""
        try:
            stream = StreamReader.open(self.path)
        except StreamNotFoundError:
            return 0
        wanted = {}
        for partition, end in finished.items():
            if partition >= stream.partition_count:
                continue
            bases = stream.partition(partition).segment_bases()
            if len(bases) > 1 and bases[1] <= end:  # listing the folder first: no lock for nothing
                wanted[partition] = end
        if not wanted:
            return 0
        with self._lock:
            writer = self._open(1)
            with writer.vacuuming():
                doomed = [
                    (partition, segment.base_offset)
                    for partition, end in wanted.items()
                    for segment in writer.partitions[partition].segment_infos()[:-1]  # never the active one
                    if segment.next_offset <= end
                ]
                if doomed:
                    writer.delete_segments(doomed)
            return len(doomed)

    def close(self) -> None:
        """Close the retry stream (fsynced); closing twice is harmless."""
        with self._lock:
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()


class PendingRetry(NamedTuple):
    """A retry the group has not finished: where it waits, when it falls due, and the message."""

    retry_offset: int
    due_ns: int
    message: Message  # as the group will deliver it: source partition, offset, timestamp


def pending_retries(stream_path: str, name: str, *, limit: int | None = None) -> list[PendingRetry]:
    """The group's retries not done yet, from its stored retry offsets on (those stored as finished
    left out), by partition and offset; empty when the group never retried."""
    path = retry_stream_path(stream_path, name)
    try:
        stream = StreamReader.open(path)
    except StreamNotFoundError:
        return []
    stored = load_offsets(path, name)
    finished = load_finished(stream_path, name)
    found: list[PendingRetry] = []
    for partition in range(stream.partition_count):
        reader = stream.partition(partition)
        oldest, _ = reader.bounds()
        with reader.cursor(max(oldest, stored.get(partition, 0))) as cursor:
            while batch := cursor.read(1000):
                for record in batch:
                    if record.offset in finished.get(partition, ()):
                        continue
                    found.append(PendingRetry(record.offset, headers.due_ns(record), headers.delivered(record)))
                    if limit is not None and len(found) >= limit:
                        return found
    return found
