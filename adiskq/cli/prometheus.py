"""``adiskq stats PATH --prometheus``: a stream's figures in Prometheus' text format, through
``prometheus-client`` (``pip install "adiskq[prometheus]"``), for node_exporter's textfile collector
or a scrape.

Every series carries ``stream`` (the path as given); partition series carry ``partition``, group
series ``group``. Lag is what ``adiskq groups`` shows: messages after a group's committed offset (for
a group opened with tags, only those of its tags); partitions a group never committed have none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._extras import needs_extra

if TYPE_CHECKING:
    from .._sansio.values import StreamStats

__all__ = ["prometheus_text"]


def prometheus_text(path: str, info: StreamStats, disk: dict[str, object]) -> str:
    """The exposition of one stream's partitions, groups and disk."""
    with needs_extra("prometheus", "--prometheus"):
        from prometheus_client import CollectorRegistry, Gauge, generate_latest
    from .stats import group_lag

    registry = CollectorRegistry(auto_describe=False)
    partition_labels = ("stream", "partition")
    group_labels = ("stream", "group", "partition")

    def gauge(name: str, documentation: str, labels: tuple[str, ...], unit: str = "") -> Gauge:
        return Gauge(name, documentation, labels, unit=unit, registry=registry)

    oldest = gauge("adiskq_partition_oldest_offset", "The oldest offset a partition still holds.", partition_labels)
    next_offset = gauge("adiskq_partition_next_offset", "The offset a partition's next message gets.", partition_labels)
    messages = gauge("adiskq_partition_messages", "Messages a partition holds.", partition_labels)
    size = gauge("adiskq_partition_size", "Bytes of a partition's segment files.", partition_labels, unit="bytes")
    segments = gauge("adiskq_partition_segments", "Segments of a partition.", partition_labels)
    committed = gauge(
        "adiskq_group_committed_offset", "The next offset a named group reads in a partition.", group_labels
    )
    lag = gauge("adiskq_consumer_lag", "Messages after a named group's committed offset.", group_labels)
    usage = gauge("adiskq_disk_usage", "Use of the stream's file system (0 to 1), as df counts it.", ("stream",))
    level = gauge(
        "adiskq_disk_refuse_writes_above",
        "The use above which producers refuse writes by default (refuse_writes_above).",
        ("stream",),
    )
    next_offsets = {}
    for part in info.partitions:
        labels = (path, str(part.partition))
        oldest.labels(*labels).set(part.oldest_offset)
        next_offset.labels(*labels).set(part.next_offset)
        messages.labels(*labels).set(part.message_count)
        size.labels(*labels).set(part.size_bytes)
        segments.labels(*labels).set(part.segments)
        next_offsets[part.partition] = part.next_offset
    for name, offsets in sorted(info.groups.items()):
        left = group_lag(info.path, name, offsets, next_offsets)
        for partition, offset in sorted(offsets.items()):
            committed.labels(path, name, str(partition)).set(offset)
            if partition in left:
                lag.labels(path, name, str(partition)).set(left[partition])
    usage.labels(path).set(float(disk["usage"]))  # type: ignore[arg-type]
    level.labels(path).set(float(disk["refuse_writes_above"]))  # type: ignore[arg-type]
    return generate_latest(registry).decode()
