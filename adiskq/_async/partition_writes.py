"""Writes to a partition the writer chose: the package's interface to a ``Producer`` for a server.

A Kafka client picks each record's partition itself and sends it already encoded (the gateway turns
a Produce's batches into an ``EncodedRun``, the bytes adiskq stores, without a ``Record`` a
message), and a server answering from its socket callbacks wants the write done before it returns to
the loop when the partition can take it at once. ``push`` and ``push_many`` do neither, so the
gateway writes through this module, and only through it:

- ``write_now(producer, partition, records)``: the first record's offset if the partition took the
  records inline, now (``flush="async"``, no batch in flight, no roll due, the lock at hand), or
  None, with nothing written, when they have to wait;
- ``await write(producer, partition, records)``: the same, waiting its turn when it must;
- ``await opened(Producer(path, ...))``: a producer opened for a holder that keeps it across many
  calls and closes it itself with ``aclose()`` (the gateway keeps one a topic, a group one for its
  dead letters);
- with ``opened(..., parked=True)``, every partition is parked as it opens (its active segment's
  files fsynced and closed, its position kept: ``PartitionWriter.park``), so a topic of more
  partitions than the process may hold files for opens at all; ``write`` and ``write_marker`` open
  a parked partition's files again (``unpark``, cheap: no scan), ``write_now`` leaves it to
  ``write`` (it answers None), and ``await park(producer, partition)`` closes an idle one's files
  (the holder chooses which, within its open-files limit: the gateway's ``_open_files.py``);
- ``write(..., transaction=(producer_id, epoch))`` and ``write_now`` alike: the records stored as
  records of that Kafka producer's open transaction (``_sansio/transactions.py``), which readers
  hold back until its marker;
- ``await write_marker(producer, partition, producer_id, epoch, commit, coordinator_epoch)``: the
  transaction's commit or abort marker, a record with an offset of its own, returned only once it is
  on stable storage (fsynced, whatever the stream's flush mode): the transaction coordinator
  records a transaction complete only after every marker is durable. An abort marker's
  transaction is appended to the segment's ``.txnindex`` (``_storage/txn_index.py``) before that;
- for a Kafka Fetch: ``last_stable_offset(producer, partition)`` (the first offset of the oldest
  transaction still open, or the partition's end), ``aborted_transactions(producer, partition,
  first_offset, last_offset)`` from the ``.txnindex`` files, and ``open_transactions`` (with
  ``open_transactions_with_epochs``, their records' epochs), the open transactions found in the data
  (what the gateway's start aborts when its coordinator's state is gone).

``records`` is a run of encoded records (``EncodedRun``), written as it is, or ``Record``s to
encode (records the mapping took apart, or a stream that compresses its values, whose records must
be compressed: a run is then decoded back into ``Record``s first). Either way the records go to
``partition`` whole or not at all; ``PartialWriteError`` (with the receipts of what was written)
when an index write failed after its first records were committed. Every write goes the
producer's one road below ``push`` (``shares.py``: one run, inline or queued). This module is one of
the producer's own: with ``producer.py`` and ``shares.py`` it alone reaches the producer's private
state.
"""

from __future__ import annotations

import bisect
import functools
import time
import weakref
from typing import TypeAlias, TypeVar

import anyio
import anyio.to_thread

from .._sansio.codec import NEED_MORE, decode_record
from .._sansio.entries import EncodedRun, RecordRun, Run
from .._sansio.run_entries import run_records
from .._sansio.transactions import marker_run, producer_field, transactional_run
from .._sansio.values import Headers, Record
from .._storage import txn_index
from .._storage.partition_reader import PartitionReader
from .._storage.settings import require_transactions
from .._storage.transaction_outcomes import OpenTransactions
from .._storage.txn_index import AbortedTransaction
from . import shares
from .lane import Lane
from .producer import Producer

__all__ = [
    "AbortedTransaction",
    "Transaction",
    "Writable",
    "aborted_transactions",
    "is_parked",
    "last_stable_offset",
    "open_transactions",
    "open_transactions_with_epochs",
    "opened",
    "park",
    "unpark",
    "write",
    "write_marker",
    "write_now",
]

