"""Test support for consumers: a producer stand-in that appends through the sync storage layer, and
a named group that reads and commits a number of messages.

The stand-in commits exactly as the producer does (records, then index entries) and then wakes
in-process consumers through ``wakeup.notify``, so consumer tests do not depend on the Producer.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from types import TracebackType

import anyio

import adiskq
from adiskq._async import wakeup
from adiskq._sansio.codec import encode_record
from adiskq._sansio.naming import OWNER_FILE
from adiskq._sansio.values import Retention
from adiskq._storage.stream import StreamWriter


class Writer:
    """Appends values to a stream's partitions like a producer; use as a context manager.

    ``notify=True``: like a Producer in this process (consumers here are woken directly).
    ``notify=False``: like a producer in another process (consumers rely on inotify or the poll).
    """

    def __init__(
        self,
        path: str,
        *,
        partitions: int = 1,
        segment_size_bytes: int | None = None,
        retention: Retention | None = None,
        notify: bool = True,
    ) -> None:
        self.stream = StreamWriter.open(
            path, partitions=partitions, segment_size_bytes=segment_size_bytes, retention=retention
        )
        self.realpath = os.path.realpath(self.stream.path)
        self.notify = notify
        if not notify:
            # Pose as a producer of another process: consumers here then rely on inotify and the
            # poll, as they do for a real one (the flock is held all the same).
            with open(os.path.join(self.stream.path, OWNER_FILE), "w") as owner:
                owner.write(json.dumps({"id": "elsewhere", "pid": 1, "host": "elsewhere"}))

    def append(
        self,
        values: Sequence[bytes],
        *,
        partition: int = 0,
        key: bytes = b"",
        timestamp_ns: int | None = None,
        headers: dict[str, bytes] | None = None,
    ) -> int:
        """Append and commit the values to one partition; returns the first offset."""
        stamp = time.time_ns() if timestamp_ns is None else timestamp_ns
        records = [encode_record(value, key, stamp, headers) for value in values]
        first = self.stream.partitions[partition].append(records, [stamp] * len(records))
        if self.notify:
            wakeup.notify((self.realpath, partition))
        return first

    def next_offset(self, partition: int = 0) -> int:
        """The offset the next appended message gets."""
        return self.stream.partitions[partition].next_offset

    def close(self) -> None:
        """Close the stream (releasing its owner lock)."""
        self.stream.close()

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


async def read_and_commit(stream_path: str, name: str, count: int, **options: object) -> list[adiskq.Message]:
    """Open the group, read ``count`` messages, commit each, close (storing the commits)."""
    got: list[adiskq.Message] = []
    async with adiskq.ConsumerGroup(stream_path, name, **options) as group:  # type: ignore[arg-type]
        with anyio.fail_after(10):
            async for message in group:
                group.commit(message)
                got.append(message)
                if len(got) == count:
                    break
    return got
