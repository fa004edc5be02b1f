"""The immutable values adiskq hands out and takes in: messages, receipts, retention, reports."""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, NamedTuple

from typing_extensions import TypeVar

from .._errors import InvalidArgumentError
from .native import NATIVE

__all__ = [
    "ATTEMPT_HEADER",
    "EMPTY_HEADERS",
    "GroupMember",
    "Headers",
    "KeyT",
    "Message",
    "PartitionStats",
    "Receipt",
    "Record",
    "RecoveryReport",
    "Retention",
    "SegmentRepair",
    "StreamStats",
    "VacuumReport",
    "ValueT",
    "WriterInfo",
    "datetime_from_ns",
    "header_pairs",
    "ns_from_datetime",
]


class _EmptyHeaders(Mapping[str, bytes]):
    """The read-only, empty headers of every message that has none: one shared object.

    Unlike ``types.MappingProxyType({})`` it pickles (to itself), so messages cross process
    boundaries (multiprocessing, Spark workers).
    """

    __slots__ = ()

    def __getitem__(self, name: str) -> bytes:
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"

    def __hash__(self) -> int:
        # Hashable (unlike a dict), so a message without headers can be a set member or a dict key.
        return hash(frozenset())

    def __reduce__(self) -> str:
        return "EMPTY_HEADERS"


EMPTY_HEADERS: Mapping[str, bytes] = _EmptyHeaders()

HeaderPairs = tuple[tuple[str, bytes | None], ...]


class Headers(Mapping[str, bytes]):
    """Headers as Kafka has them: every (name, value) in its order, a name possibly repeated, a
    value possibly None (Kafka's null). What a reader gives as ``Message.headers`` for a record
    that has a repeated name or a null value (a Kafka client's, through the gateway, or a
    producer's); a record without either gets a plain ``dict``.

    To write them, give one as a push's ``headers`` (or a ``Record``'s):
    ``Headers([("trace", b"a"), ("trace", b"b"), ("tombstone", None)])``. A stream stores a null
    value or a repeated name from format ``adiskq/5`` on (every new stream); a producer of an older
    stream refuses them with ``SettingsMismatchError`` saying to run ``adiskq upgrade``.

    As a mapping it is what code written for one value per name expects: each name once, in the
    order of its first header, with the value of its *last* header (as Kafka's ``lastHeader``),
    a null read as ``b""``. ``all()`` gives every header as it is, ``get_all(name)`` one name's
    values. Immutable and hashable, like the empty headers.
    """

    __slots__ = ("_last", "_pairs")

    def __init__(self, pairs: Iterable[tuple[str, bytes | None]] = ()) -> None:
        checked: list[tuple[str, bytes | None]] = []
        last: dict[str, bytes] = {}
        for name, value in pairs:
            if not isinstance(name, str):
                raise TypeError(f"header names are str, not {type(name).__name__}: {name!r}")
            if value is not None and type(value) is not bytes:
                raise TypeError(f"header values are bytes or None, not {type(value).__name__} (header {name!r})")
            checked.append((name, value))
            last[name] = b"" if value is None else value
        self._pairs: HeaderPairs = tuple(checked)
        self._last = last

    def __getitem__(self, name: str) -> bytes:
        return self._last[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._last)

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, name: object) -> bool:
        return name in self._last

    def all(self) -> HeaderPairs:
        """Every header in its order: (name, value), the value None for Kafka's null."""
        return self._pairs

    def get_all(self, name: str) -> list[bytes | None]:
        """The values of every header named ``name``, in order (empty when there is none)."""
        return [value for header, value in self._pairs if header == name]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._pairs == other._pairs
        if isinstance(other, Mapping):  # equal to a dict only when it holds nothing a dict cannot
            plain = len(self._pairs) == len(self._last) and all(value is not None for _, value in self._pairs)
            return plain and self._last == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._pairs)

    def __repr__(self) -> str:
        return f"Headers({list(self._pairs)!r})"

    def __reduce__(self) -> tuple[type[Headers], tuple[HeaderPairs]]:
        return (Headers, (self._pairs,))

    @property
    def kafka_only(self) -> bool:
        """Whether these headers hold what only a format-5 stream stores: a null value or a repeated name."""
        return len(self._pairs) != len(self._last) or any(value is None for _, value in self._pairs)


def header_pairs(headers: Mapping[str, bytes]) -> HeaderPairs:
    """Every header of a message in its order, repeats and nulls included (``Headers.all``), for any
    headers a reader gives: a ``Headers``, a ``dict`` or the empty headers."""
    if isinstance(headers, Headers):
        return headers.all()
    return tuple(headers.items())


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

