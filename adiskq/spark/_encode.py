"""Rows of a DataFrame (as Arrow batches) encoded into records, grouped by the partition of their key.

A DataFrame written to adiskq has a ``value`` column (binary or string) and may have ``key``
(binary or string), ``headers`` (map of string to binary or string), ``timestamp`` and ``tag``
(string, null for none); other columns
(such as the ``partition`` and ``offset`` of a DataFrame read from adiskq) are ignored. A row without
a key gets a random 8-byte key, as ``Producer.push`` does; a key goes to partition FNV-1-32(key) modulo the
partition count. A row without a timestamp gets the time it was encoded.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.types import BinaryType, MapType, StringType, StructType, TimestampNTZType, TimestampType

from .._errors import InvalidArgumentError, MessageTooLargeError
from .._sansio.codec import record_key
from .._sansio.core import encode_record
from .._sansio.naming import partition_for_key

__all__ = ["Columns", "Grouped", "InvalidColumnsError", "random_keys"]

RANDOM_KEY_BYTES: Final = 8  # as adiskq.Producer makes them


class InvalidColumnsError(InvalidArgumentError):
    """The DataFrame given to the adiskq sink lacks ``value`` or has a column of the wrong type."""


def random_keys(count: int) -> list[bytes]:
    """``count`` random keys of 8 bytes, as ``Producer.push`` gives a message pushed without one."""
    raw = os.urandom(RANDOM_KEY_BYTES * count)
    return [raw[i : i + RANDOM_KEY_BYTES] for i in range(0, len(raw), RANDOM_KEY_BYTES)]


@dataclasses.dataclass(frozen=True, slots=True)
class Columns:
    """The columns of a DataFrame to write, checked on the driver before any task runs."""

    has_key: bool
    has_headers: bool
    has_timestamp: bool
    has_tag: bool = False

    @classmethod
    def of(cls, schema: StructType) -> Columns:
        """Check the schema; ``InvalidColumnsError`` says what is wrong."""
        fields = {field.name.lower(): field.dataType for field in schema.fields}
        text_or_bytes = (BinaryType, StringType)
        value = fields.get("value")
        if value is None:
            raise InvalidColumnsError(
                f"a DataFrame written to adiskq needs a 'value' column (binary or string); it has {sorted(fields)}"
            )
        if not isinstance(value, text_or_bytes):
            raise InvalidColumnsError(f"the 'value' column is {value.simpleString()}; make it binary or string")
        key = fields.get("key")
        if key is not None and not isinstance(key, text_or_bytes):
            raise InvalidColumnsError(f"the 'key' column is {key.simpleString()}; make it binary or string")
        headers = fields.get("headers")
        if headers is not None and not (
            isinstance(headers, MapType)
            and isinstance(headers.keyType, StringType)
            and isinstance(headers.valueType, text_or_bytes)
        ):
            raise InvalidColumnsError(
                f"the 'headers' column is {headers.simpleString()}; make it map<string,binary> or map<string,string>"
            )
        timestamp = fields.get("timestamp")
        if timestamp is not None and not isinstance(timestamp, TimestampType | TimestampNTZType):
            raise InvalidColumnsError(f"the 'timestamp' column is {timestamp.simpleString()}; make it a timestamp")
        tag = fields.get("tag")
        if tag is not None and not isinstance(tag, StringType):
            raise InvalidColumnsError(f"the 'tag' column is {tag.simpleString()}; make it a string (or null for none)")
        return cls(key is not None, headers is not None, timestamp is not None, tag is not None)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    for index, field_name in enumerate(batch.schema.names):
        if field_name.lower() == name:
            return batch.column(index)
    raise InvalidColumnsError(f"the DataFrame has no {name!r} column")


def _utf8(text: str | bytes) -> bytes:
    return text.encode() if isinstance(text, str) else text


def _headers(pairs: Iterable[tuple[str, str | bytes | None]]) -> dict[str, bytes]:
    headers = {}
    for name, value in pairs:
        if value is None:
            raise InvalidColumnsError(f"header {name!r} of a row is null; adiskq header values are bytes")
        headers[name] = _utf8(value)
    return headers


class Grouped:
    """Encoded records by partition, in the order the rows came."""

    def __init__(self, partition_count: int) -> None:
        self.partition_count = partition_count
        self.records: dict[int, list[bytes]] = {}
        self.size_bytes = 0
        self.message_count = 0

    def add(self, partition: int, record: bytes) -> None:
        """Append one record to its partition's list."""
        self.records.setdefault(partition, []).append(record)
        self.size_bytes += len(record)
        self.message_count += 1

    def regrouped(self, partition_count: int) -> Grouped:
        """The same records placed for another partition count (the stream grew meanwhile)."""
        if partition_count == self.partition_count:
            return self
        again = Grouped(partition_count)
        for partition in sorted(self.records):
            for record in self.records[partition]:
                again.add(partition_for_key(record_key(record), partition_count), record)
        return again

    def counts(self) -> dict[int, int]:
        """Records per partition."""
        return {partition: len(records) for partition, records in sorted(self.records.items())}

    def clear(self) -> None:
        """Forget every record."""
        self.records = {}
        self.size_bytes = 0
        self.message_count = 0

    def encode(self, batch: pa.RecordBatch, columns: Columns, max_message_bytes: int) -> None:
        """Encode every row of ``batch`` into its partition's list."""
        count = batch.num_rows
        if not count:
            return
        values: Sequence[str | bytes | None] = _column(batch, "value").to_pylist()
        keys: Sequence[str | bytes | None] = _column(batch, "key").to_pylist() if columns.has_key else [None] * count
        stamps: Sequence[int | None] = (
            _column(batch, "timestamp").cast(pa.int64()).to_pylist() if columns.has_timestamp else [None] * count
        )
        headers: Sequence[Iterable[tuple[str, str | bytes | None]] | None] = (
            _column(batch, "headers").to_pylist() if columns.has_headers else [None] * count
        )
        tags: Sequence[str | None] = _column(batch, "tag").to_pylist() if columns.has_tag else [None] * count
        missing_keys = sum(key is None for key in keys)
        fresh_keys = iter(random_keys(missing_keys)) if missing_keys else iter(())
        now_ns = time.time_ns()
        partitions = self.partition_count
        placed: dict[bytes, int] = {}  # FNV-1 in Python is slow (RESULTS.md, F14): once per key
        for row in range(count):
            value = values[row]
            if value is None:
                raise InvalidColumnsError(
                    "a row has a null 'value'; adiskq stores bytes (use an empty string or binary for no value)"
                )
            key = keys[row]
            key_bytes = next(fresh_keys) if key is None else _utf8(key)
            stamp = stamps[row]
            pairs = headers[row]
            record = encode_record(
                _utf8(value),
                key_bytes,
                now_ns if stamp is None else stamp * 1000,
                _headers(pairs) if pairs else None,
                0,
                tags[row],
            )
            if len(record) > max_message_bytes:
                raise MessageTooLargeError(
                    f"a row makes a record of {len(record)} bytes, above the stream's max_message_bytes "
                    f"({max_message_bytes}); split the value or raise max_message_bytes on the stream"
                )
            if partitions == 1:
                partition = 0
            elif key is None:  # a fresh random key: never seen again
                partition = partition_for_key(key_bytes, partitions)
            else:
                partition = placed.get(key_bytes, -1)
                if partition < 0:
                    partition = placed[key_bytes] = partition_for_key(key_bytes, partitions)
            self.add(partition, record)
