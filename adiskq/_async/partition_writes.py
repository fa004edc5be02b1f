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
  calls and closes it itself with ``aclose()`` (the gateway keeps one a topic);
- with ``opened(..., parked=True)``, every partition is parked as it opens (its active segment's
  files fsynced and closed, its position kept: ``PartitionWriter.park``), so a topic of more
  partitions than the process may hold files for opens at all; ``write`` opens a parked partition's
  files again (``unpark``, cheap: no scan), ``write_now`` leaves it to ``write`` (it answers None),
  and ``await park(producer, partition)`` closes an idle one's files (the holder chooses which,
  within its open-files limit: the gateway's ``_open_files.py``).

``records`` is a run of encoded records (``StoredRecords``), written as it is, or ``Record``s to
encode (records the mapping took apart, or a stream that compresses its values, whose records must
be compressed: a run is then decoded back into ``Record``s first). Either way the records go to
``partition`` whole or not at all; ``PartialWriteError`` (with the receipts of what was written)
when an index write failed after its first records were committed. This module is one of the
producer's own: it alone (with ``producer.py``) reaches the producer's private write paths.
"""

from __future__ import annotations

import functools
from typing import TypeAlias, TypeVar

import anyio
import anyio.to_thread

from .._sansio.codec import NEED_MORE, decode_record
from .._sansio.kafka_mapping import StoredRecords
from .._sansio.run_entries import run_records
from .._sansio.values import Headers, Record
from .lane import Lane
from .producer import Producer

__all__ = ["Writable", "is_parked", "opened", "park", "unpark", "write", "write_now"]

# What a write to one partition takes: records encoded already, or Records to encode.
Writable: TypeAlias = StoredRecords | list[Record]
ProducerT = TypeVar("ProducerT", bound=Producer)  # any producer, its own type kept


async def opened(producer: ProducerT, *, parked: bool = False) -> ProducerT:
    """``producer``, opened, for a holder that keeps it across many calls rather than within one
    ``async with``, and closes it itself with ``aclose()`` (a server's producer of a topic).
    ``parked``: each partition parked as it opens (see the module's docstring); such a producer is
    written through this module only (its ``push`` would find a parked partition's files closed)."""
    if parked:
        producer._open_writer = functools.partial(producer._open_writer, park_partitions=True)
    await producer.__aenter__()
    return producer


def is_parked(producer: Producer[str | bytes, bytes], partition: int) -> bool:
    """True while ``partition``'s files are closed, or being closed, by ``park`` (or the parked open)."""
    return producer._lanes[partition].files_closed


async def unpark(producer: Producer[str | bytes, bytes], partition: int) -> None:
    """Open a parked partition's files again, once a park under way has ended (OSError, the
    partition still parked, if that fails)."""
    lane = producer._lanes[partition]
    while lane.parking is not None:
        await lane.parking.wait()
    if lane.files_closed:
        producer._check_open()
        lane.partition.unpark()
        lane.files_closed = False


async def park(producer: Producer[str | bytes, bytes], partition: int) -> bool:
    """Write ``partition``'s buffered entries, fsync and close its files, in a worker thread
    (writes to it wait meanwhile, then open them again); False, with nothing done, when a batch
    of its lane is open or committing. The flusher's fsync and this exclude each other. Raises the
    OSError of a failed fsync (the files stay open then)."""
    producer._check_open()
    lane = producer._lanes[partition]
    if lane.files_closed:
        return True
    if not lane.idle:
        return False
    lane.files_closed = True
    done = lane.parking = anyio.Event()
    try:
        await anyio.to_thread.run_sync(_park_lane, producer, lane, limiter=producer._limiter)
    finally:
        lane.files_closed = lane.partition.parked
        lane.parking = None
        done.set()
    return True


def _park_lane(producer: Producer[str | bytes, bytes], lane: Lane) -> None:
    with producer._structure_lock:  # not while the flusher fsyncs this lane's files
        lane.partition.park(sync=lane.dirty)  # not dirty: the flusher fsynced them since the last write
        lane.dirty = False


async def write(producer: Producer[str | bytes, bytes], partition: int, records: Writable) -> int:
    """Write one partition's records, whole or not at all; the offset of the first (the rest follow
    it), the partition's files opened again first if it was parked. Raises what the producer's push
    raises."""
    if 0 <= partition < len(producer._lanes) and producer._lanes[partition].files_closed:
        await unpark(producer, partition)
    if not isinstance(records, StoredRecords):
        return (await producer._push_to_partition(partition, records))[0].offset
    if producer._takes_encoded:
        return await producer._push_run_to_partition(
            partition, records.data, records.index_entries, records.time_entries, records.key_hashes, records.largest
        )
    return (await producer._push_to_partition(partition, _as_records(records)))[0].offset


def write_now(producer: Producer[str | bytes, bytes], partition: int, records: Writable) -> int | None:
    """``write`` without awaiting: the first record's offset if the partition took the records now,
    None (nothing written) if they have to wait (a parked partition among them: ``write`` opens it)."""
    lanes = producer._lanes
    if 0 <= partition < len(lanes) and lanes[partition].files_closed:
        return None
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