# The header a retrying consumer group stamps on a message it delivers again (``_sansio/retries.py``).
ATTEMPT_HEADER = "adiskq-attempt"


def ns_from_datetime(when: dt.datetime) -> int:
    """UTC nanoseconds since the epoch; a naive datetime is taken as UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def datetime_from_ns(timestamp_ns: int) -> dt.datetime:
    """An aware UTC datetime (microsecond precision) for UTC nanoseconds since the epoch."""
    return _EPOCH + dt.timedelta(microseconds=timestamp_ns // 1_000)


# What a message's key and value are once read: bytes as stored, unless a reader was given
# deserializers (``Consumer(value_deserializer=...)``), whose results they are then.
KeyT = TypeVar("KeyT", default=bytes)
ValueT = TypeVar("ValueT", default=bytes)


class Message(NamedTuple, Generic[KeyT, ValueT]):
    """A message read back from a stream (seven fields: ``tag`` is the last, None when it has none).

    ``key`` and ``value`` are the stored bytes, or what the reader's ``key_deserializer`` and
    ``value_deserializer`` made of them: ``Message[bytes, Order]`` for a value decoded to ``Order``.
    """

    partition: int
    offset: int
    timestamp_ns: int
    key: KeyT
    value: ValueT
    headers: Mapping[str, bytes] = EMPTY_HEADERS
    tag: str | None = None

    @property
    def timestamp(self) -> dt.datetime:
        """The message's timestamp as an aware UTC datetime."""
        return datetime_from_ns(self.timestamp_ns)

    @property
    def header_list(self) -> tuple[tuple[str, bytes | None], ...]:
        """Every header in its order, as Kafka has them: a name may repeat, a value may be None
        (Kafka's null). ``headers`` is the same as a mapping: one value per name, the last."""
        return header_pairs(self.headers)

    @property
    def attempt(self) -> int:
        """Which delivery of this message this is: 1 the first time, 2 once ``ConsumerGroup.retry``
        handed it back, and so on (the ``adiskq-attempt`` header a retrying group stamps on it)."""
        headers = self.headers
        if not headers:
            return 1
        raw = headers.get(ATTEMPT_HEADER)
        if raw is None or not (0 < len(raw) <= 9 and raw.isdigit()):
            return 1
        return max(1, int(raw))


# What a record to push holds as its value and key: bytes (and str keys) as stored, or what the
# producer's ``value_serializer`` and ``key_serializer`` take.
RecordValueT_co = TypeVar("RecordValueT_co", covariant=True, default=bytes)
RecordKeyT_co = TypeVar("RecordKeyT_co", covariant=True, default=str | bytes)


class Record(NamedTuple, Generic[RecordKeyT_co, RecordValueT_co]):
    """A message to push: ``Record(b"value", key="k", headers={"type": b"x"}, tag="created")``.

    With a producer's ``value_serializer`` (``key_serializer``), ``value`` (``key``) is what it takes.
    ``headers`` may be a ``Headers`` for a null value or a repeated name (a format-5 stream's).
    """

    value: RecordValueT_co
    key: RecordKeyT_co | None = None
    headers: Mapping[str, bytes] | None = None
    timestamp: dt.datetime | int | None = None
    tag: str | None = None


if NATIVE is not None:
    # The compiled constructor (adiskq/_csrc/log/values.c): the same arguments, defaults and errors as
    # the __new__ NamedTuple writes in Python, at a tenth of its cost (push_many takes Records).
    _signature = inspect.signature(Record)  # what help() and inspect show stays the NamedTuple's
    Record.__new__ = staticmethod(NATIVE.record_new)  # type: ignore[method-assign]
    Record.__signature__ = _signature  # type: ignore[attr-defined]
    NATIVE.install_record_call(Record)  # and Record(...) calls it without type.__call__'s detour


