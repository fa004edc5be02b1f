"""``adiskq groups`` lists named consumer groups with offsets and lag; ``adiskq offsets`` moves one."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from .errors import Failure
from .output import console, format_count, print_json, table, warn
from .params import POSITION, Position

if TYPE_CHECKING:
    from .._storage.stream import StreamReader

__all__ = ["groups", "offsets"]


def _bounds(stream: StreamReader) -> dict[int, tuple[int, int]]:
    return {p: stream.partition(p).bounds() for p in range(stream.partition_count)}


def _committed(stream: StreamReader, name: str) -> dict[int, int] | str:
    """The group's committed offsets, or why they cannot be read."""
    from .._errors import CorruptStreamError
    from .._storage.offsets import load_offsets

    try:
        return load_offsets(stream.path, name)
    except CorruptStreamError as error:
        return str(error)


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of a table.")
def groups(path: str, as_json: bool) -> None:
    """List a stream's named consumer groups: committed offsets, lag, and who holds them.

    Per group and partition: the committed offset (the next message the group reads), the
    partition's next offset, and the lag between them (messages not yet read; for a group
    opened with tags, only the messages left of those tags).

    \b
    Examples:
      adiskq groups orders
      adiskq groups orders --json
    """
    from .._storage.group_admin import holders
    from .._storage.leases import read_members
    from .._storage.offsets import list_groups
    from .._storage.stream import StreamReader
    from .stats import describe_members, group_json, group_lag, member_json

    stream = StreamReader.open(os.fspath(path))
    bounds = _bounds(stream)
    next_offsets = {partition: end for partition, (_, end) in bounds.items()}
    names = list_groups(stream.path)
    documents: dict[str, object] = {}
    rows = table(
        "group",
        "partition",
        "committed",
        "next offset",
        "lag",
        "held by",
        right=("partition", "committed", "next offset", "lag"),
    )
    notes: list[str] = []
    for name in names:
        committed = _committed(stream, name)
        held = holders(stream.path, name)
        members = read_members(stream.path, name)
        holder_of = {p: f"pid {m.pid} on {m.host}" for m in members for p in m.partitions}
        if isinstance(committed, str):
            notes.append(f"group {name}: {committed}")
            documents[name] = {"error": committed, "members": [member_json(m) for m in members]}
            continue
        lag = group_lag(stream.path, name, committed, next_offsets)
        documents[name] = group_json(stream.path, name, committed, next_offsets, members)
        for i, partition in enumerate(sorted(bounds)):
            offset = committed.get(partition)
            rows.add_row(
                name if i == 0 else "",
                str(partition),
                "-" if offset is None else str(offset),
                str(bounds[partition][1]),
                "-" if offset is None else format_count(lag[partition]),
                holder_of.get(partition, "-"),
            )
        if members:
            notes.append(f"group {name} members: {describe_members(members)}")
        elif held:
            notes.append(f"group {name} is in use by {', '.join(sorted({who for _, who in held}))}")
    if as_json:
        print_json(documents)
        return
    out = console()
    if not names:
        out.print(f"no named consumer groups in {path} (a ConsumerGroup with a name creates one)", markup=False)
        return
    out.print(rows)
    for note in notes:
        out.print(note, markup=False)


def _target(stream: StreamReader, partition: int, to: Position) -> int:
    """The offset ``--reset-to`` names in one partition; a failure for one it does not hold."""
    from .._errors import OffsetOutOfRangeError
    from .._storage.group_api import target_offset

    try:
        return target_offset(stream, partition, to)
    except OffsetOutOfRangeError as error:
        raise Failure(str(error).replace("partition=", "--partition")) from None


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--group", "-g", "name", required=True, metavar="NAME", help="The consumer group to move.")
@click.option(
    "--reset-to",
    "to",
    required=True,
    type=POSITION,
    help="oldest, newest, an offset, or an ISO-8601 time (the first message at or after it).",
)
@click.option("--partition", "-p", "partitions", multiple=True, type=click.IntRange(0), help="Only this partition.")
@click.option("--dry-run", "-n", is_flag=True, help="Show the new offsets; store nothing.")
def offsets(path: str, name: str, to: Position, partitions: tuple[int, ...], dry_run: bool) -> None:
    """Move a consumer group's committed offsets: replay, skip ahead, or go to a time.

    The group then reads from the new offsets when it next starts. Refused while a member of the
    group holds it (stop the group's consumers first).

    \b
    Examples:
      adiskq offsets orders --group billing --reset-to oldest        replay everything
      adiskq offsets orders --group billing --reset-to newest        skip the backlog
      adiskq offsets orders --group billing --reset-to 2026-01-31T08:00:00Z
      adiskq offsets orders --group billing --reset-to 1200 --partition 2
    """
    from .._sansio.naming import group_folder
    from .._storage.group_admin import GroupInUse, holders, set_offsets
    from .._storage.stream import StreamReader
    from .read import check_partitions

    try:
        group_folder(name)  # any name a folder holds: a Kafka group's too (app:billing)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="'--group'") from None
    stream = StreamReader.open(os.fspath(path))
    chosen = check_partitions(stream, partitions)
    held = holders(stream.path, name)
    if held:
        raise _in_use(name, ", ".join(sorted({holder for _, holder in held})))
    before = _committed(stream, name)
    replace = isinstance(before, str)
    if isinstance(before, str):
        warn(f"{before}; the reset replaces that file")
        before = {}
    after = {p: _target(stream, p, to) for p in chosen}
    bounds = _bounds(stream)
    if not dry_run:
        try:
            # Checks again, holding the partitions' leases until the offsets are stored, so a member
            # joining after the check above cannot overwrite them.
            set_offsets(stream.path, name, after, replace=replace, only_if_unused=True)
        except GroupInUse as error:
            raise _in_use(name, str(error)) from None
    rows = table(
        "partition",
        "before",
        "after",
        "lag after",
        title=f"group {name}" + (" (dry run: nothing stored)" if dry_run else ""),
        right=("partition", "before", "after", "lag after"),
    )
    for partition in chosen:
        old = before.get(partition)
        rows.add_row(
            str(partition),
            "-" if old is None else str(old),
            str(after[partition]),
            format_count(max(0, bounds[partition][1] - after[partition])),
        )
    console().print(rows)


def _in_use(name: str, who: str) -> Failure:
    return Failure(
        f"group {name!r} is in use ({who}): its members would overwrite the new offsets. Stop the group's "
        "consumers, then run this again"
    )
