"""``adiskq.lag``, ``reset_offsets`` and ``delete_group``: a stream's folder or a ``kafka://`` URL.

The URL selects the Kafka backend (``adiskq/kafka/_cluster_admin.py``: Kafka's committed offsets of
the group), anything else the local stream's group files (``_storage/group_api.py``, whose
docstrings say the rest). ``kafka=`` is the Kafka client's configuration, as for ``Producer``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ._extras import needs_extra
from ._sansio.capabilities import is_kafka_url, refuse
from ._storage import group_api

__all__ = ["delete_group", "lag", "reset_offsets"]

KafkaOption = Mapping[str, object] | str | os.PathLike[str] | None


def _local(kafka: KafkaOption) -> None:
    if kafka is not None:
        raise refuse("kafka= (client configuration)")


def lag(path: str | os.PathLike[str], group: str, *, kafka: KafkaOption = None) -> dict[int, int]:
    """Partition -> messages left for the named ``group`` past its committed offsets (partitions it
    never committed in are left out). ``path`` is a stream's folder or a ``kafka://`` URL."""
    if is_kafka_url(path):
        with needs_extra("kafka-cluster", "adiskq.lag() of a kafka:// URL"):
            from .kafka import _cluster_admin
        return _cluster_admin.lag(str(path), group, kafka)
    _local(kafka)
    return group_api.lag(path, group)


def reset_offsets(
    path: str | os.PathLike[str],
    group: str,
    to: group_api.ResetTo,
    *,
    partition: int | None = None,
    kafka: KafkaOption = None,
) -> dict[int, int]:
    """Move the named ``group``'s committed offsets (every partition, or ``partition``) to ``to``:
    ``"oldest"``, ``"newest"``, an offset or a ``datetime``. Returns partition -> its new offset.
    ``GroupInUseError`` while members run (on Kafka: while the group has members)."""
    if is_kafka_url(path):
        group_api.check_reset_target(to)
        with needs_extra("kafka-cluster", "adiskq.reset_offsets() of a kafka:// URL"):
            from .kafka import _cluster_admin
        return _cluster_admin.reset_offsets(str(path), group, to, partition=partition, kafka=kafka)
    _local(kafka)
    return group_api.reset_offsets(path, group, to, partition=partition)


def delete_group(path: str | os.PathLike[str], group: str, *, kafka: KafkaOption = None) -> bool:
    """Delete the named ``group``; False if it did not exist. On Kafka the group is the cluster's
    (its offsets of every topic go). ``GroupInUseError`` while members run."""
    if is_kafka_url(path):
        with needs_extra("kafka-cluster", "adiskq.delete_group() of a kafka:// URL"):
            from .kafka import _cluster_admin
        return _cluster_admin.delete_group(str(path), group, kafka)
    _local(kafka)
    return group_api.delete_group(path, group)
