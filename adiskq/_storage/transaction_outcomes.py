"""What became of a partition's Kafka transactions, as library readers see it: from the data alone.

A record of a transaction (``codec.py``: attributes bit 2) is committed or aborted by the first
marker its producer wrote to the partition after it; until that marker is written, the transaction
is open. Library readers deliver a record of a committed transaction where it stands, never one of
an aborted transaction, and never a marker; at the first record of a transaction still open they
stop (the partition's last stable offset, as Kafka calls it) and wait, since what follows it is
delivered only after it, in offset order. The marker's ``.index`` entry wakes them as any write does.

The markers are found in the data, where a reader in any process sees them as soon as their index
entry exists (no other file has to agree with the data first): ``TransactionOutcomes`` scans the
partition's records from the first transactional record a reader asks about up to the marker that
answers it (or the end), keeping the markers it met and where it stopped, and scans on from there
when a later question needs it: each record is scanned once. A
partition without transactions is never scanned: the compiled decoder hands a buffer holding a
transaction's record to the reference, whose ``TransactionalBatch`` is what sends a reader here.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from .._sansio.codec import (
    ATTRIBUTES_AT,
    CONTROL,
    TRANSACTIONAL,
    TransactionalBatch,
    TransactionFields,
    record_transaction,
)
from .._sansio.core import scan_columns
from .._sansio.values import Message

if TYPE_CHECKING:
    from .cursors import PartitionCursor
    from .partition_reader import PartitionReader

__all__ = ["OpenTransactions", "TransactionOutcomes", "committed", "scan_cursor", "scan_transactions"]

_SCAN_RECORDS: Final = 4096  # records a scan step reads at once


class TransactionOutcomes:
    """The markers of one partition, found by scanning its data (see the module's docstring)."""

    def __init__(self, reader: PartitionReader) -> None:
        self._reader = reader
        # Per producer id, its markers in offset order: their offsets, and whether each commits.
        self._marker_offsets: dict[int, list[int]] = {}
        self._marker_commits: dict[int, list[bool]] = {}
        self._scanned: tuple[int, int] | None = None  # [first, end) of the offsets scanned

    def outcome(self, producer_id: int, offset: int) -> bool | None:
        """True when the transaction of ``producer_id``'s record at ``offset`` committed, False when
        it aborted, None while it is open (no marker of that producer after it yet)."""
        found = self._known(producer_id, offset)
        if found is None:
            self._scan_from(offset, lambda: self._known(producer_id, offset) is not None)
            found = self._known(producer_id, offset)
        return found

    def _known(self, producer_id: int, offset: int) -> bool | None:
        offsets = self._marker_offsets.get(producer_id)
        if offsets is None:
            return None
        at = bisect.bisect_right(offsets, offset)
        return self._marker_commits[producer_id][at] if at < len(offsets) else None

    def _scan_from(self, offset: int, answered: Callable[[], bool]) -> None:
        """Read the records from ``offset`` (or from where the last scan stopped, when it covered
        ``offset``) on, noting every marker, until ``answered()`` or the partition's end."""
        scanned = self._scanned
        if scanned is None or not scanned[0] <= offset <= scanned[1]:
            self._marker_offsets.clear()
            self._marker_commits.clear()
            scanned = (offset, offset)
        first, position = scanned
        position = scan_transactions(self._reader, position, self._note, markers_only=True, until=answered)
        self._scanned = (first, position)

    def _note(self, offset: int, fields: TransactionFields) -> None:
        assert fields.commit is not None
        self._marker_offsets.setdefault(fields.producer_id, []).append(offset)
        self._marker_commits.setdefault(fields.producer_id, []).append(fields.commit)


class OpenTransactions:
    """The transactions of one partition that wrote records and have no marker yet (producer id to
    the offset of its first record), from the partition's data: scanned from its oldest offset the
    first time, and on from where the last scan stopped after that. What the writer of the markers
    and the Kafka gateway's last stable offset take; one of a transaction whose first record retention
    deleted is not known."""

    def __init__(self, reader: PartitionReader) -> None:
        self._reader = reader
        self.first_offsets: dict[int, int] = {}
        self.epochs: dict[int, int] = {}  # producer id -> the epoch of its open transaction's records
        self._position: int | None = None
        # One scan at a time: the writer of a marker scans in a worker thread, a Fetch on the loop's.
        self._scanning = threading.Lock()

    def catch_up(self, on_step: Callable[[int], None] | None = None) -> dict[int, int]:
        """A copy of ``first_offsets`` as the data has them now; ``on_step`` hears of the offset the
        scan reached after each step (a long scan's progress)."""
        return {producer_id: first for producer_id, (first, _epoch) in self.catch_up_with_epochs(on_step).items()}

    def catch_up_with_epochs(self, on_step: Callable[[int], None] | None = None) -> dict[int, tuple[int, int]]:
        """Producer id to (first offset, epoch) of each open transaction, as the data has them now."""
        with self._scanning:
            oldest = self._reader.bounds()[0]
            position = oldest if self._position is None else max(self._position, oldest)
            self._position = scan_transactions(self._reader, position, self._note, markers_only=False, on_step=on_step)
            return {producer_id: (first, self.epochs[producer_id]) for producer_id, first in self.first_offsets.items()}

    def _note(self, offset: int, fields: TransactionFields) -> None:
        if fields.commit is None:
            self.first_offsets.setdefault(fields.producer_id, offset)
            self.epochs[fields.producer_id] = fields.epoch
        else:
            self.first_offsets.pop(fields.producer_id, None)
            self.epochs.pop(fields.producer_id, None)


def scan_transactions(
    reader: PartitionReader,
    position: int,
    note: Callable[[int, TransactionFields], None],
    *,
    markers_only: bool,
    until: Callable[[], bool] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> int:
    """Call ``note(offset, fields)`` for each marker (and, unless ``markers_only``, each record of a
    transaction) of the partition from ``position`` on, in order, to its end or (checked after each
    step of ``_SCAN_RECORDS`` records) until ``until()``; where the scan stopped: there, or at the
    first record that is not sound (the reader's own read names the damage). ``on_step`` hears of
    the position after each step."""
    with reader.cursor(position) as cursor:
        return scan_cursor(cursor, note, markers_only=markers_only, until=until, on_step=on_step)


def scan_cursor(
    cursor: PartitionCursor,
    note: Callable[[int, TransactionFields], None],
    *,
    markers_only: bool,
    until: Callable[[], bool] | None = None,
    end: int | None = None,
    on_step: Callable[[int], None] | None = None,
) -> int:
    """``scan_transactions`` on a cursor the caller keeps open (so a later scan goes on without
    looking for the segment again), from its position up to ``end`` (or the partition's end)."""
    wanted = CONTROL if markers_only else TRANSACTIONAL
    while end is None or cursor.position < end:
        step = _SCAN_RECORDS if end is None else min(_SCAN_RECORDS, end - cursor.position)
        run = cursor.peek_stored(step)
        if run is None:
            break
        data = bytes(run.data)
        found = scan_columns(data, max_record_bytes=run.max_record_bytes)
        for index, at in enumerate(found.positions):
            if data[at + ATTRIBUTES_AT] & wanted:
                fields = record_transaction(data[at : at + found.sizes[index]])
                assert fields is not None
                note(run.first_offset + index, fields)
        if len(found.positions) < run.record_count:
            return run.first_offset + len(found.positions)
        cursor.skip(run.record_count)
        if on_step is not None:
            on_step(cursor.position)
        if until is not None and until():
            break
    return cursor.position


def committed(batch: TransactionalBatch, outcomes: TransactionOutcomes) -> tuple[list[Message], int]:
    """The messages of ``batch`` a reader delivers, and how many of its records it passed: every
    record up to the first of a transaction still open (none past it), without the markers and the
    records of aborted transactions."""
    transactions = batch.transactions
    delivered: list[Message] = []
    for index, message in enumerate(batch):
        fields = transactions.get(index)
        if fields is None:
            delivered.append(message)
            continue
        if fields.commit is not None:  # a marker
            continue
        outcome = outcomes.outcome(fields.producer_id, message.offset)
        if outcome is None:
            return delivered, index
        if outcome:
            delivered.append(message)
    return delivered, len(batch)
