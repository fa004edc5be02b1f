"""Kafka transactions in adiskq's records: a run made transactional, and markers. No I/O.

The record fields are ``codec.py``'s (format 5, attributes bits 2 and 3): a record written in a
transaction carries its producer's id and epoch; a marker is a record of its own that commits or
aborts every record its producer wrote to the partition since its last marker. A marker takes an
offset and an ``.index`` entry like any record, so a Kafka client's offsets and adiskq's are the
same numbers (as in Kafka, where a marker is a control batch with an offset of its own); library
readers skip markers, so a partition that had transactions has gaps in the offsets they deliver.

The Kafka gateway's Produce makes a run of stored records (``kafka/wire/mapping.stored_records``, in
C) without these fields; ``transactional_run`` adds them to each record of the run, which the
write path then stores as it is. The compiled core leaves records with these bits to this
reference (it checks and skips their fields, and answers NotImplemented where it would build a
Message), so nothing here is on the hot path of a stream without transactions.
"""

from __future__ import annotations

import struct
from typing import Final

from .._errors import InvalidArgumentError
from .codec import (
    ATTRIBUTES_AT,
    CONTROL,
    KEY_AT,
    KEY_LENGTH_AT,
    MAGIC_AT,
    TAGGED,
    TRANSACTIONAL,
    TransactionFields,
    crc32c,
    encode_record,
)
from .entries import INDEX_ENTRY, INDEX_ENTRY_BYTES, TIMEINDEX_ENTRY, EncodedRun
from .keyindex import key_hash, pack_hashes

__all__ = ["encode_marker", "marker_run", "producer_field", "transactional_record", "transactional_run"]

_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_SIZE_CRC: Final = struct.Struct("<II")
_PRODUCER: Final = struct.Struct("<qh")


def encode_marker(
    producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, timestamp_ns: int, first_offset: int = -1
) -> bytes:
    """The record of a commit (``commit``) or abort marker of ``producer_id``'s transaction, whose
    first record in the partition is at ``first_offset`` (-1: it wrote none there)."""
    fields = TransactionFields(producer_id, epoch, commit, coordinator_epoch, first_offset)
    return encode_record(b"", b"", timestamp_ns, None, 0, None, fields)


def marker_run(
    producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, timestamp_ns: int, first_offset: int = -1
) -> EncodedRun:
    """A marker as a run of one record, for the write path that stores runs (``partition_writes``)."""
    record = encode_marker(producer_id, epoch, commit, coordinator_epoch, timestamp_ns, first_offset)
    return EncodedRun(
        record,
        INDEX_ENTRY.pack(0, 0, len(record)),
        TIMEINDEX_ENTRY.pack(0, timestamp_ns),
        pack_hashes([key_hash(b"")]),
        b"",  # a marker carries no tag
        len(record),
    )


def producer_field(producer_id: int, epoch: int) -> bytes:
    """The producer fields a transactional record stores (``codec.py``), checked."""
    if not -(2**63) <= producer_id < 2**63 or not -(2**15) <= epoch < 2**15:
        raise InvalidArgumentError(
            f"a transaction's producer id is a signed 64-bit integer and its epoch a signed 16-bit one, "
            f"not {producer_id} and {epoch}"
        )
    return _PRODUCER.pack(producer_id, epoch)


def transactional_record(record: bytes, field: bytes) -> bytes:
    """``record`` (encoded, checked, outside transactions) made a record of the transaction whose
    ``producer_field`` is ``field``: the field inserted after its tag field (or its key),
    attributes bit 2 set, its size and CRC made again."""
    attributes = record[ATTRIBUTES_AT]
    if attributes & (TRANSACTIONAL | CONTROL):
        raise ValueError("transactional_record: the record is a transaction's already")
    fields_at = KEY_AT + _U32.unpack_from(record, KEY_LENGTH_AT)[0]
    if attributes & TAGGED:
        fields_at += 2 + _U16.unpack_from(record, fields_at)[0]
    body = b"".join(
        (
            record[MAGIC_AT:ATTRIBUTES_AT],
            bytes((attributes | TRANSACTIONAL,)),
            record[ATTRIBUTES_AT + 1 : fields_at],
            field,
            record[fields_at:],
        )
    )
    # size | crc | body: the layout of codec.py (SIZE_AT 0, CRC_AT 4, MAGIC_AT 8)
    return _SIZE_CRC.pack(len(body) + MAGIC_AT, crc32c(body)) + body


def transactional_run(run: EncodedRun, producer_id: int, epoch: int) -> EncodedRun:
    """``run`` with each record made a record of ``producer_id``'s transaction
    (``transactional_record``), its index entries moved to the new positions and sizes."""
    field = producer_field(producer_id, epoch)
    records: list[bytes] = []
    entries: list[bytes] = []
    position = 0
    data = run.data
    for at in range(0, len(run.index_entries), INDEX_ENTRY_BYTES):
        offset, start, size = INDEX_ENTRY.unpack_from(run.index_entries, at)
        record = transactional_record(data[start : start + size], field)
        records.append(record)
        entries.append(INDEX_ENTRY.pack(offset, position, len(record)))
        position += len(record)
    largest = max(map(len, records), default=0)
    return EncodedRun(b"".join(records), b"".join(entries), run.time_entries, run.key_hashes, run.tag_entries, largest)
