"""What a Fetch serves of a partition that holds Kafka transactions: their records in transactional
batches, their markers as control batches, the last stable offset, and (read_committed) no record at
or past it.

The stored records of a transaction carry its producer's id and epoch, and a marker is a record of
its own with an offset (``_sansio/codec.py``, attributes bits 2 and 3). The compiled batch path
leaves a run holding either to this module, which serves it as Kafka does: records outside
transactions in plain batches, each producer's consecutive records of a transaction in a batch with
the transactional attribute and that producer's id and epoch, and each marker as a control batch
of one control record (commit or abort, and the coordinator epoch). A ``read_committed`` consumer
drops the records of aborted transactions itself, from the ``aborted_transactions`` of the answer;
a ``read_uncommitted`` one reads them, as it would from Kafka.

A read_committed answer lists, of the transactions whose records it holds, those that aborted
(``aborted_among``: each one's outcome found in the data, from its producer's next marker).

The last stable offset (LSO) is the first offset of the oldest transaction still open in the
partition (the high watermark when none is): ``OpenTransactions`` keeps, per partition, the first
offset each producer wrote in its open transaction, from the write of its first record to the
write of its marker. Only the gateway writes transactions, and its start ends every one left open
before it answers, so what it has seen since its start is all there is.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from .._errors import CorruptRecordError
from .._sansio import codec
from .._sansio.codec import ATTRIBUTES_AT, KEYLESS, TRANSACTIONAL, record_transaction
from .._sansio.compression import Dictionaries
from .._sansio.values import Message
from .._storage.transaction_outcomes import TransactionOutcomes
from .wire.codec import encode_control_batch, encode_messages
from .wire.mapping import NULLS_HEADER

__all__ = ["OpenTransactions", "aborted_among", "holds_transactions", "transactional_batches"]

_SIZE: Final = struct.Struct("<I")
_COORDINATOR_EPOCH_UNKNOWN: Final = -1


class OpenTransactions:
    """Per partition: the first offset of each producer's open transaction (for the LSO)."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, int], dict[int, int]] = {}

    def written(self, topic: str, partition: int, producer_id: int, first_offset: int) -> None:
        """A transactional write of ``producer_id`` at ``first_offset`` (the first one counts)."""
        self._first.setdefault((topic, partition), {}).setdefault(producer_id, first_offset)

    def starting(self, topic: str, partition: int, producer_id: int, end: int) -> bool:
        """Before a transactional write of ``producer_id``: whether it starts the producer's open
        transaction in the partition, registered then at the partition's ``end`` — the offset the
        write will take, or an earlier one if another writer comes first — so that a Fetch the write
        wakes already stops before it. ``settle`` gives the offset written, ``ended`` takes it back
        if the write fails."""
        open_here = self._first.setdefault((topic, partition), {})
        if producer_id in open_here:
            return False
        open_here[producer_id] = end
        return True

    def settle(self, topic: str, partition: int, producer_id: int, first_offset: int) -> None:
        """The offset the write ``starting`` registered took."""
        self._first[topic, partition][producer_id] = first_offset

    def ended(self, topic: str, partition: int, producer_id: int) -> None:
        """The producer's marker is written: its transaction no longer holds the LSO back."""
        open_here = self._first.get((topic, partition))
        if open_here is not None:
            open_here.pop(producer_id, None)
            if not open_here:
                del self._first[topic, partition]

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's partitions hold nothing open any more."""
        for key in [key for key in self._first if key[0] == topic]:
            del self._first[key]

    def holds_open(self, topic: str, partition: int) -> bool:
        """Whether a transaction is open in the partition (the LSO is then before its end)."""
        return (topic, partition) in self._first

    def last_stable_offset(self, topic: str, partition: int, high_watermark: int) -> int:
        """The first offset of the partition's oldest open transaction; ``high_watermark`` if none."""
        open_here = self._first.get((topic, partition))
        if not open_here:
            return high_watermark
        return min(high_watermark, *open_here.values())


def aborted_among(outcomes: TransactionOutcomes, starts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Of the transactions starting at ``starts`` (producer id, offset), those that aborted: what a
    read_committed Fetch answers as ``aborted_transactions``. Each outcome is found in the data,
    from the producer's next marker (``transaction_outcomes.py``, which remembers what it scanned):
    so it holds for transactions aborted before the gateway started too."""
    return [(producer_id, offset) for producer_id, offset in starts if outcomes.outcome(producer_id, offset) is False]


def holds_transactions(data: bytes | memoryview, count: int) -> bool:
    """Whether any of the ``count`` stored records filling ``data`` is a transaction's or a marker
    (their sizes and attributes are read, nothing else; a run that does not parse is not one)."""
    pos = 0
    end = len(data)
    for _ in range(count):
        if pos + codec.KEY_AT > end:
            return False
        if data[pos + ATTRIBUTES_AT] & TRANSACTIONAL:
            return True
        (size,) = _SIZE.unpack_from(data, pos)
        if size <= 0:
            return False
        pos += size
    return False


def transactional_batches(
    data: bytes | memoryview,
    first_offset: int,
    count: int,
    *,
    max_record_bytes: int,
    dictionaries: Dictionaries | None,
    starts: list[tuple[int, int]] | None = None,
) -> list[bytes] | None:
    """The Kafka batches serving the ``count`` stored records that fill ``data`` (numbered from
    ``first_offset``), in order; None when a record is damaged (the caller reads Messages, whose
    read names the damage). ``starts`` gets (producer id, offset) of each transaction's first
    record among them (a producer's first, and its first after each of its markers): the
    transactions a read_committed answer lists as aborted if they were."""
    buf = bytes(data)
    try:
        messages = codec.decode_messages(
            buf, 0, first_offset, count, max_record_bytes=max_record_bytes, dictionaries=dictionaries
        )
    except CorruptRecordError:
        return None
    batches: list[bytes] = []
    group: list[Message[Any, bytes]] = []
    group_producer: tuple[int, int] | None = None
    started: set[int] = set()  # producers whose transaction's start is noted (until their marker)
    pos = 0
    for stored in messages:
        message: Message[Any, bytes] = stored
        (size,) = _SIZE.unpack_from(buf, pos)
        record = buf[pos : pos + size]
        pos += size
        fields = record_transaction(record)
        if record[ATTRIBUTES_AT] & KEYLESS:
            message = message._replace(key=None)  # a library push given no key: Kafka's null key
        producer = None if fields is None else (fields.producer_id, fields.epoch)
        if group and (producer != group_producer or (fields is not None and fields.is_marker)):
            batches.append(_batch(group, group_producer))
            group = []
        if fields is not None and fields.is_marker:
            started.discard(fields.producer_id)
            batches.append(
                encode_control_batch(
                    offset=message.offset,
                    producer_id=fields.producer_id,
                    producer_epoch=fields.epoch,
                    commit=bool(fields.commit),
                    coordinator_epoch=fields.coordinator_epoch,
                    timestamp_ms=message.timestamp_ns // 1_000_000,
                )
            )
            continue
        if fields is not None and starts is not None and fields.producer_id not in started:
            started.add(fields.producer_id)
            starts.append((fields.producer_id, message.offset))
        group.append(message)
        group_producer = producer
    if group:
        batches.append(_batch(group, group_producer))
    return batches


def _batch(messages: list[Message[Any, bytes]], producer: tuple[int, int] | None) -> bytes:
    return encode_messages(messages, nulls_header=NULLS_HEADER, transaction=producer)
