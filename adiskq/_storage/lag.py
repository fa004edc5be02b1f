"""The lag of a named consumer group: how many messages are left for it to read past its commits.

An unfiltered group's lag in a partition is the partition's next offset minus its committed one.
A group opened with ``tags=`` (stored in ``groups/NAME/tags.json``, see ``offsets.py``) skips the
messages of other tags, so its lag counts only the messages left whose tag is one of its own. They
are counted the way the group reads them: the ``.tagindex`` column (4 bytes a message) selects the
candidates by hash, with no record of the other tags read; only the candidates' records are read,
to confirm their tags (two tags with one hash never count for each other), and the messages past
the column's end (a producer's buffered entries, segments written before tags) from their records.
So it costs a read of the column left plus of the wanted records left, about what the group itself
will read of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .._errors import OffsetOutOfRangeError
from .._sansio.tags import TagFilter
from .offsets import load_group_tags, load_offsets
from .partition_reader import PartitionReader
from .stream import StreamReader

__all__ = ["count_wanted", "group_lag", "group_lag_now"]

_SCAN_OFFSETS: Final = 65_536  # offsets looked at a read (their index entries and column)
_READ_BYTES: Final = 16 * 2**20  # records read at most a read (large messages: fewer of them)


def count_wanted(reader: PartitionReader, start: int, end: int, tag_filter: TagFilter) -> int:
    """Messages of ``[start, end)`` whose tag is one of ``tag_filter``'s (those vacuumed meanwhile: none)."""
    counted = 0
    with reader.cursor(start) as cursor:
        while cursor.position < end:
            try:
                messages, passed = cursor.read_tagged(
                    _SCAN_OFFSETS, min(_SCAN_OFFSETS, end - cursor.position), tag_filter, _READ_BYTES
                )
            except OffsetOutOfRangeError as error:
                if error.oldest_offset is None:
                    raise
                cursor.seek(error.oldest_offset)
                continue
            if not passed:
                break
            counted += sum(1 for message in messages if message.offset < end)
    return counted


def group_lag(
    stream_path: str, name: str, committed: Mapping[int, int], next_offsets: Mapping[int, int]
) -> dict[int, int]:
    """Messages left for the group ``name`` in each partition it has committed in (uncommitted:
    none counted): past its committed offset, and with its stored tags, only those it will deliver."""
    lag = {p: max(0, next_offsets[p] - offset) for p, offset in committed.items() if p in next_offsets}
    tags = load_group_tags(stream_path, name)
    if tags is None or not any(lag.values()):
        return lag
    tag_filter = TagFilter(tags)
    stream = StreamReader.open(stream_path)
    for partition, left in lag.items():
        if left:
            start = committed[partition]
            lag[partition] = count_wanted(stream.partition(partition), start, start + left, tag_filter)
    return lag


def group_lag_now(stream_path: str, name: str, newer: Mapping[int, int] | None = None) -> dict[int, int]:
    """The group's lag now, from its stored offsets (``newer``, a live member's own commits, over
    them); partitions it has no offset in are left out."""
    stream = StreamReader.open(stream_path)
    committed = {**load_offsets(stream.path, name), **(newer or {})}
    next_offsets = {p: stream.partition(p).bounds()[1] for p in range(stream.partition_count)}
    return group_lag(stream.path, name, committed, next_offsets)