# What a write to one partition takes: records encoded already, or Records to encode.
Writable: TypeAlias = EncodedRun | list[Record]
# A Kafka transaction's producer: (producer_id, epoch).
Transaction: TypeAlias = tuple[int, int]
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


async def _unparked(producer: Producer[str | bytes, bytes], partition: int) -> None:
    """``partition``'s files opened again if it was parked (a partition out of range is the write's to refuse)."""
    if 0 <= partition < len(producer._lanes) and producer._lanes[partition].files_closed:
        await unpark(producer, partition)


async def write(
    producer: Producer[str | bytes, bytes], partition: int, records: Writable, transaction: Transaction | None = None
) -> int:
    """Write one partition's records, whole or not at all; the offset of the first (the rest follow
    it), the partition's files opened again first if it was parked. With ``transaction``, as
    records of that producer's transaction. Raises what the producer's push raises;
    SettingsMismatchError for a transaction on a stream before format 5."""
    await _unparked(producer, partition)
    if transaction is not None:
        _check_transactions(producer)
    return await shares.write_run(producer, partition, _run(producer, records, transaction))


def write_now(
    producer: Producer[str | bytes, bytes], partition: int, records: Writable, transaction: Transaction | None = None
) -> int | None:
    """``write`` without awaiting: the first record's offset if the partition took the records now,
    None (nothing written) if they have to wait (a parked partition among them: ``write`` opens it)."""
    lanes = producer._lanes
    if 0 <= partition < len(lanes) and lanes[partition].files_closed:
        return None
    if transaction is not None:
        _check_transactions(producer)
    if not (isinstance(records, EncodedRun) and producer._takes_encoded) and not shares.inline_lane_free(
        producer, partition
    ):
        return None  # Records to encode: not before they can be written
    return shares.write_run_now(producer, partition, _run(producer, records, transaction))


def _run(producer: Producer[str | bytes, bytes], records: Writable, transaction: Transaction | None) -> Run:
    """What ``write`` writes: a run stored as it is, or ``Record``s encoded as any push's (and a
    run decoded into them first, for a stream that compresses its values)."""
    if isinstance(records, EncodedRun) and producer._takes_encoded:
        return records if transaction is None else transactional_run(records, *transaction)
    listed = _as_records(records) if isinstance(records, EncodedRun) else records
    return shares.encode_records(producer, listed, None if transaction is None else producer_field(*transaction))


class _PartitionTransactions:
    """A producer's view of one partition's transactions: those open in the data, and those whose
    marker is being written (still open for the last stable offset until it is durable)."""

    def __init__(self, reader: PartitionReader) -> None:
        self.reader = reader
        self.open = OpenTransactions(reader)
        self.ending: dict[int, int] = {}  # producer id -> first offset, while its marker is written


_TRANSACTIONS: weakref.WeakKeyDictionary[Producer[str | bytes, bytes], dict[int, _PartitionTransactions]] = (
    weakref.WeakKeyDictionary()
)


def _transactions(producer: Producer[str | bytes, bytes], partition: int) -> _PartitionTransactions:
    producer._check_partition(partition)
    partitions = _TRANSACTIONS.setdefault(producer, {})
    found = partitions.get(partition)
    if found is None:
        directory = producer._lanes[partition].partition.directory
        reader = PartitionReader(directory, partition)  # any record the stream holds (its limit may have changed)
        found = partitions[partition] = _PartitionTransactions(reader)
    return found


def open_transactions(producer: Producer[str | bytes, bytes], partition: int) -> dict[int, int]:
    """The transactions of ``partition`` that wrote records and have no marker yet: producer id to
    the offset of its first record, from the data (scanned once, then from where it stopped)."""
    return dict(_transactions(producer, partition).open.catch_up())


def open_transactions_with_epochs(producer: Producer[str | bytes, bytes], partition: int) -> dict[int, tuple[int, int]]:
    """``open_transactions`` with each one's epoch (its records'): producer id to (first offset,
    epoch), what an abort marker for a transaction no coordinator knows of takes."""
    return _transactions(producer, partition).open.catch_up_with_epochs()


def last_stable_offset(producer: Producer[str | bytes, bytes], partition: int) -> int:
    """The offset a ``read_committed`` reader stops before: the first record of the oldest
    transaction still open (or whose marker is still being made durable), else the partition's end."""
    state = _transactions(producer, partition)
    firsts = [*state.open.catch_up().values(), *state.ending.values()]
    return min(firsts) if firsts else state.reader.bounds()[1]


