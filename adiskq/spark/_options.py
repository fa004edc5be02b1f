"""The options of the ``adiskq`` Spark source and sink, parsed and checked before any task runs.

Spark hands options over as strings in a case-insensitive mapping; every bad value is refused with
an ``InvalidOptionError`` that names the option and says what it takes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Mapping
from typing import Final

from .._errors import InvalidArgumentError
from .._sansio.retention import DEFAULT_REFUSE_WRITES_ABOVE
from .._sansio.tags import TagFilter
from .._sansio.values import ns_from_datetime

__all__ = [
    "EARLIEST",
    "LATEST",
    "InvalidOptionError",
    "OffsetSpec",
    "ReadOptions",
    "WriteOptions",
]

EARLIEST: Final = -2  # Kafka's markers inside JSON offsets, kept for the same meaning
LATEST: Final = -1

DEFAULT_MAX_RECORDS_PER_PARTITION: Final = 1_000_000
DEFAULT_LOCK_TIMEOUT_SECONDS: Final = 60.0

# A stored offset, or one of the markers: {"0": 42, "1": -2} or "earliest"/"latest" for all.
OffsetSpec = int | dict[int, int]


class InvalidOptionError(InvalidArgumentError):
    """An option of the ``adiskq`` Spark source or sink has a value it cannot use."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark's option maps are case-insensitive (CaseInsensitiveDict); a plain dict in tests may not be.
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    return None if value is None else str(value)


def _local_path(name: str, raw: str, why: str) -> str:
    """An absolute local path from a plain path or a ``file:`` URI; other schemes are refused."""
    if raw.startswith("file:"):
        return os.path.abspath("/" + raw[len("file:") :].lstrip("/"))
    if "://" in raw:
        raise InvalidOptionError(f"option {name}={raw!r}: {why}, so it must be a local folder")
    return os.path.abspath(raw)


def _path(options: Mapping[str, str]) -> str:
    path = _get(options, "path")
    if not path:
        raise InvalidOptionError(
            "the adiskq source needs the stream's path: use .load(path) / .save(path) / .start(path), "
            "or .option('path', ...)"
        )
    return _local_path("path", path, "an adiskq stream is a folder on this host's disk")


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    raise InvalidOptionError(f"option {name}={raw!r}: give true or false")


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidOptionError(f"option {name}={raw!r}: give a whole number above 0")
    return value


def _non_negative_float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses NaN
        raise InvalidOptionError(f"option {name}={raw!r}: give a number of seconds, 0 or more")
    return value


def _refuse_level(options: Mapping[str, str], name: str) -> float | None:
    """The producer's ``refuse_writes_above``: a fraction in (0, 1], or ``none``; 1 and none turn it off."""
    raw = _get(options, name)
    if raw is None:
        return DEFAULT_REFUSE_WRITES_ABOVE
    if raw.strip().lower() == "none":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:  # also refuses NaN
        raise InvalidOptionError(
            f"option {name}={raw!r}: give a fraction of the file system's size above 0 and up to 1 "
            f"(default {DEFAULT_REFUSE_WRITES_ABOVE}); 1 or none turns the check off"
        )
    return None if value == 1 else value


