"""The pieces of a Fetch of a partition holding transactions, read back by Kafka's own readers: the
control batch of a marker and the transactional batches (kafka-python's record batch reader), and
the answer's last stable offset and aborted transactions (kio, generated from Kafka's schemas)."""

from __future__ import annotations

import struct
import warnings

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from adiskq._sansio.codec import TransactionFields, encode_record
from adiskq.kafka._transactional_fetch import OpenTransactions, holds_transactions, transactional_batches
from adiskq.kafka.wire.codec import encode_control_batch
from adiskq.kafka.wire.fetch_answer import FETCH_ANSWER_VERSIONS, fetch_answer_with_transactions

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch


def _batches(data: bytes) -> list[DefaultRecordBatch]:
    """Each record batch of ``data`` (back to back), as kafka-python reads them."""
    found = []
    while data:
        size = 12 + struct.unpack_from(">i", data, 8)[0]
        found.append(DefaultRecordBatch(data[:size]))
        data = data[size:]
    return found


@pytest.mark.parametrize("commit", [True, False])
def test_a_control_batch_is_kafkas(commit: bool) -> None:
    (batch,) = _batches(
        encode_control_batch(
            offset=41, producer_id=7, producer_epoch=3, commit=commit, coordinator_epoch=5, timestamp_ms=1_000
        )
    )
    assert batch.validate_crc()
    assert batch.is_control_batch
    assert batch.is_transactional
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch) == (41, 7, 3)
    (record,) = list(batch)
    assert record.key == struct.pack(">hh", 0, 1 if commit else 0)  # version 0, COMMIT (1) or ABORT (0)
    assert record.value == struct.pack(">hi", 0, 5)  # version 0, the coordinator epoch


def _stored(*records: bytes) -> bytes:
    return b"".join(records)


def test_a_run_is_served_as_plain_transactional_and_control_batches() -> None:
    """Plain records, a producer's records of a transaction, its marker, another producer's record:
    four batches, each with its attributes and producer, the offsets kept."""
    plain = encode_record(b"plain", b"k", 1_000_000_000)
    first = encode_record(b"t1", b"k", 2_000_000_000, transaction=TransactionFields(7, 1))
    second = encode_record(b"t2", b"", 2_000_000_000, transaction=TransactionFields(7, 1))
    marker = encode_record(b"", b"", 3_000_000_000, transaction=TransactionFields(7, 1, True, 0))
    other = encode_record(b"u1", b"k", 4_000_000_000, transaction=TransactionFields(9, 0))
    data = _stored(plain, first, second, marker, other)
    assert holds_transactions(data, 5)
    assert not holds_transactions(_stored(plain, plain), 2)
    starts: list[tuple[int, int]] = []
    batches = transactional_batches(data, 10, 5, max_record_bytes=2**20, dictionaries=None, starts=starts)
    assert batches is not None
    assert starts == [(7, 11), (9, 14)]
    decoded = [b for batch in batches for b in _batches(batch)]
    assert [(b.base_offset, b.is_transactional, b.is_control_batch, b.producer_id) for b in decoded] == [
        (10, False, False, -1),
        (11, True, False, 7),
        (13, True, True, 7),
        (14, True, False, 9),
    ]
    records = [list(b) for b in decoded if not b.is_control_batch]
    assert [[r.value for r in rs] for rs in records] == [[b"plain"], [b"t1", b"t2"], [b"u1"]]
    assert [r.offset for r in records[1]] == [11, 12]


def test_open_transactions_give_the_last_stable_offset() -> None:
    opened = OpenTransactions()
    assert opened.last_stable_offset("t", 0, 10) == 10
    opened.written("t", 0, 7, 3)
    opened.written("t", 0, 7, 5)  # the first write of the transaction counts
    opened.written("t", 0, 9, 4)
    assert opened.last_stable_offset("t", 0, 10) == 3
    opened.ended("t", 0, 7)
    assert opened.last_stable_offset("t", 0, 10) == 4
    opened.ended("t", 0, 9)
    assert opened.last_stable_offset("t", 0, 10) == 10
    assert not opened.holds_open("t", 0)


def test_a_transaction_is_open_before_its_first_write_lands() -> None:
    """``starting`` opens the producer's transaction at the partition's end before the write (a
    Fetch the write wakes stops there), ``settle`` moves it to the offset written, ``ended`` takes
    back a write that failed; a later write of the same transaction changes nothing."""
    opened = OpenTransactions()
    assert opened.starting("t", 0, 7, 10)
    assert opened.last_stable_offset("t", 0, 10) == 10
    assert opened.last_stable_offset("t", 0, 12) == 10  # the write landed, not yet settled
    opened.settle("t", 0, 7, 11)  # another writer came first: the transaction starts at 11
    assert opened.last_stable_offset("t", 0, 12) == 11
    assert not opened.starting("t", 0, 7, 12)  # the same transaction's next write
    assert opened.last_stable_offset("t", 0, 14) == 11
    assert opened.starting("t", 0, 9, 14)
    opened.ended("t", 0, 9)  # its write failed
    assert opened.last_stable_offset("t", 0, 14) == 11
    opened.ended("t", 0, 7)
    assert not opened.holds_open("t", 0)


@pytest.mark.parametrize("version", FETCH_ANSWER_VERSIONS)
def test_the_answer_carries_the_last_stable_offset_and_aborted_transactions(version: int) -> None:
    """kio reads the fields back: a read_committed partition's aborted transactions, a
    read_uncommitted one's null, each one's last stable offset; a plain partition beside them."""
    topic: object = bytes(range(16)) if version >= 13 else "orders"
    frame = fetch_answer_with_transactions(
        5,
        version,
        [
            (
                topic,
                [
                    (0, 0, 20, 0, [b""], 12, [(7, 3), (9, 8)]),
                    (1, 0, 30, 2, [], 25, None),
                    (2, 0, 40, 0, []),
                ],
            )
        ],
    )
    flexible = version >= 12
    at = 8 + (1 if flexible else 0)
    response, _ = entity_reader(load_response_schema(1, version))(frame, at)
    first, second, third = response.responses[0].partitions
    assert (first.high_watermark, first.last_stable_offset) == (20, 12)
    assert [(a.producer_id, a.first_offset) for a in first.aborted_transactions] == [(7, 3), (9, 8)]
    assert (second.high_watermark, second.last_stable_offset, second.aborted_transactions) == (30, 25, None)
    assert (third.last_stable_offset, third.aborted_transactions) == (40, None)
