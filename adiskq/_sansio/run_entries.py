"""A run of stored records with its index entries made ahead of the write, and where the write places them. No I/O.

A run is what the Kafka gateway's Produce makes of a batch in one compiled call
(``wire.mapping.stored_records``), so that the segment writes it without a Python object a record:

- ``data``: the stored records back to back, as ``.data`` holds them (``codec.py`` has the layout);
- ``index``: one ``.index`` entry a record (offset, position, size; u64 little-endian each), numbered
  from offset 0 at position 0: record ``i`` is offset ``i``, at its position within ``data``;
- ``timeindex``: one ``.timeindex`` entry a record (offset, timestamp_ns), numbered from 0 alike.

``place_run_entries`` turns the two columns into the entries the segment appends: ``first_offset``
added to each offset, ``start`` (where ``data`` goes in ``.data``) to each position. It checks them
first, since the files take them as they are (see the function). The compiled core does it in one
call (``adiskq/_csrc/log/run_entries.c``); ``place_run_entries_reference`` is its pure-Python reference.
"""

from __future__ import annotations

import array
import struct
import sys
from collections.abc import Callable
from typing import Final, NamedTuple

from .codec import ATTRIBUTES_AT, MIN_RECORD_BYTES, TAGGED
from .entries import INDEX_ENTRY_BYTES, TIMEINDEX_ENTRY_BYTES
from .native import NATIVE

__all__ = ["StoredRecords", "place_run_entries", "place_run_entries_reference", "run_records", "run_timestamps"]

_MAX_PLACED: Final = 2**63 - 1
_U32: Final = struct.Struct("<I")


class StoredRecords(NamedTuple):
    """A run of records as adiskq stores them (this module's layout): what
    ``Producer._push_run_to_partition`` writes. A tuple, so the compiled decoder builds it as it
    builds a batch (``kafka_decode_batches``)."""

    data: bytes  # the records back to back, each as codec.encode_record makes it
    index_entries: bytes  # their .index entries, numbered from offset 0 at position 0
    time_entries: bytes  # their .timeindex entries (timestamps in nanoseconds), numbered from 0
    key_hashes: bytes  # keyindex.key_hash of each stored key, as the key index stores them (keyindex.pack_hashes)
    largest: int  # bytes of the largest record (0 for none)

    @property
    def record_count(self) -> int:
        """How many records."""
        return len(self.index_entries) // INDEX_ENTRY_BYTES

    @property
    def total(self) -> int:
        """Bytes of all the records: what the write takes."""
        return len(self.data)


def _u64_column(raw: bytes, typecode: str) -> array.array[int]:
    values = array.array(typecode)
    values.frombytes(raw)
    if sys.byteorder == "big":  # pragma: no cover - big-endian hosts
        values.byteswap()
    return values


def _to_bytes(values: array.array[int]) -> bytes:
    if sys.byteorder == "big":  # pragma: no cover - big-endian hosts
        values.byteswap()
    return values.tobytes()


def _u63(name: str, value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"place_run_entries: {name} is an int")
    if not -(2**63) <= value <= _MAX_PLACED:
        raise OverflowError("int too big to convert")  # CPython's words, as the compiled core raises it
    if value < 0:
        raise ValueError(f"place_run_entries: {name} must be within [0, 2**63 - 1]")
    return value


def place_run_entries_reference(
    data: bytes, index: bytes, timeindex: bytes, first_offset: int, start: int
) -> tuple[bytes, bytes]:
    """The run's ``.index`` and ``.timeindex`` entries placed at ``first_offset`` and ``start``.

    Raises ValueError unless they agree with ``data``: the columns hold whole entries, as many in
    each, numbered 0, 1, 2 ... in both, each record starting where the one before it ends (the first
    at 0, the last ending where ``data`` ends), each entry's size its record's own size field, no
    record tagged (a run's ``.tagindex`` is all "no tag"), and no placed offset or position past
    2**63 - 1."""
    if type(data) is not bytes or type(index) is not bytes or type(timeindex) is not bytes:
        raise TypeError("place_run_entries: data, index and timeindex are bytes")
    data_length = len(data)
    first_offset = _u63("first_offset", first_offset)
    start = _u63("start", start)
    if (
        len(index) % INDEX_ENTRY_BYTES
        or len(timeindex) % TIMEINDEX_ENTRY_BYTES
        or len(index) // INDEX_ENTRY_BYTES != len(timeindex) // TIMEINDEX_ENTRY_BYTES
    ):
        raise ValueError("place_run_entries: index and timeindex must hold whole entries, as many in each")
    count = len(index) // INDEX_ENTRY_BYTES
    if (count and first_offset > _MAX_PLACED - (count - 1)) or start > _MAX_PLACED - data_length:
        raise ValueError("place_run_entries: the placed entries would pass 2**63 - 1")
    entries = _u64_column(index, "Q")
    times = _u64_column(timeindex, "Q")
    position = 0
    for i in range(count):
        if entries[3 * i] != i or times[2 * i] != i:
            raise ValueError("place_run_entries: the entries must be numbered 0, 1, 2 ... in both columns")
        size = entries[3 * i + 2]
        if (
            entries[3 * i + 1] != position
            or size < MIN_RECORD_BYTES
            or size > data_length - position
            or _U32.unpack_from(data, position)[0] != size
        ):
            raise ValueError(
                "place_run_entries: each record must start where the one before it ends, of the size its entry says"
            )
        if data[position + ATTRIBUTES_AT] & TAGGED:
            raise ValueError("place_run_entries: the records of a run carry no tag")
        position += size
    if position != data_length:
        raise ValueError("place_run_entries: the records must fill the data")
    for i in range(count):
        entries[3 * i] = first_offset + i
        entries[3 * i + 1] += start
        times[2 * i] = first_offset + i
    return _to_bytes(entries), _to_bytes(times)


def _compiled_place_run_entries(
    data: bytes, index: bytes, timeindex: bytes, first_offset: int, start: int
) -> tuple[bytes, bytes]:
    assert NATIVE is not None
    placed: tuple[bytes, bytes] = NATIVE.place_run_entries(data, index, timeindex, first_offset, start)
    return placed


# The compiled core's when it is built, the reference's otherwise.
place_run_entries: Final[Callable[[bytes, bytes, bytes, int, int], tuple[bytes, bytes]]] = (
    place_run_entries_reference if NATIVE is None else _compiled_place_run_entries
)


def run_records(data: bytes, index: bytes) -> list[bytes]:
    """The run's records, one bytes object each (for a write that takes a list of records: a lane's
    batch, a stream that compresses values); ``index`` as the run's, checked by ``place_run_entries``."""
    entries = _u64_column(index, "Q")
    return [data[position : position + size] for position, size in zip(entries[1::3], entries[2::3], strict=True)]


def run_timestamps(timeindex: bytes) -> list[int]:
    """The run's timestamps (ns), one int a record."""
    return _u64_column(timeindex, "q")[1::2].tolist()
