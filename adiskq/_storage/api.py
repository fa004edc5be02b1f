"""The synchronous read API (DESIGN §7): for scripts, tools and Spark, no event loop needed."""

from __future__ import annotations

import datetime as dt
import os

from .._errors import OffsetOutOfRangeError
from .._sansio.values import Message, StreamStats, ns_from_datetime
from .leases import read_members
from .lock import read_owner
from .offsets import list_groups, load_offsets
from .stream import StreamReader, load_recovery_report

__all__ = ["offset_for_time", "read", "stats"]


def read(path: str | os.PathLike[str], partition: int, offset: int) -> Message:
    """The message at ``offset`` of ``partition``.

    Raises ``OffsetOutOfRangeError`` if the offset was vacuumed or is not written yet, and
    ``StreamNotFoundError`` if there is no stream at ``path``.
    """
    stream = StreamReader.open(path)
    reader = stream.partition(partition)
    if offset < 0:
        raise OffsetOutOfRangeError(f"offsets start at 0, not {offset}", partition=partition, offset=offset)
    return reader.read_one(offset)


def offset_for_time(path: str | os.PathLike[str], partition: int, when: dt.datetime | int) -> int:
    """The first offset whose timestamp is at or after ``when`` (a datetime or UTC ns).

    If every message is older, the next offset to be written.
    """
    timestamp_ns = ns_from_datetime(when) if isinstance(when, dt.datetime) else int(when)
    return StreamReader.open(path).partition(partition).offset_for_time(timestamp_ns)


def stats(path: str | os.PathLike[str]) -> StreamStats:
    """Partitions, owner, named groups (committed offsets, live members) and the last recovery of a stream."""
    stream = StreamReader.open(path)
    partitions = [stream.partition(number).stats() for number in range(stream.partition_count)]
    names = list_groups(stream.path)
    groups = {name: load_offsets(stream.path, name) for name in names}
    members = {name: tuple(read_members(stream.path, name)) for name in names}
    return StreamStats(
        path=stream.path,
        partitions=partitions,
        owner=read_owner(stream.path),
        groups=groups,
        last_recovery=load_recovery_report(stream.path),
        members=members,
    )
