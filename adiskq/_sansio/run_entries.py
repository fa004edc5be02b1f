"""An ``EncodedRun``'s entries placed where the run is written, after they are checked. No I/O.

A run (``entries.EncodedRun``) is records encoded ahead of the write with their entries, so that a
segment writes them without a Python object a record: a Kafka Produce's batch
(``kafka/wire/mapping.stored_records``) or push_many's packed batch (``core.pack_records``):

- ``data``: the records back to back, as ``.data`` holds them (``codec.py`` has the layout);
- ``index``: one ``.index`` entry a record (offset, position, size; u64 little-endian each), numbered
  from offset 0 at position 0: record ``i`` is offset ``i``, at its position within ``data``;
- ``timeindex``: one ``.timeindex`` entry a record (offset, timestamp_ns), numbered from 0 alike;
- ``tagindex``: the ``.tagindex`` column, or ``b""`` when no record carries a tag.

``place_entries`` turns the two columns into the entries the segment appends: record ``i`` at offset
``first_offset + i``, at ``start`` (where ``data`` goes in ``.data``) plus where it begins in
``data``. It checks what the files take from the run (sizes, the tag column) first; offsets and
positions it makes itself (see the function). The compiled core does it in one
call (``adiskq/_csrc/log/run_entries.c``); ``place_entries_reference`` is its pure-Python reference.
"""

from __future__ import annotations

import array
import struct
import sys
from collections.abc import Callable
from typing import Final

from .codec import ATTRIBUTES_AT, MIN_RECORD_BYTES, TAGGED
from .entries import INDEX_ENTRY_BYTES, TAG_ENTRY_BYTES, TIMEINDEX_ENTRY_BYTES
from .native import NATIVE

__all__ = ["place_entries", "place_entries_reference", "run_records", "run_timestamps"]

_MAX_PLACED: Final = 2**63 - 1
_U32: Final = struct.Struct("<I")


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
        raise TypeError(f"place_entries: {name} is an int")
    if not -(2**63) <= value <= _MAX_PLACED:
        raise OverflowError("int too big to convert")  # CPython's words, as the compiled core raises it
    if value < 0:
        raise ValueError(f"place_entries: {name} must be within [0, 2**63 - 1]")
    return value


def place_entries_reference(
    data: bytes, index: bytes, timeindex: bytes, tagindex: bytes, first_offset: int, start: int
) -> tuple[bytes, bytes]:
    """The run's ``.index`` and ``.timeindex`` entries placed at ``first_offset`` and ``start``.

    Record ``i`` is placed at offset ``first_offset + i`` and at ``start`` plus where it begins in
    ``data``, both made here whatever the run's own numbering says (the segment writes only the
    placed entries); its size and timestamp are the run's. Only what the files take from the run is
    checked, and ValueError raised unless it agrees with ``data``: the columns hold whole entries,
    as many in each, each entry's size its record's own size field (the records back to back,
    filling ``data``), ``tagindex`` either empty (no record carries a tag) or one entry a record, 0
    exactly for the records without a tag, and no placed offset or position past 2**63 - 1."""
    if any(type(column) is not bytes for column in (data, index, timeindex, tagindex)):
        raise TypeError("place_entries: data, index, timeindex and tagindex are bytes")
    data_length = len(data)
    first_offset = _u63("first_offset", first_offset)
    start = _u63("start", start)
    if (
        len(index) % INDEX_ENTRY_BYTES
        or len(timeindex) % TIMEINDEX_ENTRY_BYTES
        or len(index) // INDEX_ENTRY_BYTES != len(timeindex) // TIMEINDEX_ENTRY_BYTES
    ):
        raise ValueError("place_entries: index and timeindex must hold whole entries, as many in each")
    count = len(index) // INDEX_ENTRY_BYTES
    if tagindex and len(tagindex) != count * TAG_ENTRY_BYTES:
        raise ValueError("place_entries: tagindex must be empty or hold one entry a record")
    if (count and first_offset > _MAX_PLACED - (count - 1)) or start > _MAX_PLACED - data_length:
        raise ValueError("place_entries: the placed entries would pass 2**63 - 1")
    entries = _u64_column(index, "Q")
    times = _u64_column(timeindex, "Q")
    position = 0
    for i in range(count):
        size = entries[3 * i + 2]
        if size < MIN_RECORD_BYTES or size > data_length - position or _U32.unpack_from(data, position)[0] != size:
            raise ValueError("place_entries: each record must be of the size its entry says, within the data")
        tagged = bool(data[position + ATTRIBUTES_AT] & TAGGED)
        if tagged if not tagindex else tagged != (_U32.unpack_from(tagindex, i * TAG_ENTRY_BYTES)[0] != 0):
            raise ValueError(
                "place_entries: each record's tag entry must be 0 exactly when it carries no tag (no tagindex: no tags)"
            )
        entries[3 * i] = first_offset + i
        entries[3 * i + 1] = start + position
        times[2 * i] = first_offset + i
        position += size
    if position != data_length:
        raise ValueError("place_entries: the records must fill the data")
    return _to_bytes(entries), _to_bytes(times)


# The compiled core's when it is built, the reference's otherwise.
place_entries: Final[Callable[[bytes, bytes, bytes, bytes, int, int], tuple[bytes, bytes]]] = (
    place_entries_reference if NATIVE is None else NATIVE.place_entries
)


def run_records(data: bytes, index: bytes) -> list[bytes]:
    """The run's records, one bytes object each (for a write that takes a list of records: a lane's
    batch, a stream that compresses values); ``index`` as the run's, checked by ``place_entries``."""
    entries = _u64_column(index, "Q")
    return [data[position : position + size] for position, size in zip(entries[1::3], entries[2::3], strict=True)]


def run_timestamps(timeindex: bytes) -> list[int]:
    """The run's timestamps (ns), one int a record."""
    return _u64_column(timeindex, "q")[1::2].tolist()
