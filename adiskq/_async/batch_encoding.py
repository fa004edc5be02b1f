"""A producer's batch encoding: push_many's records (and the Kafka gateway's ``Record``s) to the
stored records, their timestamps, partitions, key hashes and ``.tagindex`` entries.

In one C loop by the compiled core where it takes the batch (``core.encode_records``), else column
by column so the per-record work runs in C (zip, map) wherever it can. A single ``push`` encodes its
record inline instead (``Producer.push``'s measured branch); push_many's one-partition packed batch
is ``core.pack_records``' (an ``EncodedRun``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
import time
import zlib
from collections.abc import Callable, Mapping, MutableSequence, Sequence
from typing import Final, TypeAlias

from .._sansio import keyindex
from .._sansio.codec import byte_count, utf8
from .._sansio.core import (
    COMPILED,
    encode_batch,
    encode_record,
    encode_records,
    fnv1_32,
    place,
    raw_encode_record,
    raw_place,
)
from .._sansio.tags import NO_TAG_ENTRY, tag_entries
from .._sansio.values import Record, ns_from_datetime
from .compressing import ValueCompression

__all__ = ["BatchEncoder", "Timestamp", "as_record", "timestamp_ns", "value_bytes"]

# What a record's timestamp may be given as (None: the time of the push).
Timestamp: TypeAlias = dt.datetime | int | None

# The pure-Python core caches the placement of recently pushed keys (FNV-1 in Python is slow), each
# entry a key, a tuple and two ints: 4,096 of them are well under a MiB, where a process pushing
# distinct keys (order ids) would otherwise keep every key it pushed (measured: see
# benchmarks/RESULTS.md, section "Figures the code relies on", F20).
_PLACEMENT_CACHE_SIZE: Final = 4_096
# The key index's hash, which the compiled core computes itself (zlib's CRC-32); where a test has
# replaced keyindex.key_hash, the encoder calls the replacement instead.
_CRC32: Final = zlib.crc32


def timestamp_ns(timestamp: Timestamp) -> int:
    if timestamp is None:
        return time.time_ns()
    if isinstance(timestamp, dt.datetime):
        return ns_from_datetime(timestamp)
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        return timestamp
    raise TypeError(f"timestamp must be a datetime, UTC nanoseconds (int) or None, not {type(timestamp).__name__}")


def value_bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        raise TypeError("a message value is bytes, not str: encode text first, e.g. value.encode()")
    raise TypeError(f"a message value is bytes, not {type(value).__name__}")


def as_record(item: object) -> Record:
    if isinstance(item, Record):
        return item
    if isinstance(item, bytes | bytearray | memoryview):
        return Record(bytes(item))
    raise TypeError(f"push_many() takes adiskq.Record or bytes items, not {type(item).__name__}")


class BatchEncoder:
    """One open producer's encoding of its records (a batch's, or a single push's that the compiled
    core's one call does not take): its partition count, its placement of keys (``place``, with the
    producer's cache), its values' compression, and its size check (``check_size``:
    MessageTooLargeError above ``max_message_bytes``)."""

    __slots__ = (
        "_check_size",
        "_compression",
        "_keyless",
        "_max_message_bytes",
        "_partition_count",
        "_placement",
    )

    def __init__(
        self,
        *,
        partition_count: int,
        placement: dict[str | bytes, tuple[bytes, int, int]],
        compression: ValueCompression | None,
        max_message_bytes: int,
        check_size: Callable[[int], None],
        keyless: int,
    ) -> None:
        self._partition_count = partition_count
        self._placement = placement
        self._compression = compression
        self._max_message_bytes = max_message_bytes
        self._check_size = check_size
        # The attributes of a record pushed without a key (codec.KEYLESS; 0 before format 5).
        self._keyless = keyless

    def place(self, key: object) -> tuple[bytes, int, int]:
        """The key's bytes, its partition (FNV-1 32 modulo the count) and its key index hash:
        computed in C by the compiled core, cached for repeated keys by the pure-Python one (the
        producer's cache, which outlives the encoder)."""
        if key is None:
            # No key: a random one, as go-diskq does; it spreads messages over partitions.
            raw = random.getrandbits(64).to_bytes(8, "little")
            if self._partition_count == 1:
                return raw, 0, keyindex.key_hash(raw)  # FNV-1 in Python could only say 0
            return raw, fnv1_32(raw) % self._partition_count, keyindex.key_hash(raw)
        if isinstance(key, bytearray | memoryview):
            key = bytes(key)
        elif not isinstance(key, str | bytes):
            raise TypeError(f"a key is str, bytes or None, not {type(key).__name__}")
        if COMPILED and keyindex.key_hash is _CRC32:
            return place(key, self._partition_count)
        placed = self._placement.get(key)
        if placed is None:
            raw = utf8(key, "key") if isinstance(key, str) else key
            if len(self._placement) >= _PLACEMENT_CACHE_SIZE:
                self._placement.clear()
            placed = self._placement[key] = (raw, fnv1_32(raw) % self._partition_count, keyindex.key_hash(raw))
        return placed

    def encode_one(
        self, value: object, key: object, timestamp_ns: int, headers: Mapping[str, bytes] | None, tag: str | None
    ) -> tuple[bytes, int, int]:
        """A single push's record, partition and key index hash where the compiled core's one call
        (``encode_push``) does not take them: the pure-Python core, a replaced key hash, input that
        is not plain (a bytearray, a Mapping that is not a dict, a datetime...), a record over
        ``max_message_bytes``. The same work step by step, with the reference's errors."""
        if raw_place is not None and (type(key) is str or type(key) is bytes) and keyindex.key_hash is _CRC32:
            placed = raw_place(key, self._partition_count)
            raw_key, partition, key_hash = placed if placed is not NotImplemented else self.place(key)
        else:
            placed = self._placement.get(key) if type(key) is str else None
            raw_key, partition, key_hash = placed if placed is not None else self.place(key)
        data = value if type(value) is bytes else value_bytes(value)
        if len(data) + len(raw_key) > self._max_message_bytes:
            self._check_size(len(data) + len(raw_key))
        if headers:  # checked before encoding, so a huge header never gets copied
            self._check_size(len(data) + len(raw_key) + sum(len(name) + byte_count(v) for name, v in headers.items()))
        attributes = self._keyless if key is None else 0
        if self._compression is not None:
            data, compressed = self._compression.apply(data)
            attributes |= compressed
        if (
            raw_encode_record is None
            or (record := raw_encode_record(data, raw_key, timestamp_ns, headers or None, attributes, tag))
            is NotImplemented
        ):
            record = encode_record(data, raw_key, timestamp_ns, headers, attributes, tag)
        if len(record) > self._max_message_bytes:
            self._check_size(len(record))
        return record, partition, key_hash

    def encode(
        self, items: list[Record | bytes], now: int
    ) -> tuple[list[bytes], list[int], list[int], list[int], list[bytes] | None]:
        """Records (adiskq.Record or bytes), their timestamps, partitions, key hashes and
        ``.tagindex`` entries: in one C loop by the compiled core (the entries left to the segment,
        which takes them from the records in C), or column-wise by ``_encode_columns``."""
        records, stamps, partitions, key_hashes, entries, _ = self.encode_sized(items, now)
        return records, stamps, partitions, list(key_hashes), entries

    def encode_sized(
        self, items: list[Record | bytes], now: int
    ) -> tuple[list[bytes], list[int], list[int], MutableSequence[int], list[bytes] | None, int]:
        """``encode``, and the records' size in all (summed where they were made: a second pass
        over a batch's records in Python was about a tenth of push_many's own work). The key hashes
        are the compiled core's ``array("I")`` (written as the key index's column without an int a
        record) or a list."""
        compression = self._compression
        prepared = None if compression is None else compression.prepared
        if COMPILED and keyindex.key_hash is _CRC32 and (compression is None or prepared is not None):
            encoded = encode_records(items, now, self._partition_count, prepared, self._keyless)
            if encoded is not None:
                records, stamps, partitions, key_hashes, largest, total_bytes = encoded
                if largest > self._max_message_bytes:
                    self._check_size(largest)
                return records, stamps, partitions, key_hashes, None, total_bytes
        plain = [item if type(item) is Record else as_record(item) for item in items]
        columns = self._encode_columns(plain, now)
        return columns[0], columns[1], list(columns[2]), list(columns[3]), columns[4], sum(map(len, columns[0]))

    def _encode_columns(
        self, items: list[Record], now: int
    ) -> tuple[list[bytes], list[int], Sequence[int], Sequence[int], list[bytes]]:
        """Records, their timestamps, partitions, key hashes and ``.tagindex`` entries, encoded
        column-wise so the per-record work runs in C (zip, map) wherever it can."""
        values, keys, all_headers, timestamps, tags = zip(*items, strict=True)
        try:
            placements = list(map(self._placement.get, keys))
        except TypeError:  # an unhashable key (bytearray): place one by one
            placements = [None] * len(keys)
        if None in placements:
            if self._partition_count == 1 and keys.count(None) == len(keys):
                # Keyless records on one partition: their random keys in one call, and no FNV-1
                # (the key index's CRC-32 is a C call).
                blob = random.randbytes(8 * len(keys))
                raw = [blob[i : i + 8] for i in range(0, len(blob), 8)]
                placements = list(zip(raw, itertools.repeat(0), map(keyindex.key_hash, raw), strict=False))
            else:
                placements = [placed or self.place(key) for placed, key in zip(placements, keys, strict=True)]
        raw_keys, partitions, key_hashes = zip(*placements, strict=True)
        if set(map(type, values)) != {bytes}:
            values = tuple(map(value_bytes, values))
        if set(timestamps) == {None}:
            stamps = [now] * len(items)
        else:
            stamps = [now if t is None else timestamp_ns(t) for t in timestamps]
        untagged = tags.count(None) == len(tags)
        keyless = self._keyless if None in keys else 0  # the records given no key carry it
        if self._compression is not None:  # each value compressed (or kept as a training sample)
            self._check_size(max(map(len, values)))
            stored, attributes = zip(*map(self._compression.apply, values), strict=True)
            if keyless:
                attributes = tuple(a | (keyless if k is None else 0) for a, k in zip(attributes, keys, strict=True))
            encoded = list(map(encode_record, stored, raw_keys, stamps, all_headers, attributes, tags))
        elif keyless:
            encoded = list(
                map(
                    encode_record,
                    values,
                    raw_keys,
                    stamps,
                    all_headers,
                    [0 if key is not None else keyless for key in keys],
                    tags,
                )
            )
        else:
            encoded = encode_batch(
                values, raw_keys, stamps, all_headers if any(all_headers) else None, None if untagged else tags
            )
        self._check_size(max(map(len, encoded)))
        entries = [NO_TAG_ENTRY] * len(tags) if untagged else tag_entries(tags)
        return encoded, stamps, list(partitions), key_hashes, entries
