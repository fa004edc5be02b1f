"""Which segments a vacuum deletes: numbers in, decisions out, no files and no clock.

Rules (go-diskq's, plus RocketMQ's disk-usage limit):

* only whole *sealed* segments go, oldest first, so a partition stays a contiguous range of
  offsets; the active (last) segment is never deleted;
* ``max_age``: a segment goes when its newest message is older than ``now - max_age``;
* ``max_bytes``: per partition, the oldest sealed segments go while the partition is larger;
* ``max_disk_usage``: while the file system is fuller than the ratio, the oldest sealed segments of
  the whole stream go (oldest newest-message first), until enough bytes would be freed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

from .values import Retention

__all__ = ["DEFAULT_REFUSE_WRITES_ABOVE", "DiskUsage", "SegmentInfo", "plan_vacuum"]

# A producer's default refuse_writes_above (RocketMQ refuses writes at 90%). High enough that a
# disk a machine already runs at (80-90% full is common) keeps taking writes when this check arrives
# in an upgrade; low enough to leave room for what must still be written when the stream may not
# grow: consumer-group commits, recovery records, the settings file's atomic rewrite, and the other
# programs on the machine (5% of a 100 GiB disk is 5 GiB). A stream Retention(max_disk_usage=0.85)
# keeps usage below it by deleting old segments.
DEFAULT_REFUSE_WRITES_ABOVE: Final = 0.95


class SegmentInfo(NamedTuple):
    """What vacuum needs to know of one segment."""

    partition: int
    base_offset: int
    next_offset: int
    size_bytes: int
    newest_timestamp_ns: int | None  # None for an empty segment


class DiskUsage(NamedTuple):
    """The file system's size and use, in bytes."""

    total_bytes: int
    used_bytes: int


def plan_vacuum(
    partitions: Mapping[int, Sequence[SegmentInfo]],
    retention: Retention,
    now_ns: int,
    disk: DiskUsage | None = None,
    log_starts: Mapping[int, int] | None = None,
) -> list[SegmentInfo]:
    """The segments to delete, oldest first within each partition.

    ``partitions`` maps each partition to its segments in offset order, the active one last.
    ``log_starts``: each partition's log start offset; a sealed segment whose records all lie below
    it goes whatever the retention.
    """
    doomed: list[SegmentInfo] = []
    survivors: dict[int, list[SegmentInfo]] = {}
    max_age_ns = retention.max_age_ns
    for partition, segments in partitions.items():
        sealed = list(segments[:-1])
        total = sum(s.size_bytes for s in segments)
        cut = 0
        while cut < len(sealed):
            segment = sealed[cut]
            too_old = (
                max_age_ns is not None
                and segment.newest_timestamp_ns is not None
                and segment.newest_timestamp_ns < now_ns - max_age_ns
            )
            too_big = retention.max_bytes is not None and total > retention.max_bytes
            below_start = log_starts is not None and segment.next_offset <= log_starts.get(partition, 0)
            if not (too_old or too_big or below_start):
                break
            total -= segment.size_bytes
            cut += 1
        doomed.extend(sealed[:cut])
        survivors[partition] = sealed[cut:]

    if retention.max_disk_usage is not None and disk is not None and disk.total_bytes > 0:
        allowed = retention.max_disk_usage * disk.total_bytes
        excess = disk.used_bytes - sum(s.size_bytes for s in doomed) - allowed
        if excess > 0:
            # Oldest data of the whole stream first; each partition gives up a prefix.
            heads = dict.fromkeys(survivors, 0)
            while excess > 0:
                candidates = [(survivors[p][i], p) for p, i in heads.items() if i < len(survivors[p])]
                if not candidates:
                    break
                segment, partition = min(
                    candidates,
                    key=lambda c: (c[0].newest_timestamp_ns is not None, c[0].newest_timestamp_ns or 0),
                )
                doomed.append(segment)
                heads[partition] += 1
                excess -= segment.size_bytes
    return doomed
