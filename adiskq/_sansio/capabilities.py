"""What each backend of the API has: a local stream (a folder) and a Kafka topic (``kafka://``).

One table, read by three users: ``adiskq.capabilities(path_or_url)``, the Kafka backend's
constructors (which raise ``UnsupportedFeatureError`` for a row it lacks, with the row's
``instead``), and README.md's capability table (``tests/kafka_backend/test_capabilities.py`` holds
the README to this table). No I/O: a ``kafka://`` string is told from a path by its prefix alone.
"""

from __future__ import annotations

import os
from typing import Final, NamedTuple

from .._errors import UnsupportedFeatureError

__all__ = [
    "FEATURES",
    "KAFKA_SCHEME",
    "Capability",
    "Feature",
    "backend_of",
    "capabilities",
    "is_kafka_url",
    "markdown_table",
    "refuse",
]

KAFKA_SCHEME: Final = "kafka://"


class Feature(NamedTuple):
    """One row: how the feature works on a local stream and on Kafka (empty: not there), and for
    the backend that lacks it, what to use instead."""

    name: str
    local: str
    kafka: str
    instead: str = ""


class Capability(NamedTuple):
    """A feature as one backend has it: ``supported``, and ``how`` (or, unsupported, what to use instead)."""

    feature: str
    supported: bool
    how: str


FEATURES: Final[tuple[Feature, ...]] = (
    Feature(
        "keys and values",
        "bytes (a str key as UTF-8); a push without a key gets a random one",
        "bytes (a str key as UTF-8); a push without a key sends Kafka's null key (placed at random), read as b''",
    ),
    Feature(
        "headers",
        "a mapping, or adiskq.Headers (repeated names, null values)",
        "the same: a record with a repeated name or a null value is read as adiskq.Headers",
    ),
    Feature("timestamps", "nanoseconds", "milliseconds (the sub-millisecond part is dropped)"),
    Feature("push(tag=)", "stored in the record", "the header adiskq.tag, read back as message.tag"),
    Feature(
        "tags= (tag filters)",
        "selected from the tag column without reading bodies",
        "",
        "Kafka has no tag column, so every record would be fetched: read without tags= and test message.tag, "
        "or give each tag a topic of its own",
    ),
    Feature(
        "placement of keys",
        "FNV-1 of the key",
        'murmur2 of the key, as Java clients place it; partitioner="fnv1" for a topic adiskq mirror fills '
        "with --partitioning preserve",
    ),
    Feature("serializers", "value_serializer, key_serializer, value_deserializer, key_deserializer", "the same"),
    Feature(
        'flush="sync"',
        "push returns once the record is fsynced",
        "push returns once every in-sync replica has it (acks=all); refused at open unless the topic's "
        "min.insync.replicas is 2 or more",
    ),
    Feature(
        "message size",
        "max_message_bytes (8 MiB by default)",
        "the client's message.max.bytes (1,000,000 by default) and the topic's max.message.bytes; a push "
        "over the client's limit is refused before anything is sent",
    ),
    Feature(
        "push_many",
        "each partition's share written whole or not at all",
        "each record acknowledged on its own; a failure raises PartialWriteError whose receipts say which were written",
    ),
    Feature(
        "partitions=",
        "the stream's partition count (grows, never shrinks)",
        "the topic is created with it, or grown to it",
    ),
    Feature(
        "retention",
        "Retention(max_bytes=, max_age=, max_disk_usage=), applied by the producer's vacuum",
        "max_bytes and max_age become the topic's retention.bytes and retention.ms, applied by the brokers; "
        "max_disk_usage is refused",
        "max_disk_usage measures the local disk: bound the topic with max_bytes or max_age",
    ),
    Feature(
        'compression="zstd"', "each value compressed with a trained dictionary", "the client's zstd batch compression"
    ),
    Feature(
        "local stream options",
        "segment_size_bytes, key_index, mode, lock_timeout, refuse_writes_above, flush_interval, "
        "vacuum_interval, zstd_dictionary, max_message_bytes",
        "",
        "these shape files on local disk; a topic's own settings are set with Kafka's tools (kafka-configs.sh)",
    ),
    Feature(
        "shared=True", "producers of several processes write one stream", "always: Kafka takes any number of producers"
    ),
    Feature(
        "vacuum()",
        "deletes the segments retention no longer keeps",
        "",
        "the brokers apply the topic's retention themselves",
    ),
    Feature(
        "Consumer",
        "partition=, start=, end=, on_data_loss=",
        "the same; partitions take turns among the records fetched so far, and partitions added to the topic "
        "while it reads are read from its next open",
    ),
    Feature("wait_for_stream=True", "waits for a producer to create the stream", "", "create the topic first"),
    Feature("named ConsumerGroup", "members share the partitions", "a Kafka consumer group (group.id = the name)"),
    Feature(
        "unnamed ConsumerGroup",
        "reads every partition, commits kept in memory",
        "",
        "read every partition with Consumer(url), or name the group: ConsumerGroup(url, 'name')",
    ),
    Feature(
        "exclusive=True",
        "one member holds every partition",
        "",
        "give the topic one partition, or run one member (Kafka's groups have no exclusive member)",
    ),
    Feature(
        "commit, committed, flush, seek, lag, assignment, assignments()",
        "stored in the stream's folder",
        "Kafka's committed offsets; Kafka's coordinator assigns the partitions, to a member that polls (an eager "
        "rebalance takes them all back first, so assignments() may say () between two shares; a partition "
        "handed over before any commit starts again at start=; partitions added are shared out at the "
        "client's next metadata refresh); a seek past the end the client last fetched is checked by the "
        "next read, which raises OffsetOutOfRangeError if it is still past",
    ),
    Feature(
        "adiskq.lag, reset_offsets, delete_group", "the stream's group files", "Kafka's group offsets (AdminClient)"
    ),
    Feature(
        "dead_letter()",
        "to the dead-letter stream (dead_letter_path=)",
        "to the dead-letter topic TOPIC.NAME.dead-letters, or the kafka:// URL given as dead_letter_path=",
    ),
    Feature(
        "retry()",
        "hands the message back after delay seconds (a retry stream)",
        "",
        "Kafka has no retry stream: handle the failure in the loop, or dead_letter() the message and replay "
        "the dead-letter topic",
    ),
    Feature(
        "max_attempts=", "retry() of a message delivered that often dead-letters it", "", "count attempts in the loop"
    ),
    Feature(
        "find, read, stats, offset_for_time",
        "look records up in the stream's files",
        "",
        "read with Consumer(url, partition=p, start=offset_or_datetime, end=...)",
    ),
    Feature(
        "metrics (OpenTelemetry)",
        "push and delivery counts, durations, trace context, group lag, disk usage",
        "the same, with messaging.system kafka and the topic as the destination; no disk gauges "
        "(the brokers' disks are Kafka's to report)",
    ),
    Feature(
        "kafka= (client configuration)",
        "",
        "librdkafka's settings, or a properties file's path",
        "a local stream has no client",
    ),
)

