"""``adiskq vacuum``: delete the sealed segments a retention no longer keeps, and say what went.

Vacuum changes the stream, so it takes the stream's one-writer lock: it opens the stream as its
producer would (which also runs crash recovery), and refuses while another producer has it open —
that producer vacuums on its own schedule.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING

import click

from .errors import Failure, locked_failure
from .output import console, format_bytes, format_count, format_duration, format_time, table
from .params import DURATION, RATIO, SIZE

if TYPE_CHECKING:
    from .._sansio.values import Retention

__all__ = ["vacuum"]


def _locked(path: str, holder: str | None) -> Failure:
    return locked_failure(
        path,
        holder,
        "is open in a producer",
        ", so vacuum cannot run now: that producer vacuums by the stream's retention every few seconds. "
        "To vacuum by other limits, stop it and run this again",
    )


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--max-age", type=DURATION, help="Delete segments whose newest message is older (e.g. 24h, 7d).")
@click.option("--max-bytes", type=SIZE, help="Keep at most this much per partition (e.g. 500MB, 1GiB).")
@click.option("--max-disk-usage", type=RATIO, help="Delete the oldest segments while the disk is fuller (e.g. 0.85).")
@click.option("--dry-run", "-n", is_flag=True, help="Show what would be deleted; delete nothing.")
def vacuum(
    path: str,
    max_age: dt.timedelta | None,
    max_bytes: int | None,
    max_disk_usage: float | None,
    dry_run: bool,
) -> None:
    """Delete old data: whole sealed segments, oldest first, never the active one.

    By default it applies the stream's own retention (from its settings.json); --max-age,
    --max-bytes and --max-disk-usage apply other limits, this once. Prints each segment removed.
    Refuses while a producer has the stream open.

    \b
    Examples:
      adiskq vacuum orders
      adiskq vacuum orders --max-age 7d --dry-run
      adiskq vacuum orders --max-bytes 1GiB
    """
    from .._errors import StreamLockedError
    from .._sansio.values import Retention
    from .._storage.stream import StreamReader, StreamWriter

    path = os.fspath(path)
    StreamReader.open(path)  # a missing stream is an error here; the writer would create one
    given = (max_age, max_bytes, max_disk_usage)
    retention = None if given == (None, None, None) else Retention(max_bytes, max_age, max_disk_usage)
    try:
        writer = StreamWriter.open(path)
    except StreamLockedError as error:
        if not error.held_shared:
            raise _locked(path, error.holder) from None
        try:  # shared producers are writing: vacuum as one of them (one vacuum at a time)
            writer = StreamWriter.open(path, shared=True)
        except StreamLockedError as again:
            raise _locked(path, again.holder) from None
    out = console()
    try:
        with writer.vacuuming():
            for repair in writer.recovery.repairs:
                out.print(f"opening the stream repaired {repair}", markup=False)
            effective = retention or writer.settings.retention
            if effective.is_unbounded:
                out.print(
                    "the stream keeps everything (its settings.json sets no retention): nothing to delete. "
                    "Give --max-age or --max-bytes to vacuum by other limits"
                )
                return
            doomed = writer.plan_vacuum(effective)
            infos = {(s.partition, s.base_offset): s for p in writer.partitions for s in p.segment_infos()}
            if not doomed:
                out.print(f"nothing to delete: every sealed segment is within {_describe(effective)}")
                return
            removed = table(
                "partition",
                "segment",
                "offsets",
                "size",
                "newest message (UTC)",
                right=("partition", "offsets", "size"),
            )
            for key in doomed:
                info = infos[key]
                removed.add_row(
                    str(info.partition),
                    f"{info.base_offset:020d}",
                    f"{info.base_offset}..{info.next_offset - 1}",
                    format_bytes(info.size_bytes),
                    format_time(info.newest_timestamp_ns, zone=False),
                )
            messages = sum(infos[k].next_offset - infos[k].base_offset for k in doomed)
            size = sum(infos[k].size_bytes for k in doomed)
            if dry_run:
                removed.title = f"would delete (by {_describe(effective)})"
                out.print(removed)
                out.print(
                    f"dry run: {len(doomed)} segments ({format_count(messages)} messages, {format_bytes(size)}) "
                    "would be deleted; nothing was"
                )
                return
            report = writer.delete_segments(doomed)
            removed.title = f"deleted (by {_describe(effective)})"
            out.print(removed)
            out.print(
                f"removed {len(report.removed_segments)} segments: {format_count(report.removed_messages)} messages, "
                f"{format_bytes(report.removed_bytes)}"
            )
            oldest = ", ".join(f"{p.partition}: {p.oldest_offset}" for p in writer.partitions)
            out.print(f"oldest offsets now: {oldest}")
    finally:
        writer.close()


def _describe(retention: Retention) -> str:
    parts = []
    if retention.max_age is not None:
        parts.append(f"max age {format_duration(retention.max_age)}")
    if retention.max_bytes is not None:
        parts.append(f"max {format_bytes(retention.max_bytes)} per partition")
    if retention.max_disk_usage is not None:
        parts.append(f"max disk usage {retention.max_disk_usage:.0%}")
    return ", ".join(parts)