def _offsets(options: Mapping[str, str], name: str, default: str, *, allow_earliest: bool) -> OffsetSpec:
    raw = _get(options, name)
    text = (raw if raw is not None else default).strip()
    markers = {"latest": LATEST, "earliest": EARLIEST} if allow_earliest else {"latest": LATEST}
    if text.lower() in markers:
        return markers[text.lower()]
    shown = " or ".join(f'"{word}"' for word in markers)
    usage = f'give {shown}, or JSON such as {{"0": 42, "1": {LATEST}}} (partition -> offset'
    usage += f"; {EARLIEST} means earliest, {LATEST} latest)" if allow_earliest else f"; {LATEST} means latest)"
    try:
        parsed = json.loads(text)
    except ValueError:
        raise InvalidOptionError(f"option {name}={text!r}: {usage}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise InvalidOptionError(f"option {name}={text!r}: {usage}")
    offsets: dict[int, int] = {}
    for key, value in parsed.items():
        try:
            partition = int(key)
        except ValueError:
            raise InvalidOptionError(f"option {name}: {key!r} is not a partition number; {usage}") from None
        lowest = EARLIEST if allow_earliest else LATEST
        if partition < 0 or not isinstance(value, int) or isinstance(value, bool) or value < lowest:
            raise InvalidOptionError(f"option {name}: {key!r}: {value!r} is not usable; {usage}")
        offsets[partition] = value
    return offsets


def _timestamp_ns(options: Mapping[str, str], name: str) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    text = raw.strip()
    try:
        return int(text) * 1_000_000  # milliseconds since the epoch, as Spark's Kafka source takes it
    except ValueError:
        pass
    try:
        return ns_from_datetime(dt.datetime.fromisoformat(text))
    except ValueError:
        raise InvalidOptionError(
            f"option {name}={text!r}: give milliseconds since the epoch (UTC), or an ISO 8601 time "
            "such as 2026-01-31T12:00:00+00:00"
        ) from None


def _partition_list(options: Mapping[str, str], name: str) -> tuple[int, ...] | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        chosen = sorted({int(part) for part in raw.split(",") if part.strip()})
    except ValueError:
        chosen = []
    if not chosen or chosen[0] < 0:
        raise InvalidOptionError(f"option {name}={raw!r}: give partition numbers separated by commas, such as 0,2")
    return tuple(chosen)


def _tag_list(options: Mapping[str, str], name: str) -> frozenset[str] | None:
    raw = _get(options, name)
    if raw is None:
        return None
    tags = frozenset(part.strip() for part in raw.split(",") if part.strip())
    try:
        TagFilter(tags)
    except (InvalidArgumentError, TypeError) as error:
        raise InvalidOptionError(
            f"option {name}={raw!r}: {error}; give tags separated by commas, such as created,paid"
        ) from None
    return tags


@dataclasses.dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a batch or streaming read was asked for."""

    path: str
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    starting_timestamp_ns: int | None
    partitions: tuple[int, ...] | None
    fail_on_data_loss: bool
    max_records_per_trigger: int | None
    max_records_per_partition: int
    tags: frozenset[str] | None = None  # only messages with one of these tags
    push_filters: bool = False  # offer Spark to apply tag = / tag IN filters (batch reads)

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        """Checked options; streaming reads start at the latest offsets by default, as Kafka's do."""
        if streaming and _get(options, "endingOffsets") is not None:
            raise InvalidOptionError(
                "option endingOffsets is for batch reads; a streaming query follows the stream "
                "(use Trigger.AvailableNow to stop at what is there when it starts)"
            )
        push_filters = _bool(options, "pushFilters", False)
        if streaming and push_filters:
            raise InvalidOptionError(
                "option pushFilters is for batch reads; a streaming read keeps only some tags with the option tags"
            )
        return cls(
            path=_path(options),
            starting_offsets=_offsets(
                options, "startingOffsets", "latest" if streaming else "earliest", allow_earliest=True
            ),
            ending_offsets=_offsets(options, "endingOffsets", "latest", allow_earliest=False),
            starting_timestamp_ns=_timestamp_ns(options, "startingTimestamp"),
            partitions=_partition_list(options, "partitions"),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            max_records_per_trigger=_positive_int(options, "maxRecordsPerTrigger"),
            max_records_per_partition=_positive_int(options, "maxRecordsPerPartition")
            or DEFAULT_MAX_RECORDS_PER_PARTITION,
            tags=_tag_list(options, "tags"),
            push_filters=push_filters,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a batch or streaming write was asked for."""

    path: str
    lock_timeout: float
    partition_count: int | None
    checkpoint_location: str | None
    refuse_writes_above: float | None = DEFAULT_REFUSE_WRITES_ABOVE

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Checked options."""
        checkpoint = _get(options, "checkpointLocation")
        if checkpoint is not None:
            why = "the adiskq sink keeps its commit record beside Spark's checkpoint"
            checkpoint = _local_path("checkpointLocation", checkpoint, why)
        return cls(
            path=_path(options),
            lock_timeout=_non_negative_float(options, "lockTimeout", DEFAULT_LOCK_TIMEOUT_SECONDS),
            partition_count=_positive_int(options, "partitionCount"),
            checkpoint_location=checkpoint,
            refuse_writes_above=_refuse_level(options, "refuseWritesAbove"),
        )