_BY_NAME: Final = {feature.name: feature for feature in FEATURES}


def is_kafka_url(value: object) -> bool:
    """Whether ``value`` names a Kafka topic (a string starting ``kafka://``) rather than a stream's folder."""
    return isinstance(value, str) and value.startswith(KAFKA_SCHEME)


def backend_of(path_or_url: str | os.PathLike[str]) -> str:
    return "kafka" if is_kafka_url(path_or_url) else "local"


def capabilities(path_or_url: str | os.PathLike[str]) -> dict[str, Capability]:
    """Every feature of the API as the backend ``path_or_url`` selects has it: a ``kafka://``
    URL selects a Kafka topic, anything else a local stream's folder. No I/O: a topic's own
    settings (``flush="sync"`` needs ``min.insync.replicas >= 2``) are checked when a producer opens."""
    if not isinstance(path_or_url, str | os.PathLike):
        raise TypeError(f"capabilities() takes a stream's path or a kafka:// URL, not {type(path_or_url).__name__}")
    backend = backend_of(path_or_url)
    table: dict[str, Capability] = {}
    for feature in FEATURES:
        how = feature.kafka if backend == "kafka" else feature.local
        table[feature.name] = Capability(feature.name, bool(how), how or feature.instead)
    return table


def refuse(name: str, *, asked: str | None = None) -> UnsupportedFeatureError:
    """The error for the table's row ``name`` on the backend that lacks it; ``asked`` names what
    the caller gave, where that says more than the row (``retention=Retention(max_disk_usage=...)``)."""
    feature = _BY_NAME[name]
    backend = "local" if not feature.local else "kafka"
    return UnsupportedFeatureError(asked or name, backend, feature.instead)


def markdown_table() -> str:
    """The table as README.md shows it (a test holds the README to it)."""
    lines = ["| feature | local stream (a folder) | Kafka topic (`kafka://`) |", "|---|---|---|"]
    for feature in FEATURES:
        local = feature.local or f"**no**: {feature.instead}"
        kafka = feature.kafka or f"**no**: {feature.instead}"
        lines.append(f"| {feature.name} | {local} | {kafka} |")
    return "\n".join(lines)