class Receipt(NamedTuple):
    """Where a pushed message was stored; unpacks as ``partition, offset``."""

    partition: int
    offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class Retention:
    """How much a stream keeps; vacuum deletes whole sealed segments, oldest first.

    ``max_bytes``: per-partition size limit. ``max_age``: a segment goes once its newest message
    is older than this. ``max_disk_usage``: a ratio (0 < r < 1) of the file system's size, counted as
    ``df`` does (used over used plus available); above it, the oldest sealed segments of the stream
    are deleted until usage falls below it (RocketMQ's 85%). Keep it below the producer's
    ``refuse_writes_above`` (0.95 by default), so vacuum frees space before writes are refused.
    """

    max_bytes: int | None = None
    max_age: dt.timedelta | None = None
    max_disk_usage: float | None = None

    def __post_init__(self) -> None:
        if self.max_bytes is not None and (not isinstance(self.max_bytes, int) or self.max_bytes <= 0):
            raise InvalidArgumentError(f"Retention(max_bytes={self.max_bytes!r}): give a positive number of bytes")
        if self.max_age is not None:
            if isinstance(self.max_age, int | float) and not isinstance(self.max_age, bool):
                object.__setattr__(self, "max_age", dt.timedelta(seconds=self.max_age))
            if not isinstance(self.max_age, dt.timedelta) or self.max_age <= dt.timedelta(0):
                raise InvalidArgumentError(f"Retention(max_age={self.max_age!r}): give a positive timedelta or seconds")
        if self.max_disk_usage is not None and not 0.0 < self.max_disk_usage < 1.0:
            raise InvalidArgumentError(
                f"Retention(max_disk_usage={self.max_disk_usage!r}): give a ratio between 0 and 1, such as 0.85"
            )

    @property
    def max_age_ns(self) -> int | None:
        """``max_age`` in nanoseconds, or None."""
        if self.max_age is None:
            return None
        return int(self.max_age.total_seconds() * 1_000_000_000)

    @property
    def is_unbounded(self) -> bool:
        """True when this retention never deletes anything."""
        return self.max_bytes is None and self.max_age is None and self.max_disk_usage is None


@dataclasses.dataclass(frozen=True, slots=True)
class VacuumReport:
    """What one vacuum pass deleted."""

    removed_segments: tuple[tuple[int, int], ...] = ()  # (partition, base offset) per segment
    removed_messages: int = 0
    removed_bytes: int = 0

    def __bool__(self) -> bool:
        return bool(self.removed_segments)

    def merged(self, other: VacuumReport) -> VacuumReport:
        """Both reports as one."""
        return VacuumReport(
            self.removed_segments + other.removed_segments,
            self.removed_messages + other.removed_messages,
            self.removed_bytes + other.removed_bytes,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class SegmentRepair:
    """One repair recovery made to one segment."""

    partition: int
    segment: int  # base offset
    action: str  # what was done, in words
    position: int | None = None  # byte position in .data where the valid data ended, if relevant

    def __str__(self) -> str:
        at = "" if self.position is None else f" at byte {self.position}"
        return f"partition {self.partition} segment {self.segment:020d}: {self.action}{at}"


@dataclasses.dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What the last producer open found and repaired."""

    timestamp_ns: int
    repairs: tuple[SegmentRepair, ...] = ()
    # Partitions whose active segment was not re-checked, because the previous producer closed
    # cleanly (after an fsync) and the files are exactly as it left them.
    clean_partitions: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.repairs)


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionStats:
    """One partition's extent on disk."""

    partition: int
    oldest_offset: int
    next_offset: int
    segments: int
    size_bytes: int
    oldest_timestamp_ns: int | None
    newest_timestamp_ns: int | None

    @property
    def message_count(self) -> int:
        """Messages retained in the partition."""
        return self.next_offset - self.oldest_offset


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMember:
    """A live member of a named consumer group, and the partitions it holds now."""

    id: str
    pid: int
    host: str
    joined_ns: int  # UTC nanoseconds since the epoch; older members get the extra partitions
    exclusive: bool  # asked to hold every partition alone
    partitions: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class WriterInfo:
    """An open producer of a stream: who it is and whether it shares the stream (``shared=True``)."""

    id: str
    pid: int
    host: str
    shared: bool


@dataclasses.dataclass(frozen=True, slots=True)
class StreamStats:
    """A stream's partitions, owner, groups (committed offsets and live members) and last recovery."""

    path: str
    partitions: list[PartitionStats]
    owner: Mapping[str, object] | None  # {"pid": ..., "host": ..., "id": ...} of the live producer
    groups: Mapping[str, Mapping[int, int]]  # group name -> partition -> committed next offset
    last_recovery: RecoveryReport | None
    # group name -> its live members, oldest first (a group with none maps to an empty tuple)
    members: Mapping[str, tuple[GroupMember, ...]] = dataclasses.field(default_factory=dict)
    # every open producer, exclusive or shared, oldest registration first
    writers: tuple[WriterInfo, ...] = ()

    @property
    def size_bytes(self) -> int:
        """Bytes of all partitions' segment files."""
        return sum(p.size_bytes for p in self.partitions)

    @property
    def message_count(self) -> int:
        """Messages retained in all partitions."""
        return sum(p.message_count for p in self.partitions)
