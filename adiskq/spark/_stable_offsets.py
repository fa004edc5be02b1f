"""Where a streaming micro-batch may end in a partition that holds Kafka transactions: its last
stable offset, the first record of the oldest transaction still open (or the end of what is there).

A micro-batch's end is written to the query's checkpoint before its rows are read, and the next
one starts there: so it must never lie past a record readers may not be given yet (a read would
fail with ``TransactionOpenError``), and every record before it must be final. Ending each batch
at the last stable offset keeps the query running: it delivers what precedes an open transaction,
and a later batch takes the transaction's records (committed) or passes them (aborted) once its
marker is written.

The driver learns it from the data, scanning each record once: per partition a cursor that stays
open goes on from where the last planning stopped, up to the end that planning saw, noting the
first record of each transaction that has no marker yet. Spark plans many times a second; a
planning that finds nothing new in a partition reads nothing (the cursor looks for a segment roll
with one ``access`` call, never by listing the folder). New records are read once more on the
driver (``scan_columns`` over their bytes, the page cache's copy at worst; about 0.15 s a million
records of 130 bytes with the compiled core, 0.7 s with the pure-Python one): the price of a stream
that may hold transactions; a stream of a format without them is never scanned. A segment roll
costs one listing of the partition's folder, when the cursor opens the next segment.
"""

from __future__ import annotations

import dataclasses
import os

from .._errors import OffsetOutOfRangeError
from .._sansio.codec import TransactionFields
from .._sansio.naming import PARTS_DIR, partition_dir_name
from .._storage.cursors import PartitionCursor
from .._storage.partition_reader import PartitionReader
from .._storage.transaction_outcomes import scan_cursor

__all__ = ["StableOffsets"]


@dataclasses.dataclass
class _PartitionScan:
    """What the driver knows of one partition: its records from ``start`` to the cursor's position."""

    start: int
    cursor: PartitionCursor
    open_firsts: dict[int, int] = dataclasses.field(default_factory=dict)  # producer id -> first offset

    def note(self, offset: int, fields: TransactionFields) -> None:
        if fields.commit is None:
            self.open_firsts.setdefault(fields.producer_id, offset)
        else:
            self.open_firsts.pop(fields.producer_id, None)


class StableOffsets:
    """The last stable offset of each partition of one stream, kept up to date by scanning only
    what was written since the last question (see the module's docstring)."""

    def __init__(self, stream_path: str) -> None:
        self._stream_path = stream_path
        self._scans: dict[int, _PartitionScan] = {}

    def stable_end(self, partition: int, begin: int, end: int) -> int:
        """``end``, or the first offset from ``begin`` on of a record of a transaction still open
        below ``end``, whichever is first (never less than ``begin``).

        Records before ``begin`` are not looked at: a batch from ``begin`` holds none of them, and
        a transaction open across ``begin`` stops it at its first record from ``begin`` on."""
        scan = self._scans.get(partition)
        if scan is None or not scan.start <= begin <= scan.cursor.position:
            scan = self._restart(partition, begin)
        if scan.cursor.position < end:
            try:
                scan_cursor(scan.cursor, scan.note, markers_only=False, end=end)
            except OffsetOutOfRangeError as error:
                # Retention deleted what was not scanned yet: go on from the oldest offset left (the
                # read of the batch reports or skips the loss, as failOnDataLoss says).
                oldest = error.oldest_offset if error.oldest_offset is not None else end
                scan = self._restart(partition, min(max(begin, oldest), end))
                scan_cursor(scan.cursor, scan.note, markers_only=False, end=end)
        return max(begin, min([end, *scan.open_firsts.values()]))

    def _restart(self, partition: int, begin: int) -> _PartitionScan:
        old = self._scans.pop(partition, None)
        if old is not None:
            old.cursor.close()
        directory = os.path.join(self._stream_path, PARTS_DIR, partition_dir_name(partition))
        reader = PartitionReader(directory, partition)
        scan = self._scans[partition] = _PartitionScan(begin, reader.cursor(begin))
        return scan

    def close(self) -> None:
        """Close every cursor."""
        for scan in self._scans.values():
            scan.cursor.close()
        self._scans.clear()
