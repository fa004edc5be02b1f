"""Named consumer groups from a script or a health check, without opening one: ``lag``,
``reset_offsets`` and ``delete_group`` (what ``adiskq groups`` and ``adiskq offsets`` do).

Resetting and deleting are refused while a member of the group lives (it would overwrite the
offsets with its own commits): both hold the group's partition leases from their check until they
are done, as ``group_admin.set_offsets`` explains, so a member that joins meanwhile waits for them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
from typing import Literal

from .._errors import GroupInUseError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.naming import group_folder
from .group_admin import GroupInUse, holders, holding_leases, set_offsets
from .lag import group_lag_now
from .offsets import OFFSETS_FILE, TAGS_FILE, group_dir
from .partition_reader import held_offsets
from .stream import StreamReader

__all__ = ["ResetTo", "delete_group", "lag", "reset_offsets", "target_offset"]

ResetTo = Literal["oldest", "newest"] | int | dt.datetime


def lag(path: str | os.PathLike[str], group: str) -> dict[int, int]:
    """Partition -> messages left for the named ``group`` past its committed offsets.

    Synchronous, for a health check or a script; the same figures as ``adiskq groups`` (for a group
    opened with ``tags``, only the messages left of those tags). Partitions the group has not
    committed in are left out; a group that never committed gives ``{}``.
    ``StreamNotFoundError`` if there is no stream at ``path``.
    """
    group_folder(group)  # InvalidNameError for a name no folder can hold
    return group_lag_now(os.fspath(path), group)


def target_offset(stream: StreamReader, partition: int, to: str | int | dt.datetime) -> int:
    """The offset ``to`` (a position ``PartitionReader.offset_of`` takes) names in ``partition`` now;
    ``OffsetOutOfRangeError`` for an offset the partition does not hold."""
    reader = stream.partition(partition)
    if not isinstance(to, int) or isinstance(to, bool):
        return reader.offset_of(to)
    oldest, next_offset = reader.bounds()
    if not oldest <= to <= next_offset:
        raise OffsetOutOfRangeError(
            f"partition {partition} holds {held_offsets(oldest, next_offset)} (next {next_offset}), so it cannot be "
            f"reset to {to}: give an "
            f"offset in {oldest}..{next_offset}, or pick a partition with partition=",
            partition=partition,
            offset=to,
            oldest_offset=oldest,
            next_offset=next_offset,
        )
    return to


def check_reset_target(to: object) -> None:
    if isinstance(to, str):
        if to not in ("oldest", "newest"):
            raise InvalidArgumentError(f"to={to!r}: use 'oldest', 'newest', an offset or a datetime")
    elif isinstance(to, bool) or not isinstance(to, int | dt.datetime) or (isinstance(to, int) and to < 0):
        raise InvalidArgumentError(f"to={to!r}: use 'oldest', 'newest', an offset (from 0) or a datetime")


def reset_offsets(
    path: str | os.PathLike[str], group: str, to: ResetTo, *, partition: int | None = None
) -> dict[int, int]:
    """Move the named ``group``'s committed offsets (every partition, or ``partition``) to ``to``:
    ``"oldest"`` (replay what is kept), ``"newest"`` (skip the backlog), an offset, or a
    ``datetime`` (the first message at or after it). Returns partition -> its new offset.

    The group reads from there when its members next start. Other partitions keep their offsets.

    Raises:
        GroupInUseError: a member of the group is running (nothing was stored).
        OffsetOutOfRangeError: an offset outside what the partition holds.
        InvalidArgumentError: a partition the stream lacks, or ``to`` is not a position.
        StreamNotFoundError: no stream at ``path``.
    """
    group_folder(group)  # InvalidNameError for a name no folder can hold
    check_reset_target(to)
    stream = StreamReader.open(os.fspath(path))
    if partition is None:
        partitions = list(range(stream.partition_count))
    else:
        stream.partition(partition)  # InvalidArgumentError for one the stream lacks
        partitions = [partition]
    _refuse_if_held(stream.path, group)
    offsets = {p: target_offset(stream, p, to) for p in partitions}
    try:
        # Checks again, holding the partitions' leases until the offsets are stored.
        set_offsets(stream.path, group, offsets, only_if_unused=True)
    except GroupInUse as error:
        raise GroupInUseError(group, sorted({who for _, who in error.holders})) from None
    return offsets


def delete_group(path: str | os.PathLike[str], group: str) -> bool:
    """Delete the named ``group``: its offsets, stored tags and member records. Returns False if
    it did not exist. A group of that name opened later starts afresh (from its ``start``).

    Raises:
        GroupInUseError: a member of the group is running (nothing was deleted).
        StreamNotFoundError: no stream at ``path``.
    """
    group_folder(group)  # InvalidNameError for a name no folder can hold
    stream = StreamReader.open(os.fspath(path))
    directory = group_dir(stream.path, group)
    if not os.path.isdir(directory):
        return False
    _refuse_if_held(stream.path, group)
    try:
        with holding_leases(stream.path, group, list(range(stream.partition_count))) as ours:
            held = holders(stream.path, group, ours=ours)
            if held:
                raise GroupInUse(held)
            # The offsets go first: a group half deleted by a crash here starts afresh, as asked.
            for name in (OFFSETS_FILE, TAGS_FILE):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))
            shutil.rmtree(directory)
    except GroupInUse as error:
        raise GroupInUseError(group, sorted({who for _, who in error.holders})) from None
    return True


def _refuse_if_held(stream_path: str, group: str) -> None:
    held = holders(stream_path, group)
    if held:
        raise GroupInUseError(group, sorted({who for _, who in held}))
