"""``adiskq stats``: partitions, owner, groups and the last recovery of a stream, as tables or JSON."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import click

from .output import console, format_bytes, format_count, format_time, iso_time, print_json, table, warn

if TYPE_CHECKING:
    from rich.console import Console

    from .._sansio.values import GroupMember, StreamStats

__all__ = ["describe_members", "group_lag", "member_json", "print_stats", "stats", "stats_json"]


def member_json(member: GroupMember) -> dict[str, object]:
    """One live group member as plain JSON values."""
    return {
        "id": member.id,
        "pid": member.pid,
        "host": member.host,
        "partitions": list(member.partitions),
        "exclusive": member.exclusive,
        "joined": iso_time(member.joined_ns),
    }


def describe_members(members: Sequence[GroupMember]) -> str:
    """``pid 12 on box: 0,1 · pid 13 on box: 2`` — who holds which partitions."""
    if not members:
        return "none running"
    parts = []
    for member in members:
        held = ",".join(map(str, member.partitions)) or "nothing yet"
        parts.append(f"pid {member.pid} on {member.host}: {held}" + (" (exclusive)" if member.exclusive else ""))
    return " · ".join(parts)


def group_lag(path: str, name: str, committed: Mapping[int, int], next_offsets: Mapping[int, int]) -> dict[int, int]:
    """Messages left for a group in each partition past its committed offset (uncommitted: none
    counted); for a group opened with ``tags=``, only those of its tags (``adiskq/_storage/lag.py``)."""
    from .._storage.lag import group_lag as stored_group_lag

    return stored_group_lag(path, name, committed, next_offsets)


def group_json(
    path: str, name: str, committed: Mapping[int, int], next_offsets: Mapping[int, int], members: Sequence[GroupMember]
) -> dict[str, object]:
    """A named group for ``--json``: committed offsets, lag per partition and in all, its tags, live members."""
    from .._storage.offsets import load_group_tags

    lag = group_lag(path, name, committed, next_offsets)
    tags = load_group_tags(path, name)
    return {
        "tags": None if tags is None else sorted(tags),
        "committed": {str(p): o for p, o in sorted(committed.items())},
        "lag": {str(p): n for p, n in sorted(lag.items())},
        "total_lag": sum(lag.values()),
        "members": [member_json(m) for m in members],
    }


def _iso(timestamp_ns: int | None) -> str | None:
    return None if timestamp_ns is None else iso_time(timestamp_ns)


def disk_json(path: str) -> dict[str, object]:
    """The stream's file system: its size and use as ``df`` counts them, and where writes stop."""
    from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE
    from .._storage.stream import disk_usage

    disk = disk_usage(path)
    return {
        "size_bytes": disk.total_bytes,
        "used_bytes": disk.used_bytes,
        "usage": disk.used_bytes / disk.total_bytes if disk.total_bytes else 1.0,
        "refuse_writes_above": DEFAULT_REFUSE_WRITES_ABOVE,
    }


def describe_disk(usage: float, size_bytes: int, level: float) -> str:
    """``disk: 22.0% used of 102.0 GiB; producers refuse writes above 95% by default ...``."""
    above = " (at or over the level: writes are refused)" if usage >= level else ""
    return (
        f"disk: {usage:.1%} used of {format_bytes(size_bytes)}{above}; producers refuse writes "
        f"above {level:.0%} by default (refuse_writes_above)"
    )


def stats_json(info: StreamStats) -> dict[str, object]:
    """The stats as plain JSON values (timestamps in ISO-8601 and in nanoseconds)."""
    next_offsets = {p.partition: p.next_offset for p in info.partitions}
    groups = {
        name: group_json(info.path, name, committed, next_offsets, info.members.get(name, ()))
        for name, committed in info.groups.items()
    }
    recovery = info.last_recovery
    return {
        "path": info.path,
        "messages": info.message_count,
        "size_bytes": info.size_bytes,
        "partitions": [
            {
                "partition": p.partition,
                "oldest_offset": p.oldest_offset,
                "next_offset": p.next_offset,
                "messages": p.message_count,
                "segments": p.segments,
                "size_bytes": p.size_bytes,
                "oldest_timestamp": _iso(p.oldest_timestamp_ns),
                "newest_timestamp": _iso(p.newest_timestamp_ns),
                "oldest_timestamp_ns": p.oldest_timestamp_ns,
                "newest_timestamp_ns": p.newest_timestamp_ns,
            }
            for p in info.partitions
        ],
        "disk": disk_json(info.path),
        "owner": dict(info.owner) if info.owner is not None else None,
        "writers": [{"id": w.id, "pid": w.pid, "host": w.host, "shared": w.shared} for w in info.writers],
        "groups": groups,
        "last_recovery": None
        if recovery is None
        else {
            "timestamp": _iso(recovery.timestamp_ns),
            "repairs": [str(repair) for repair in recovery.repairs],
        },
    }


