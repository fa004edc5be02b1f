"""``adiskq mirror status``: a mirror's positions, lag and last error, read from where they live.

Positions are read where the mirror keeps them (the state topic for a mirror to Kafka, the stream's
last records for one from Kafka), so they are right whether or not the mirror runs; the status file
the running mirror rewrites (``_mirror_options.write_status``) adds its rate and its last error.
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import MirrorError
from .._storage.files import read_json
from .._storage.stream import StreamReader
from ._mirror_config import is_kafka_url, parse_kafka_url, read_client_config
from ._mirror_kafka import committed_records, partition_count, read_positions, state_key, watermarks
from ._mirror_mapping import offset_of
from ._mirror_options import status_path

__all__ = ["mirror_status"]

# From Kafka, a lag this small is counted record by record (offsets also number transaction markers
# and aborted records, so a mirror that copied everything would otherwise show a lag); a larger one
# is the difference of the offsets.
LAG_COUNT_LIMIT = 10_000


def mirror_status(source: str, target: str, *, kafka_config: str | None, state_topic: str) -> dict[str, Any]:
    """``{"partitions": {p: {"position", "end", "lag"}}, "running": {...} or None, "last_error", "skipped"}``."""
    config = {} if kafka_config is None else read_client_config(kafka_config)
    if is_kafka_url(target) and not is_kafka_url(source):
        end = parse_kafka_url(target)
        config["bootstrap.servers"] = end.bootstrap
        stream = StreamReader.open(source)
        stream_id = stream.settings.stream_id
        if stream_id is None:
            raise MirrorError(f"stream {source!r} has never been mirrored (it has no identity yet)")
        stored = read_positions(config, state_topic, state_key(stream_id, end.topic, 0)[:-1])
        rows = {}
        for partition in range(stream.partition_count):
            local_end = stream.partition(partition).bounds()[1]
            position = stored[partition].next_offset if partition in stored else 0
            rows[str(partition)] = {"position": position, "end": local_end, "lag": max(0, local_end - position)}
        stream_path, direction = os.path.abspath(source), "to-kafka"
    elif is_kafka_url(source) and not is_kafka_url(target):
        end = parse_kafka_url(source)
        config["bootstrap.servers"] = end.bootstrap
        partitions = partition_count(config, end.topic)
        if partitions is None:
            raise MirrorError(f"Kafka topic {end.topic!r} does not exist on {end.bootstrap}")
        stream = StreamReader.open(target)
        ends = watermarks(config, end.topic, partitions)
        rows = {}
        for partition in range(partitions):
            position = 0
            if partition < stream.partition_count:
                reader = stream.partition(partition)
                oldest, local_end = reader.bounds()
                if local_end > oldest:
                    position = (offset_of(reader.read_one(local_end - 1)) or -1) + 1
            kafka_end = ends[partition][1]
            lag = committed_records(config, end.topic, partition, position, kafka_end, LAG_COUNT_LIMIT)
            rows[str(partition)] = {"position": position, "end": kafka_end, "lag": lag}
        stream_path, direction = os.path.abspath(target), "from-kafka"
    else:
        raise MirrorError("give one stream's path and one kafka://HOST:PORT[,...]/TOPIC")
    running: dict[str, Any] | None
    try:
        loaded = read_json(status_path(stream_path, direction, end.topic))
        running = loaded if isinstance(loaded, dict) else None
    except (OSError, ValueError):
        running = None
    return {
        "partitions": rows,
        "running": running,
        "last_error": None if running is None else running.get("last_error"),
        "skipped": [] if running is None else running.get("skipped", []),
    }