def aborted_transactions(
    producer: Producer[str | bytes, bytes], partition: int, first_offset: int, last_offset: int
) -> list[AbortedTransaction]:
    """The aborted transactions holding records from ``first_offset`` to ``last_offset`` (both
    included), from the ``.txnindex`` files: a Kafka Fetch's ``aborted_transactions``."""
    state = _transactions(producer, partition)
    return txn_index.aborted_transactions(
        state.reader.directory, state.reader.segment_bases(), first_offset, last_offset
    )


async def write_marker(
    producer: Producer[str | bytes, bytes],
    partition: int,
    producer_id: int,
    epoch: int,
    commit: bool,
    coordinator_epoch: int,
) -> int:
    """Write the commit (``commit``) or abort marker of ``producer_id``'s transaction to
    ``partition`` and fsync the partition; the marker's offset, once it is on stable storage. An
    abort marker's transaction (if it wrote records here) is appended to the ``.txnindex`` first.
    Raises what a push raises, or the fsync's OSError (the marker may then be written, but is not
    known durable: write it again, which a reader takes as the same end)."""
    _check_transactions(producer)
    await _unparked(producer, partition)
    state = _transactions(producer, partition)
    opened_at = await anyio.to_thread.run_sync(state.open.catch_up, limiter=producer._limiter)
    first = opened_at.get(producer_id, -1)
    if first >= 0:
        state.ending[producer_id] = first
    try:
        offset = await _write_marker_record(
            producer, partition, marker_run(producer_id, epoch, commit, coordinator_epoch, time.time_ns(), first)
        )
        if not commit and first >= 0:
            bases = state.reader.segment_bases()
            base = bases[bisect.bisect_right(bases, offset) - 1]
            entry = AbortedTransaction(producer_id, first, offset)
            await anyio.to_thread.run_sync(
                txn_index.append_entry, state.reader.directory, base, entry, limiter=producer._limiter
            )
        await _sync_partition(producer, partition)
    finally:
        if state.ending.get(producer_id) == first:
            del state.ending[producer_id]
    return offset


async def _write_marker_record(producer: Producer[str | bytes, bytes], partition: int, run: EncodedRun) -> int:
    """The marker's record written as any run is; its offset. A stream that compresses its values
    stores it as it is all the same (it has none), its entries made where it is written."""
    if not producer._takes_encoded:
        stamp = int.from_bytes(run.time_entries[8:16], "little", signed=True)
        record = RecordRun([run.data], [stamp], run.key_hashes, None, run.total)
        return await shares.write_run(producer, partition, record)
    return await shares.write_run(producer, partition, run)


async def _sync_partition(producer: Producer[str | bytes, bytes], partition: int) -> None:
    """fdatasync ``partition``'s ``.data`` (what it holds is then on stable storage: recovery
    rebuilds the index files from the data, as it does after a sync-flush batch, whose index
    entries are not fsynced either), raising the fsync's error. One call, where the whole
    segment's sync is five: the index files are left to the producer's flusher."""
    lane = producer._lanes[partition]
    await lane.drain()
    await anyio.to_thread.run_sync(
        functools.partial(producer._sync_lanes, [lane], data_only=True), limiter=producer._limiter
    )
    error, producer._sync_error = producer._sync_error, None
    if error is not None:
        raise error


def _check_transactions(producer: Producer[str | bytes, bytes]) -> None:
    """SettingsMismatchError when the producer's stream cannot hold a transaction's records."""
    producer._check_open()
    stream = producer._stream
    assert stream is not None
    require_transactions(stream.settings, stream.path)


def _as_records(records: EncodedRun) -> list[Record]:
    """The records' fields, to be encoded as any push's (for a stream that compresses its values)."""
    return [_as_record(record) for record in run_records(records.data, records.index_entries)]


def _as_record(stored: bytes) -> Record:
    decoded = decode_record(stored)
    assert decoded is not NEED_MORE
    headers = decoded.headers  # a Headers (null values, repeated names) is kept as it is
    return Record(
        decoded.value, decoded.key, headers if type(headers) is Headers else dict(headers) or None, decoded.timestamp_ns
    )
