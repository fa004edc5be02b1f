"""The synchronous read API: for scripts, tools and Spark, no event loop needed."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Mapping

from .._errors import CorruptStreamError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.capabilities import is_kafka_url, refuse
from .._sansio.codec import utf8
from .._sansio.naming import partition_for_key
from .._sansio.tags import TagFilter
from .._sansio.values import Message, StreamStats, ns_from_datetime
from .leases import read_members
from .lock import read_owner
from .offsets import list_groups, load_offsets
from .stream import StreamReader, load_recovery_report
from .writers import live_writers

__all__ = ["find", "offset_for_time", "read", "stats", "stream_stats"]


def read(path: str | os.PathLike[str], partition: int, offset: int) -> Message:
    """The message at ``offset`` of ``partition``.

    Raises ``OffsetOutOfRangeError`` if the offset was vacuumed or is not written yet, and
    ``StreamNotFoundError`` if there is no stream at ``path``.
    """
    if is_kafka_url(path):
        raise refuse("find, read, stats, offset_for_time", asked="adiskq.read() of a kafka:// URL")
    stream = StreamReader.open(path)
    reader = stream.partition(partition)
    if offset < 0:
        raise OffsetOutOfRangeError(f"offsets start at 0, not {offset}", partition=partition, offset=offset)
    return reader.read_one(offset)


def offset_for_time(path: str | os.PathLike[str], partition: int, when: dt.datetime | int) -> int:
    """The first offset whose timestamp is at or after ``when`` (a datetime or UTC ns).

    If every message is older, the next offset to be written.
    """
    if is_kafka_url(path):
        raise refuse("find, read, stats, offset_for_time", asked="adiskq.offset_for_time() of a kafka:// URL")
    timestamp_ns = ns_from_datetime(when) if isinstance(when, dt.datetime) else int(when)
    return StreamReader.open(path).partition(partition).offset_for_time(timestamp_ns)


def stats(path: str | os.PathLike[str]) -> StreamStats:
    """Partitions, owner, open writers (exclusive or shared), named groups (committed offsets, live
    members) and the last recovery of a stream."""
    if is_kafka_url(path):
        raise refuse("find, read, stats, offset_for_time", asked="adiskq.stats() of a kafka:// URL")
    return stream_stats(path)


def stream_stats(path: str | os.PathLike[str], *, broken_groups: dict[str, str] | None = None) -> StreamStats:
    """``stats``; with ``broken_groups``, a group whose offsets cannot be read is left out and why
    is put there, instead of raising ``CorruptStreamError`` (a tool must still show the partitions)."""
    stream = StreamReader.open(path)
    partitions = [stream.partition(number).stats() for number in range(stream.partition_count)]
    names = list_groups(stream.path)
    groups: dict[str, Mapping[int, int]] = {}
    for name in names:
        try:
            groups[name] = load_offsets(stream.path, name)
        except CorruptStreamError as error:
            if broken_groups is None:
                raise
            broken_groups[name] = str(error)
    members = {name: tuple(read_members(stream.path, name)) for name in names}
    return StreamStats(
        path=stream.path,
        partitions=partitions,
        owner=read_owner(stream.path),
        groups=groups,
        last_recovery=load_recovery_report(stream.path),
        members=members,
        writers=tuple(live_writers(stream.path)),
    )


def _key_bytes(key: str | bytes) -> bytes:
    if isinstance(key, str):
        return utf8(key, "key")
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise TypeError(f"a key is str or bytes, not {type(key).__name__}")


def _time_bound(name: str, when: dt.datetime | int | None) -> int | None:
    if when is None or isinstance(when, dt.datetime):
        return None if when is None else ns_from_datetime(when)
    if isinstance(when, int) and not isinstance(when, bool):
        return when
    raise TypeError(f"{name}= takes a datetime, UTC nanoseconds (int) or None, not {type(when).__name__}")


def find(
    path: str | os.PathLike[str],
    key: str | bytes,
    *,
    since: dt.datetime | int | None = None,
    until: dt.datetime | int | None = None,
    limit: int | None = None,
    tags: Iterable[str] | None = None,
) -> list[Message]:
    """Every message with exactly this key, in offset order, found through the key index.

    A key lives in one partition (FNV-1 placement, as ``Producer`` puts it), so only that
    partition is searched; in a stream whose partition count grew, also the partitions the
    earlier counts put the key in, up to where each count stopped (those messages come first).
    ``since`` and ``until`` (datetimes, naive meaning UTC, or UTC ns) keep the messages whose
    timestamp is at or after ``since`` and before ``until``; ``tags`` (a collection of tags) keeps
    those whose tag is one of them; ``limit`` keeps the first that many.
    Segments without a usable key index (a stream opened with ``key_index=False``, a damaged
    index) are searched in their data: the answer is the same, only slower.
    ``StreamNotFoundError`` if there is no stream at ``path``.
    """
    if is_kafka_url(path):
        raise refuse("find, read, stats, offset_for_time", asked="adiskq.find() of a kafka:// URL")
    raw = _key_bytes(key)
    since_ns = _time_bound("since", since)
    until_ns = _time_bound("until", until)
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise InvalidArgumentError(f"limit={limit!r}: give a whole number of messages (0 or more), or None")
    tag_filter = TagFilter.of(tags)
    stream = StreamReader.open(path)
    if limit == 0:
        return []
    if tag_filter is not None:
        # The key's messages are few (the key index found them): the tag is checked on each.
        keyed = find(path, raw, since=since, until=until)
        return [m for m in keyed if m.tag in tag_filter.tags][:limit]
    found: list[Message] = []
    earlier: tuple[int, ...] = ()  # where the previous partition count stopped placing keys
    counts = [*stream.settings.partition_history, (stream.partition_count, None)]
    for count, ends in counts:
        partition = partition_for_key(raw, count)
        start = earlier[partition] if partition < len(earlier) else 0
        end = None if ends is None else ends[partition]
        earlier = () if ends is None else ends
        if end is not None and end <= start:
            continue
        found += stream.partition(partition).find(
            raw,
            since_ns=since_ns,
            until_ns=until_ns,
            limit=None if limit is None else limit - len(found),
            start_offset=start,
            end_offset=end,
        )
        if limit is not None and len(found) >= limit:
            break
    return found
