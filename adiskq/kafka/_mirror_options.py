"""What a mirror is asked to do, checked at construction; and what it reports while it runs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from collections.abc import Mapping
from typing import Final, Literal

from .._errors import InvalidArgumentError
from .._storage.files import atomic_write_json

__all__ = ["DEFAULT_STATE_TOPIC", "From", "MirrorOptions", "MirrorStatus", "status_path"]

DEFAULT_STATE_TOPIC: Final = "adiskq-mirror-state"
STATUS_FOLDER: Final = "mirrors"

From = Literal["oldest", "newest"] | int | dt.datetime


@dataclasses.dataclass(frozen=True, slots=True)
class MirrorOptions:
    kafka_config: Mapping[str, str]
    partitioning: Literal["preserve", "rehash"] = "preserve"
    create_topic: bool = False
    partitions: int | None = None  # of a topic or stream the mirror creates; the source's count by default
    replication_factor: int = -1  # of a topic it creates; -1: the cluster's default.replication.factor
    start: From = "oldest"  # where to begin where the mirror has no position yet
    on_data_loss: Literal["fail", "skip"] = "fail"
    once: bool = False
    state_topic: str = DEFAULT_STATE_TOPIC
    batch_messages: int = 10_000

    def __post_init__(self) -> None:
        if self.partitioning not in ("preserve", "rehash"):
            raise InvalidArgumentError(
                f"partitioning={self.partitioning!r}: use 'preserve' (partition p to partition p) or 'rehash' "
                "(Kafka's murmur2 of the key)"
            )
        if self.on_data_loss not in ("fail", "skip"):
            raise InvalidArgumentError(f"on_data_loss={self.on_data_loss!r}: use 'fail' or 'skip'")
        start = self.start
        if isinstance(start, str):
            if start not in ("oldest", "newest"):
                raise InvalidArgumentError(f"start={start!r}: use 'oldest', 'newest', an offset or a datetime")
        elif (
            isinstance(start, bool)
            or not isinstance(start, int | dt.datetime)
            or (isinstance(start, int) and start < 0)
        ):
            raise InvalidArgumentError(f"start={start!r}: use 'oldest', 'newest', an offset (0 or more) or a datetime")
        elif isinstance(start, dt.datetime) and start.tzinfo is None:
            raise InvalidArgumentError(f"start={start!r}: give an aware datetime (with a time zone)")
        for name in ("partitions", "batch_messages"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidArgumentError(f"{name}={value!r}: give a positive whole number")
        if (
            isinstance(self.replication_factor, bool)
            or not isinstance(self.replication_factor, int)
            or not (self.replication_factor == -1 or self.replication_factor >= 1)
        ):
            raise InvalidArgumentError(
                f"replication_factor={self.replication_factor!r}: give 1 or more, or -1 for the cluster's default"
            )
        if "transactional.id" in self.kafka_config:
            raise InvalidArgumentError(
                "the Kafka client configuration sets transactional.id: the mirror derives it from the stream's "
                "identity and the topic, so that a restarted copy fences the old one; leave it out"
            )


@dataclasses.dataclass
class MirrorStatus:
    """What a running mirror reports: ``Mirror.status``, and the status file ``adiskq mirror status`` reads."""

    direction: Literal["to-kafka", "from-kafka"]
    source: str
    target: str
    positions: dict[int, int] = dataclasses.field(default_factory=dict)  # next offset to read, by source partition
    ends: dict[int, int] = dataclasses.field(default_factory=dict)  # the source's ends last seen, by partition
    shipped: int = 0  # messages committed to the target since this mirror started
    started: float = dataclasses.field(default_factory=time.time)
    updated: float = dataclasses.field(default_factory=time.time)
    last_error: str | None = None
    skipped: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)  # (partition, first, end) lost

    @property
    def rate(self) -> float:
        """Messages a second since the mirror started."""
        elapsed = max(self.updated - self.started, 1e-9)
        return self.shipped / elapsed

    @property
    def lag(self) -> dict[int, int]:
        return {p: max(0, self.ends.get(p, 0) - next_offset) for p, next_offset in self.positions.items()}

    def to_json(self) -> dict[str, object]:
        return {
            "direction": self.direction,
            "source": self.source,
            "target": self.target,
            "positions": {str(p): o for p, o in sorted(self.positions.items())},
            "ends": {str(p): o for p, o in sorted(self.ends.items())},
            "shipped": self.shipped,
            "started": self.started,
            "updated": self.updated,
            "rate": self.rate,
            "last_error": self.last_error,
            "skipped": [list(gap) for gap in self.skipped],
            "pid": os.getpid(),
        }


def status_path(stream_path: str, direction: str, topic: str) -> str:
    """Where a mirror of the stream at ``stream_path`` keeps its status (``mirrors/`` in the stream)."""
    return os.path.join(stream_path, STATUS_FOLDER, f"{direction}-{topic}.json")


def write_status(stream_path: str, status: MirrorStatus, topic: str) -> None:
    """Replace the status file (atomically; not fsynced: it is a report, rewritten every second)."""
    path = status_path(stream_path, status.direction, topic)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    atomic_write_json(path, status.to_json(), durable=False)
