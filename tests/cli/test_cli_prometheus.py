"""`adiskq stats PATH --prometheus`: offsets, sizes, lag and disk usage, read back with prometheus-client's parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from support.cli import fill, invoke

import adiskq
from adiskq._storage.offsets import save_offsets


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, for every sample of the exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_prometheus_prints_offsets_sizes_lag_and_disk(stream_path: str) -> None:
    """Each partition's offsets, messages and size, each group's committed offset and lag, and the disk's use."""
    fill(stream_path, [adiskq.Record(b"x" * 10, key=("aaa", "bbb")[i % 2]) for i in range(20)], partitions=2)
    save_offsets(stream_path, "billing", {0: 4, 1: 10})
    found = samples(invoke("stats", stream_path, "--prometheus").output)
    stats = adiskq.stats(stream_path)
    for part in stats.partitions:
        labels = (("partition", str(part.partition)), ("stream", stream_path))
        assert found[("adiskq_partition_next_offset", labels)] == part.next_offset == 10
        assert found[("adiskq_partition_oldest_offset", labels)] == 0
        assert found[("adiskq_partition_messages", labels)] == 10
        assert found[("adiskq_partition_size_bytes", labels)] == part.size_bytes
        assert found[("adiskq_partition_segments", labels)] == 1
    group = (("group", "billing"), ("partition", "0"), ("stream", stream_path))
    assert found[("adiskq_group_committed_offset", group)] == 4
    assert found[("adiskq_consumer_lag", group)] == 6
    assert found[("adiskq_consumer_lag", (("group", "billing"), ("partition", "1"), ("stream", stream_path)))] == 0
    usage = found[("adiskq_disk_usage", (("stream", stream_path),))]
    assert 0 < usage < 1
    assert found[("adiskq_disk_refuse_writes_above", (("stream", stream_path),))] == 0.95
