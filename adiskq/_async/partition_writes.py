"""Writes to a partition the writer chose: the package's interface to a ``Producer`` for a server.

A Kafka client picks each record's partition itself and sends it already encoded (the gateway turns
a Produce's batches into ``StoredRecords``, the bytes adiskq stores, without a ``Record`` a
message), and a server answering from its socket callbacks wants the write done before it returns to
the loop when the partition can take it at once. ``push`` and ``push_many`` do neither, so the
gateway writes through this module, and only through it:

- ``write_now(producer, partition, records)``: the first record's offset if the partition took the
  records inline, now (``flush="async"``, no batch in flight, no roll due, the lock at hand), or
  None, with nothing written, when they have to wait;
- ``await write(producer, partition, records)``: the same, waiting its turn when it must;
- ``await opened(Producer(path, ...))``: a producer opened for a holder that keeps it across many
  calls and closes it itself with ``aclose()`` (the gateway keeps one a topic).

``records`` is a run of encoded records (``StoredRecords``), written as it is, or ``Record``s to
encode (records the mapping took apart, or a stream that compresses its values, whose records must
be compressed: a run is then decoded back into ``Record``s first). Either way the records go to
``partition`` whole or not at all; ``PartialWriteError`` (with the receipts of what was written)
when an index write failed after its first records were committed. This module is one of the
producer's own: it alone (with ``producer.py``) reaches the producer's private write paths.
"""

from __future__ import annotations

from typing import TypeAlias, TypeVar

from .._sansio.codec import NEED_MORE, decode_record
from .._sansio.run_entries import StoredRecords, run_records
from .._sansio.values import Headers, Record
from .producer import Producer

__all__ = ["Writable", "opened", "write", "write_now"]

# What a write to one partition takes: records encoded already, or Records to encode.
Writable: TypeAlias = StoredRecords | list[Record]
ProducerT = TypeVar("ProducerT", bound=Producer)  # any producer, its own type kept


async def opened(producer: ProducerT) -> ProducerT:
    """``producer``, opened, for a holder that keeps it across many calls rather than within one
    ``async with``, and closes it itself with ``aclose()`` (a server's producer of a topic)."""
    await producer.__aenter__()
    return producer


async def write(producer: Producer[str | bytes, bytes], partition: int, records: Writable) -> int:
    """Write one partition's records, whole or not at all; the offset of the first (the rest follow
    it). Raises what the producer's push raises."""
    if not isinstance(records, StoredRecords):
        return (await producer._push_to_partition(partition, records))[0].offset
    if producer._takes_encoded:
        return await producer._push_run_to_partition(
            partition, records.data, records.index_entries, records.time_entries, records.key_hashes, records.largest
        )
    return (await producer._push_to_partition(partition, _as_records(records)))[0].offset


def write_now(producer: Producer[str | bytes, bytes], partition: int, records: Writable) -> int | None:
    """``write`` without awaiting: the first record's offset if the partition took the records now,
    None (nothing written) if they have to wait."""
    if not isinstance(records, StoredRecords):
        receipts = producer._push_to_partition_now(partition, records)
    elif producer._takes_encoded:
        return producer._push_run_to_partition_now(
            partition, records.data, records.index_entries, records.time_entries, records.key_hashes, records.largest
        )
    else:
        receipts = producer._push_to_partition_now(partition, _as_records(records))
    return None if receipts is None else receipts[0].offset


def _as_records(records: StoredRecords) -> list[Record]:
    """The records' fields, to be encoded as any push's (for a stream that compresses its values)."""
    return [_as_record(record) for record in run_records(records.data, records.index_entries)]


def _as_record(stored: bytes) -> Record:
    decoded = decode_record(stored)
    assert decoded is not NEED_MORE
    headers = decoded.headers  # a Headers (null values, repeated names) is kept as it is
    return Record(
        decoded.value, decoded.key, headers if type(headers) is Headers else dict(headers) or None, decoded.timestamp_ns
    )
