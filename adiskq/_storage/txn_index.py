"""A segment's ``.txnindex``: the Kafka transactions its abort markers ended (Kafka's ``.txnindex``).

The file (``STREAM/parts/NNNNNN/<base>.txnindex``, beside the segment's ``.data``) holds one entry a
abort marker of the segment whose transaction wrote records to the partition, in the order of the
markers, all integers little-endian::

    i64  producer_id    the transaction's producer
    u64  first_offset   its first record in the partition (which may lie in an earlier segment)
    u64  last_offset    its abort marker's offset (in this segment)

A segment with no such marker has no file. It is what a Kafka Fetch answers as
``aborted_transactions`` (``aborted_transactions``), so that a ``read_committed`` client drops the
records each names, as Kafka's does. Everything in it is derived from the segment's data: every
abort marker carries its transaction's first offset (``codec.py``), so ``expected_entries`` makes
the file from ``.data`` alone. The write path appends an entry right after the marker's write and
fsyncs it with the marker (``partition_writes.write_marker``); crash recovery rewrites the active
segment's file from its data when it is torn, missing or holds more (``repair``), and ``adiskq
check`` compares every segment's file with its data. Retention deletes it with its segment.
Library readers do not need it: they find the markers in the data (``transaction_outcomes.py``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from .._sansio.codec import ATTRIBUTES_AT, CONTROL, record_transaction
from .._sansio.naming import TXNINDEX
from .._sansio.values import SegmentRepair
from .files import DEFAULT_FILE_MODE, atomic_write, fsync_dir, read_file, write_all
from .segment_files import segment_path

__all__ = ["ENTRY", "AbortedTransaction", "aborted_transactions", "append_entry", "expected_entries", "repair"]

ENTRY: Final = struct.Struct("<qQQ")


class AbortedTransaction(NamedTuple):
    """One entry: the producer, the first offset of its aborted transaction, its abort marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int


def expected_entries(data: bytes, positions: Sequence[int], base: int, damaged: Sequence[int] = ()) -> bytes:
    """The ``.txnindex`` of a segment whose records (checked, sound but for the ``damaged`` record
    numbers) start at ``positions`` of ``data``, the first at offset ``base``."""
    unsound = set(damaged)
    entries = []
    for number, position in enumerate(positions):
        if not data[position + ATTRIBUTES_AT] & CONTROL or number in unsound:
            continue
        size = int.from_bytes(data[position : position + 4], "little")
        fields = record_transaction(data[position : position + size])
        if fields is not None and fields.commit is False and fields.first_offset >= 0:
            entries.append(ENTRY.pack(fields.producer_id, fields.first_offset, base + number))
    return b"".join(entries)


def parse_entries(raw: bytes) -> list[AbortedTransaction]:
    """The whole entries of a ``.txnindex`` file's bytes (a partial last one is left out)."""
    whole = len(raw) - len(raw) % ENTRY.size
    return [AbortedTransaction._make(fields) for fields in ENTRY.iter_unpack(raw[:whole])]


def append_entry(directory: str, base: int, entry: AbortedTransaction, mode: int = DEFAULT_FILE_MODE) -> None:
    """Append ``entry`` to segment ``base``'s ``.txnindex`` (made if need be) and fsync it."""
    path = segment_path(directory, base, TXNINDEX)
    created = not os.path.lexists(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        write_all(fd, ENTRY.pack(*entry))
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(directory)


def aborted_transactions(
    directory: str, bases: Sequence[int], first_offset: int, last_offset: int
) -> list[AbortedTransaction]:
    """The aborted transactions that hold records from ``first_offset`` to ``last_offset`` (both
    included): those whose abort marker comes at or after ``first_offset`` and whose first record
    at or before ``last_offset``, in marker order, from the ``.txnindex`` of the partition's
    segments ``bases`` (sorted) that may hold such a marker."""
    found = []
    for number, base in enumerate(bases):
        following = bases[number + 1] if number + 1 < len(bases) else None
        if following is not None and following <= first_offset:
            continue
        raw = read_file(segment_path(directory, base, TXNINDEX))
        if raw is None:
            continue
        found += [
            entry
            for entry in parse_entries(raw)
            if entry.last_offset >= first_offset and entry.first_offset <= last_offset
        ]
    return found


def repair(
    directory: str,
    partition: int,
    base: int,
    data: bytes,
    positions: Sequence[int],
    damaged: Sequence[int],
    mode: int,
) -> list[SegmentRepair]:
    """Make segment ``base``'s ``.txnindex`` what its data says (``expected_entries``): rewritten
    when torn, missing, or holding entries its data no longer has (a marker cut with a torn tail),
    removed when no abort marker is left. What was done, as repairs."""
    path = segment_path(directory, base, TXNINDEX)
    expected = expected_entries(data, positions, base, damaged)
    existing = read_file(path)
    if existing == expected or (existing is None and not expected):
        return []
    if not expected:
        os.unlink(path)
        fsync_dir(directory)
        return [SegmentRepair(partition, base, "removed a .txnindex whose abort markers are not in .data")]
    atomic_write(path, expected, mode=mode)
    what = "rebuilt a missing .txnindex" if existing is None else "rebuilt the .txnindex"
    count = len(expected) // ENTRY.size
    return [SegmentRepair(partition, base, f"{what} from the {count} abort markers of .data")]
