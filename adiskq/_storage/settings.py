"""``settings.json``: what a stream is (format, partitions) and how it is kept (segments, retention).

The keys are go-diskq's where go-diskq has one, so tools that know its layout find their way;
``format`` marks the record format and guards against reading another layout as ours:
``adiskq/2`` since records may carry a tag (``adiskq/_sansio/codec.py`` says what changed). A
format-1 stream is read and written as it is (its untagged records are the same bytes in both),
and stays format 1 until ``adiskq upgrade`` moves it (``upgrade.py``): a reader that knows only
format 1 then refuses it rather than misread a tagged record, so the move is a step its owner takes
once every such reader is gone, never a side effect of opening a producer. A producer refuses a
tag on a format-1 stream (``require_tags``).

``adiskq/3`` is a stream made with ``compression="zstd"`` (``"compression": "zstd"``): its records may
hold values compressed with the stream's dictionaries (``adiskq/_sansio/compression.py``). Readers
of formats 1 and 2 (adiskq before compression) refuse it by this format, with ``NotAStreamError``
naming a newer adiskq format, instead of handing out compressed bytes as values. A stream gets
format 3 only when it is created compressed: a producer asking for compression on an older stream is
refused, since a reader of that stream's older adiskq may have it open. Its segments are compact
(``segment_writer.py``): no ``.timeindex``, and a ``.tagindex`` only from a segment's first tagged message,
since the records hold timestamps and tags and those index files would otherwise outweigh a
compressed value.

``adiskq/4`` is a stream with an identity: ``"stream_id"``, 32 lowercase hex digits (a random
128-bit id), and otherwise format 2, or format 3 when it also says ``"compression"``. The Kafka
mirror derives its ``transactional.id`` and the keys of its positions from it (``docs/MIRROR.md``),
because a path is no identity: a folder is moved, restored, or made again under the same name. The
identity is given once (``give_identity``, under the rules of ``adiskq upgrade``: nothing has the
stream open) and kept by every later write of this file. Readers of formats 1 to 3 refuse format 4
by its name: an older producer would rewrite this file without the identity when it grows the
partitions, and the next mirror would take the stream for another one and ship it all again.

``adiskq/5`` is what a new stream is: its records may carry headers as Kafka has them (a null
value, a name repeated; ``codec.py``), and it may also say ``"compression"`` (compact segments, as
format 3) and a ``"stream_id"`` (optional here, given by ``give_identity`` as in format 4). Readers
of formats 1 to 4 refuse format 5 by its name, since they would read a null header value's length as
a 4 GiB value and call the record damaged. A stream of formats 1 to 4 is read and written as it is,
refuses what it cannot hold (a producer's or the Kafka gateway's null header value or repeated name:
``require_kafka_headers``), and moves to format 5 with ``adiskq upgrade`` (``upgrade.py``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
from collections.abc import Mapping
from typing import Final, NamedTuple

from .._errors import CorruptStreamError, InvalidArgumentError, NotAStreamError, SettingsMismatchError
from .._sansio.codec import DEFAULT_MAX_RECORD_BYTES
from .._sansio.naming import MAX_PARTITIONS, SETTINGS_FILE
from .._sansio.values import Retention
from .files import DEFAULT_FILE_MODE, atomic_write_json, read_json

__all__ = [
    "COMPRESSED_FORMAT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_SEGMENT_SIZE_BYTES",
    "FORMAT",
    "IDENTITY_FORMAT",
    "READABLE_FORMATS",
    "TAGS_FORMAT",
    "AskedSettings",
    "PartitionCountChange",
    "StreamSettings",
    "load_settings",
    "require_compression",
    "require_kafka_headers",
    "require_tags",
    "require_transactions",
    "save_settings",
]

FORMAT: Final = "adiskq/5"  # what a new stream is, and what `adiskq upgrade` moves an older one to
TAGS_FORMAT: Final = "adiskq/2"  # records may carry a tag
COMPRESSED_FORMAT: Final = "adiskq/3"  # a stream created with compression="zstd" before format 5
IDENTITY_FORMAT: Final = "adiskq/4"  # a stream with a "stream_id" (format 2, or 3 with "compression")
READABLE_FORMATS: Final = ("adiskq/1", TAGS_FORMAT, COMPRESSED_FORMAT, IDENTITY_FORMAT, FORMAT)  # what readers take
STREAM_ID_PATTERN: Final = re.compile(r"[0-9a-f]{32}")
COMPRESSIONS: Final = ("zstd",)
DEFAULT_SEGMENT_SIZE_BYTES: Final = 32 * 2**20
DEFAULT_MAX_MESSAGE_BYTES: Final = 8 * 2**20
MIN_SEGMENT_SIZE_BYTES: Final = 1024


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class PartitionCountChange(NamedTuple):
    """A partition count a stream had before it grew, and each of its partitions' next offset then.

    Keys were placed with ``partition_count`` below those offsets; ``find`` looks for a key's older
    messages there.
    """

    partition_count: int
    next_offsets: tuple[int, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class StreamSettings:
    """The persistent settings of a stream."""

    partition_count: int = 1
    segment_size_bytes: int = DEFAULT_SEGMENT_SIZE_BYTES
    retention: Retention = dataclasses.field(default_factory=Retention)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    key_index: bool = True
    # Earlier partition counts, oldest first (stored only once the count has grown).
    partition_history: tuple[PartitionCountChange, ...] = ()
    # The stored format: kept as it is by producers; `adiskq upgrade` moves an older stream to FORMAT.
    format: str = FORMAT
    # "zstd" on a stream created compressed (formats 3, 4 and 5): producers compress values with its dictionaries.
    compression: str | None = None
    # The stream's identity (formats 4 and 5): 32 hex digits, given once by ``give_identity``.
    stream_id: str | None = None

    @property
    def holds_tags(self) -> bool:
        """Whether records of this stream may carry a tag (format 2 on)."""
        return self.format != "adiskq/1"

    @property
    def holds_kafka_headers(self) -> bool:
        """Whether records of this stream may carry a null header value or a repeated name (format 5)."""
        return self.format == FORMAT

    @property
    def holds_transactions(self) -> bool:
        """Whether records of this stream may be a Kafka transaction's, markers, or keyless (format 5:
        ``codec.py``'s attributes bits 2 to 4)."""
        return self.format == FORMAT

    @property
    def compact_segments(self) -> bool:
        """Whether segments keep no ``.timeindex``, and a ``.tagindex`` only once a message has a tag
        (format 3, and formats 4 and 5 with compression)."""
        return self.format == COMPRESSED_FORMAT or (
            self.format in (IDENTITY_FORMAT, FORMAT) and self.compression is not None
        )

    def __post_init__(self) -> None:
        if not _is_int(self.partition_count) or not 1 <= self.partition_count <= MAX_PARTITIONS:
            raise InvalidArgumentError(
                f"partitions={self.partition_count!r}: give a whole number from 1 to {MAX_PARTITIONS}"
            )
        if not _is_int(self.segment_size_bytes) or self.segment_size_bytes < MIN_SEGMENT_SIZE_BYTES:
            raise InvalidArgumentError(
                f"segment_size_bytes={self.segment_size_bytes!r}: give at least {MIN_SEGMENT_SIZE_BYTES} bytes "
                "(the default is 32 MiB)"
            )
        # Readers, recovery and check refuse a record above DEFAULT_MAX_RECORD_BYTES as damaged, so a
        # larger limit would let a push succeed that no reader could read and recovery would cut.
        if not _is_int(self.max_message_bytes) or not 64 <= self.max_message_bytes <= DEFAULT_MAX_RECORD_BYTES:
            raise InvalidArgumentError(
                f"max_message_bytes={self.max_message_bytes!r}: give from 64 bytes to {DEFAULT_MAX_RECORD_BYTES} "
                "(1 GiB, the largest record readers and recovery accept); the default is 8 MiB"
            )

    def to_json(self) -> dict[str, object]:
        """The settings as ``settings.json`` stores them."""
        stored: dict[str, object] = {
            "format": self.format,
            "partition_count": self.partition_count,
            "segment_size_bytes": self.segment_size_bytes,
            "retention_max_bytes": self.retention.max_bytes,
            "retention_max_age": self.retention.max_age_ns,
            "retention_max_disk_usage": self.retention.max_disk_usage,
            "max_message_bytes": self.max_message_bytes,
            "key_index": self.key_index,
        }
        if self.compression is not None:
            stored["compression"] = self.compression
        if self.stream_id is not None:
            stored["stream_id"] = self.stream_id
        if self.partition_history:
            stored["partition_history"] = [
                {"partition_count": change.partition_count, "next_offsets": list(change.next_offsets)}
                for change in self.partition_history
            ]
        return stored

    @classmethod
    def from_json(cls, data: object, path: str) -> StreamSettings:
        """Settings from a parsed ``settings.json``; CorruptStreamError says what is wrong."""
        if not isinstance(data, Mapping):
            raise CorruptStreamError(f"{path} does not hold a JSON object; restore it from a backup")
        stored_format = data.get("format")
        if stored_format not in READABLE_FORMATS:
            raise NotAStreamError(
                os.path.dirname(path),
                f"settings.json says format {stored_format!r}, not one of {', '.join(READABLE_FORMATS)}: "
                "it may be a go-diskq stream or a newer adiskq format",
            )
        stream_id = _stored_stream_id(data, str(stored_format), path)
        try:
            max_age_ns = data.get("retention_max_age")
            retention = Retention(
                max_bytes=data.get("retention_max_bytes"),
                max_age=None if max_age_ns is None else dt.timedelta(microseconds=int(max_age_ns) / 1000),
                max_disk_usage=data.get("retention_max_disk_usage"),
            )
            return cls(
                partition_count=data["partition_count"],
                segment_size_bytes=data.get("segment_size_bytes", DEFAULT_SEGMENT_SIZE_BYTES),
                retention=retention,
                max_message_bytes=data.get("max_message_bytes", DEFAULT_MAX_MESSAGE_BYTES),
                key_index=bool(data.get("key_index", True)),
                partition_history=tuple(
                    PartitionCountChange(int(change["partition_count"]), tuple(map(int, change["next_offsets"])))
                    for change in data.get("partition_history", ())
                ),
                format=str(stored_format),
                compression=_stored_compression(data, str(stored_format), path),
                stream_id=stream_id,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptStreamError(
                f"{path} is damaged ({error}); restore it from a backup or fix the named key"
            ) from None


def _stored_compression(data: Mapping[str, object], stored_format: str, path: str) -> str | None:
    compression = data.get("compression")
    if compression is not None and (
        compression not in COMPRESSIONS or stored_format not in (COMPRESSED_FORMAT, IDENTITY_FORMAT, FORMAT)
    ):
        raise NotAStreamError(
            os.path.dirname(path),
            f"settings.json says compression {compression!r} in format {stored_format!r}: a newer adiskq wrote it",
        )
    return None if compression is None else str(compression)


def _stored_stream_id(data: Mapping[str, object], stored_format: str, path: str) -> str | None:
    stream_id = data.get("stream_id")
    if stored_format == FORMAT and stream_id is None:  # format 5 has an identity once one is given
        return None
    if stored_format not in (IDENTITY_FORMAT, FORMAT):
        if stream_id is not None:
            raise NotAStreamError(
                os.path.dirname(path),
                f"settings.json says stream_id {stream_id!r} in format {stored_format!r}: a newer adiskq wrote it",
            )
        return None
    if not isinstance(stream_id, str) or STREAM_ID_PATTERN.fullmatch(stream_id) is None:
        raise CorruptStreamError(
            f"{path} is damaged: format {stored_format!r} needs a stream_id of 32 lowercase hex digits, "
            f"not {stream_id!r}; restore it from a backup"
        )
    return stream_id


class AskedSettings(NamedTuple):
    """The settings a producer asks for; None keeps what the stream has (the default for a new one)."""

    partition_count: int | None = None
    segment_size_bytes: int | None = None
    retention: Retention | None = None
    max_message_bytes: int | None = None
    key_index: bool | None = None
    compression: str | None = None  # "zstd": create the stream compressed, or open a compressed one

    def applied_to(self, base: StreamSettings) -> StreamSettings:
        """``base`` with what was asked for; InvalidArgumentError if something is out of range."""
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise InvalidArgumentError(f'compression={self.compression!r}: give "zstd", or None for none')
        return dataclasses.replace(
            base,
            partition_count=base.partition_count if self.partition_count is None else self.partition_count,
            segment_size_bytes=base.segment_size_bytes if self.segment_size_bytes is None else self.segment_size_bytes,
            retention=base.retention if self.retention is None else self.retention,
            max_message_bytes=base.max_message_bytes if self.max_message_bytes is None else self.max_message_bytes,
            key_index=base.key_index if self.key_index is None else self.key_index,
        )


def require_compression(stored: StreamSettings | None, asked: AskedSettings, stream_path: str) -> StreamSettings | None:
    """The settings of a new compressed stream when ``asked`` wants compression and there is no stream
    yet; None when nothing changes; SettingsMismatchError for compression on a stream made without it."""
    if asked.compression is None:
        return None
    if stored is None:
        return StreamSettings(format=FORMAT, compression=asked.compression)
    if stored.compression != asked.compression:
        raise SettingsMismatchError(
            f"stream {stream_path!r} was created without compression (format {stored.format!r}), and an adiskq "
            "older than compression may be reading it: it would take compressed values for the real ones. "
            f"Create a new stream with compression={asked.compression!r} (a consumer of this one feeding a producer "
            "of it copies the messages), or open this one without compression"
        )
    return None


def require_tags(settings: StreamSettings, stream_path: str) -> None:
    """SettingsMismatchError, saying how to move the stream, when its format has no tags."""
    if not settings.holds_tags:
        raise SettingsMismatchError(
            f"stream {stream_path!r} is in format {settings.format!r}, which has no tags, so a message with "
            f"a tag cannot be written to it. Move it to {FORMAT!r} with `adiskq upgrade {stream_path}` once "
            "every program that reads or writes it runs an adiskq that knows tags (one that knows only "
            f"{settings.format!r} would misread a tagged message), then open the producer again"
        )


def require_kafka_headers(settings: StreamSettings, stream_path: str) -> None:
    """SettingsMismatchError, saying how to move the stream, when its format has no null header
    values or repeated header names (before format 5)."""
    if not settings.holds_kafka_headers:
        raise SettingsMismatchError(
            f"stream {stream_path!r} is in format {settings.format!r}, which holds one bytes value per header "
            "name, so a message with a null header value or a repeated header name cannot be written to it. "
            f"Move it to {FORMAT!r} with `adiskq upgrade {stream_path}` once every program that reads or writes it "
            f"runs an adiskq that knows {FORMAT!r}, then write again"
        )


def require_transactions(settings: StreamSettings, stream_path: str) -> None:
    """SettingsMismatchError, saying how to move the stream, when its format cannot hold a Kafka
    transaction's records and markers (before format 5)."""
    if not settings.holds_transactions:
        raise SettingsMismatchError(
            f"stream {stream_path!r} is in format {settings.format!r}, which cannot hold a Kafka transaction's "
            f"records. Move it to {FORMAT!r} with `adiskq upgrade {stream_path}` once every program that reads or "
            f"writes it runs an adiskq that knows {FORMAT!r}, then write again"
        )


def load_settings(stream_path: str) -> StreamSettings | None:
    """The stream's settings, or None when there is no ``settings.json``."""
    path = os.path.join(stream_path, SETTINGS_FILE)
    try:
        data = read_json(path)
    except FileNotFoundError:
        return None
    except ValueError as error:  # JSON or UTF-8 errors
        raise CorruptStreamError(f"{path} is not valid JSON ({error}); restore it from a backup") from None
    return StreamSettings.from_json(data, path)


def save_settings(stream_path: str, settings: StreamSettings, *, mode: int = DEFAULT_FILE_MODE) -> None:
    """Replace ``settings.json`` atomically and durably."""
    atomic_write_json(os.path.join(stream_path, SETTINGS_FILE), settings.to_json(), mode=mode)
