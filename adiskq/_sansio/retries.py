"""The headers of retries and dead letters: what a retrying consumer group writes beside a message.

A retried message is stored again, unchanged (value, key, tag and the producer's headers), in the
group's retry stream, with these headers added (values are ASCII text):

    adiskq-attempt                the delivery it will be: 2 for the first retry, and so on
    adiskq-due-ns                 UTC nanoseconds before which it is not delivered again
    adiskq-source-partition       where the message was pushed: its partition
    adiskq-source-offset          and offset in the source stream
    adiskq-source-timestamp-ns    and its timestamp (the retry record's own is when retry() ran)
    adiskq-reason                 why it was retried (when the caller said; UTF-8)

When the group delivers it, the message carries its source partition, offset and timestamp, those
headers, and ``adiskq-retry-offset``: the retry record it came from, which ``commit`` marks done.

A dead letter is stored in the dead-letter stream with the producer's headers, ``adiskq-attempt``,
``adiskq-reason``, ``adiskq-source-partition``, ``-offset`` and ``-timestamp-ns`` (above),
``adiskq-source-stream`` (the source stream's absolute path) and ``adiskq-group`` (the group's
name). Handing a dead letter back to its stream drops every ``adiskq-`` header, so it starts again
at attempt 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .values import ATTEMPT_HEADER, Message

__all__ = [
    "ATTEMPT_HEADER",
    "GROUP_HEADER",
    "PREFIX",
    "REASON_HEADER",
    "RETRY_OFFSET_HEADER",
    "SOURCE_STREAM_HEADER",
    "Source",
    "dead_letter_headers",
    "delivered",
    "due_ns",
    "retry_headers",
    "retry_offset",
    "source_of",
    "user_headers",
]

PREFIX: Final = "adiskq-"
DUE_HEADER: Final = "adiskq-due-ns"
SOURCE_PARTITION_HEADER: Final = "adiskq-source-partition"
SOURCE_OFFSET_HEADER: Final = "adiskq-source-offset"
SOURCE_TIMESTAMP_HEADER: Final = "adiskq-source-timestamp-ns"
SOURCE_STREAM_HEADER: Final = "adiskq-source-stream"
GROUP_HEADER: Final = "adiskq-group"
REASON_HEADER: Final = "adiskq-reason"
RETRY_OFFSET_HEADER: Final = "adiskq-retry-offset"
# A reason is kept whole up to this many bytes; longer ones are cut (a header is not a log file).
MAX_REASON_BYTES: Final = 4096


class Source(NamedTuple):
    """Where a message was first pushed: its partition, offset and timestamp in the source stream."""

    partition: int
    offset: int
    timestamp_ns: int


def _number(headers: Mapping[str, bytes], name: str) -> int | None:
    raw = headers.get(name)
    if raw is None or not (0 < len(raw) <= 20 and raw.isdigit()):
        return None
    return int(raw)


def user_headers(headers: Mapping[str, bytes]) -> dict[str, bytes]:
    """The headers the producer gave (every one not named ``adiskq-...``)."""
    return {name: value for name, value in headers.items() if not name.startswith(PREFIX)}


def source_of(message: Message) -> Source:
    """Where ``message`` was first pushed: from its headers if a group delivered it again, else itself."""
    headers = message.headers
    if headers:
        partition = _number(headers, SOURCE_PARTITION_HEADER)
        offset = _number(headers, SOURCE_OFFSET_HEADER)
        timestamp = _number(headers, SOURCE_TIMESTAMP_HEADER)
        if partition is not None and offset is not None and timestamp is not None:
            return Source(partition, offset, timestamp)
    return Source(message.partition, message.offset, message.timestamp_ns)


def _reason_bytes(reason: str) -> bytes:
    return reason.encode("utf-8", "replace")[:MAX_REASON_BYTES]


def retry_headers(message: Message, *, attempt: int, due_ns: int, reason: str | None) -> dict[str, bytes]:
    """The headers of the retry record that hands ``message`` back for delivery ``attempt``."""
    source = source_of(message)
    headers = user_headers(message.headers)
    headers[ATTEMPT_HEADER] = b"%d" % attempt
    headers[DUE_HEADER] = b"%d" % due_ns
    headers[SOURCE_PARTITION_HEADER] = b"%d" % source.partition
    headers[SOURCE_OFFSET_HEADER] = b"%d" % source.offset
    headers[SOURCE_TIMESTAMP_HEADER] = b"%d" % source.timestamp_ns
    if reason is not None:
        headers[REASON_HEADER] = _reason_bytes(reason)
    return headers


def dead_letter_headers(message: Message, *, stream: str, group: str, reason: str) -> dict[str, bytes]:
    """The headers of ``message``'s dead letter: where it came from, which group gave up, after
    how many attempts, and why."""
    source = source_of(message)
    headers = user_headers(message.headers)
    headers[SOURCE_STREAM_HEADER] = stream.encode("utf-8", "surrogateescape")
    headers[SOURCE_PARTITION_HEADER] = b"%d" % source.partition
    headers[SOURCE_OFFSET_HEADER] = b"%d" % source.offset
    headers[SOURCE_TIMESTAMP_HEADER] = b"%d" % source.timestamp_ns
    headers[GROUP_HEADER] = group.encode("utf-8")
    headers[ATTEMPT_HEADER] = b"%d" % message.attempt
    headers[REASON_HEADER] = _reason_bytes(reason)
    return headers


def due_ns(record: Message) -> int:
    """When a retry record may be delivered (UTC ns); a record without the header is due at once."""
    return _number(record.headers, DUE_HEADER) or 0


def delivered(record: Message) -> Message:
    """The message a group hands out for a retry record: its source place and time, the record's
    headers, and ``adiskq-retry-offset`` naming the record."""
    source = source_of(record)
    headers = dict(record.headers)
    headers[RETRY_OFFSET_HEADER] = b"%d" % record.offset
    return record._replace(
        partition=source.partition, offset=source.offset, timestamp_ns=source.timestamp_ns, headers=headers
    )


def retry_offset(message: Message[Any, Any]) -> int | None:
    """The retry record a delivered message came from (None: it was read from its stream)."""
    headers = message.headers
    return _number(headers, RETRY_OFFSET_HEADER) if headers else None