def print_stats(info: StreamStats, out: Console | None = None) -> None:
    """The stats as tables: one row per partition, then the owner, the groups and the last recovery."""
    out = out or console()
    parts = table(
        "partition",
        "oldest",
        "newest",
        "messages",
        "segments",
        "size",
        "oldest message (UTC)",
        "newest message (UTC)",
        title=f"stream {info.path}",
        right=("partition", "oldest", "newest", "messages", "segments", "size"),
    )
    for p in info.partitions:
        empty = p.message_count == 0
        parts.add_row(
            str(p.partition),
            "-" if empty else str(p.oldest_offset),
            "-" if empty else str(p.next_offset - 1),
            format_count(p.message_count),
            str(p.segments),
            format_bytes(p.size_bytes),
            format_time(p.oldest_timestamp_ns, zone=False),
            format_time(p.newest_timestamp_ns, zone=False),
        )
    out.print(parts)
    total = f"{format_count(info.message_count)} messages in {len(info.partitions)} partitions, "
    out.print(total + format_bytes(info.size_bytes), highlight=False)
    from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE
    from .._storage.stream import disk_usage

    disk = disk_usage(info.path)
    usage = disk.used_bytes / disk.total_bytes if disk.total_bytes else 1.0
    out.print(describe_disk(usage, disk.total_bytes, DEFAULT_REFUSE_WRITES_ABOVE), highlight=False)

    owner = info.owner
    shared = [w for w in info.writers if w.shared]
    if shared:
        out.print(f"writers: {len(shared)} shared producer{'s' if len(shared) != 1 else ''} writing", highlight=False)
        for writer in shared:
            out.print(f"  pid {writer.pid} on host {writer.host} (shared)", markup=False, highlight=False)
    elif owner is None:
        out.print("owner: none (no producer has the stream open)")
    else:
        out.print(f"owner: a producer is writing: pid {owner.get('pid', '?')} on host {owner.get('host', '?')}")

    if info.groups:
        next_offsets = {p.partition: p.next_offset for p in info.partitions}
        rows = table(
            "group", "committed (partition:offset)", "lag", "members (partitions held)", title="groups", right=("lag",)
        )
        for name, committed in sorted(info.groups.items()):
            lag = group_lag(info.path, name, committed, next_offsets)
            shown = " ".join(f"{p}:{o}" for p, o in sorted(committed.items())) or "nothing committed"
            rows.add_row(name, shown, format_count(sum(lag.values())), describe_members(info.members.get(name, ())))
        out.print(rows)
    else:
        out.print("groups: none")

    recovery = info.last_recovery
    if recovery is None:
        out.print("last recovery: never (no producer has opened the stream)")
    elif not recovery.repairs:
        out.print(f"last recovery: {format_time(recovery.timestamp_ns)}, nothing to repair")
    else:
        out.print(f"last recovery: {format_time(recovery.timestamp_ns)}, {len(recovery.repairs)} repairs:")
        for repair in recovery.repairs:
            out.print(f"  {repair}", markup=False)


def count_tags(path: str, info: StreamStats) -> tuple[list[tuple[str | None, int]], int]:
    """Messages per tag over every partition (most first; None: untagged), and how many were not counted."""
    from .._storage.stream import StreamReader

    stream = StreamReader.open(path)
    total: dict[str | None, int] = {}
    uncounted = 0
    for partition in info.partitions:
        counts, missed = stream.partition(partition.partition).tag_counts()
        uncounted += missed
        for tag, count in counts.items():
            total[tag] = total.get(tag, 0) + count
    return sorted(total.items(), key=lambda item: (-item[1], item[0] or "")), uncounted


def print_tags(counts: list[tuple[str | None, int]], uncounted: int) -> None:
    """The per-tag table of ``stats --tags``."""
    out = console()
    rows = table("tag", "messages", right=("messages",))
    for tag, count in counts:
        rows.add_row("(none)" if tag is None else tag, format_count(count))
    out.print(rows)
    if uncounted:
        out.print(
            f"{format_count(uncounted)} messages not counted (segments written before tags, entries a producer "
            "still buffers, or damaged records)",
            markup=False,
        )


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON for machines instead of tables.")
@click.option(
    "--tags",
    "with_tags",
    is_flag=True,
    help="Also count messages per tag (from the tag column, confirmed from the tagged messages' records).",
)
@click.option(
    "--prometheus",
    is_flag=True,
    help="Print offsets, sizes, lag and disk usage in Prometheus' text format (needs adiskq[prometheus]).",
)
def stats(path: str, as_json: bool, with_tags: bool, prometheus: bool) -> None:
    """Show a stream's partitions, owner, consumer groups and last recovery.

    Per partition: the oldest and newest offsets, messages, segments, bytes on disk and the
    timestamps of the oldest and newest messages. Then the producer holding the stream (if any),
    each named group's committed offsets and lag (messages not yet read), and what the last
    producer open repaired.

    \b
    Examples:
      adiskq stats orders
      adiskq stats orders --json | jq '.partitions[].next_offset'
      adiskq stats orders --tags
      adiskq stats orders --prometheus > /var/lib/node_exporter/textfile/orders.prom
    """
    from .._storage.api import stream_stats

    broken: dict[str, str] = {}  # a damaged groups/NAME/offsets.json must not hide the partitions
    info = stream_stats(os.fspath(path), broken_groups=broken)
    if prometheus:
        from .prometheus import prometheus_text

        click.echo(prometheus_text(os.fspath(path), info, disk_json(info.path)), nl=False)
        for name, why in sorted(broken.items()):
            warn(f"group {name}: {why}")
        if broken:
            raise click.exceptions.Exit(1)
        return
    tag_counts = count_tags(os.fspath(path), info) if with_tags else None
    if as_json:
        document = stats_json(info)
        if broken:
            document["broken_groups"] = broken
        if tag_counts is not None:
            counts, uncounted = tag_counts
            document["tags"] = [{"tag": tag, "messages": n} for tag, n in counts]
            document["tags_uncounted"] = uncounted
        print_json(document)
    else:
        print_stats(info)
        if tag_counts is not None:
            print_tags(*tag_counts)
        for name, why in sorted(broken.items()):
            warn(f"group {name}: {why}")
    if broken:
        raise click.exceptions.Exit(1)
