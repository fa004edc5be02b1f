"""Kafka records <-> adiskq messages: what a Produce stores and what a Fetch hands back.

The mapping, exact in both directions:

- offsets are the partition's offsets; a Kafka timestamp in milliseconds is stored as
  ``ms * 1_000_000`` nanoseconds and read back as ``ns // 1_000_000`` (so a Kafka record round-trips
  exactly, and a library message's sub-millisecond part is dropped on its way to Kafka);
- keys and values are bytes on both sides. Kafka also has null: a null key or value is stored as
  empty bytes plus the header ``adiskq.kafka.null`` whose value names which were null (``key``,
  ``value`` or ``key,value``), and read back to Kafka as null, without that header. A library
  consumer sees the empty bytes and the header;
- headers keep their order. adiskq headers are a mapping, so a record that repeats a header name, or
  has a null header value, or uses the reserved name is refused (INVALID_RECORD, with a message
  saying which) rather than merged or changed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final

from .._sansio.kafka_batch import KafkaBatch, encode_batch_from_messages
from .._sansio.values import Message, Record

__all__ = ["NULLS_HEADER", "RecordRefusedError", "batch_from_messages", "records_from_batches"]

NULLS_HEADER: Final = "adiskq.kafka.null"
_TIMESTAMP_LOG_APPEND: Final = 0x08  # batch attributes bit 3: the broker stamps the records
_NULL_TEXT: Final = {(True, False): b"key", (False, True): b"value", (True, True): b"key,value"}


class RecordRefusedError(ValueError):
    """A record adiskq cannot store exactly; ``index`` is its position among the request's records."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index


def records_from_batches(batches: Sequence[KafkaBatch]) -> list[Record]:
    """The adiskq records for a Produce request's batches (one partition's), in order."""
    records: list[Record] = []
    now_ns = time.time_ns()
    index = 0
    for batch in batches:
        log_append = bool(batch.attributes & _TIMESTAMP_LOG_APPEND)
        for record in batch.records:
            headers: dict[str, bytes] | None = None
            if record.headers:
                headers = {}
                for name, value in record.headers:
                    if value is None:
                        raise RecordRefusedError(
                            f"header {name!r} has a null value; adiskq stores header values as bytes: send b'' instead",
                            index,
                        )
                    if name in headers:
                        raise RecordRefusedError(
                            f"header {name!r} is repeated; adiskq keeps one value per header name: "
                            "send each name once (join the values, or number the names)",
                            index,
                        )
                    if name == NULLS_HEADER:
                        raise RecordRefusedError(f"header {NULLS_HEADER!r} is reserved by the gateway", index)
                    headers[name] = value
            key, value = record.key, record.value
            if key is None or value is None:
                headers = headers or {}
                headers[NULLS_HEADER] = _NULL_TEXT[key is None, value is None]
            timestamp_ns = now_ns if log_append or record.timestamp_ms < 0 else record.timestamp_ms * 1_000_000
            records.append(Record(b"" if value is None else value, b"" if key is None else key, headers, timestamp_ns))
            index += 1
    return records


def batch_from_messages(messages: Sequence[Message]) -> bytes:
    """One Kafka record batch (v2, uncompressed) holding ``messages``: consecutive offsets of one
    partition, as a reader returns them (built by the compiled core when it runs)."""
    return encode_batch_from_messages(messages, nulls_header=NULLS_HEADER)
