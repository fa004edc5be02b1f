"""Format 5's transactional records and markers (codec.py, attributes bits 2 and 3): their fields
round-trip, the two ways of making one give the same bytes, damage to them is refused with the byte
position, and the compiled core checks and skips them exactly as the reference does (it hands the
decoding of such a buffer to the reference)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq import CorruptRecordError, InvalidArgumentError
from adiskq._sansio import codec as reference
from adiskq._sansio import core
from adiskq._sansio.codec import CONTROL, TRANSACTIONAL, TransactionFields
from adiskq._sansio.transactions import encode_marker, marker_run, producer_field, transactional_record

producer_ids = st.integers(min_value=-(2**63), max_value=2**63 - 1)
epochs = st.integers(min_value=-(2**15), max_value=2**15 - 1)
coordinator_epochs = st.integers(min_value=-(2**31), max_value=2**31 - 1)
tags = st.one_of(st.none(), st.text(min_size=1, max_size=8))
headers = st.dictionaries(st.text(max_size=5), st.binary(max_size=5), max_size=3)


def _recrc(record: bytearray) -> bytes:
    """The record with its CRC made again: damage that only the field checks can find."""
    struct.pack_into("<I", record, reference.CRC_AT, reference.crc32c(bytes(record[reference.MAGIC_AT :])))
    return bytes(record)


@given(st.binary(max_size=20), st.binary(max_size=20), headers, tags, producer_ids, epochs)
def test_a_transactional_record_round_trips_and_both_makers_agree(
    value: bytes, key: bytes, hdrs: dict[str, bytes], tag: str | None, producer_id: int, epoch: int
) -> None:
    fields = TransactionFields(producer_id, epoch)
    record = reference.encode_record(value, key, 7, hdrs, 0, tag, fields)
    assert core.encode_record(value, key, 7, hdrs, 0, tag, fields) == record
    # The gateway's way: a record encoded outside transactions, then given the producer fields.
    plain = reference.encode_record(value, key, 7, hdrs, 0, tag)
    assert transactional_record(plain, producer_field(producer_id, epoch)) == record
    decoded = reference.decode_record(record)
    assert decoded is not reference.NEED_MORE
    assert (decoded.value, decoded.key, dict(decoded.headers), decoded.tag) == (value, key, hdrs, tag)
    assert decoded.transaction == fields
    assert not decoded.transaction.is_marker
    assert decoded.attributes & TRANSACTIONAL
    assert not decoded.attributes & CONTROL
    assert reference.record_transaction(record) == fields
    assert reference.record_transaction(plain) is None


@given(producer_ids, epochs, st.booleans(), coordinator_epochs, st.integers(min_value=-1, max_value=2**63 - 1))
def test_a_marker_round_trips(
    producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, first_offset: int
) -> None:
    record = encode_marker(producer_id, epoch, commit, coordinator_epoch, 5, first_offset)
    decoded = reference.decode_record(record)
    assert decoded is not reference.NEED_MORE
    assert decoded.transaction == TransactionFields(producer_id, epoch, commit, coordinator_epoch, first_offset)
    assert decoded.transaction.is_marker
    assert (decoded.key, decoded.value, dict(decoded.headers)) == (b"", b"", {})
    run = marker_run(producer_id, epoch, commit, coordinator_epoch, 5, first_offset)
    assert run.data == record
    assert (run.record_count, run.largest) == (1, len(record))


def test_a_transaction_s_fields_out_of_range_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="signed 16-bit"):
        producer_field(1, 2**15)
    with pytest.raises(InvalidArgumentError, match="signed 16-bit"):
        reference.encode_record(b"", b"", 0, transaction=TransactionFields(2**63, 0))
    with pytest.raises(InvalidArgumentError, match="coordinator epoch"):
        encode_marker(1, 0, True, 2**31, 0)
    with pytest.raises(InvalidArgumentError, match="first offset"):
        encode_marker(1, 0, True, 0, 0, -2)


def _damaged_records() -> dict[str, bytes]:
    """Records whose CRC is right but whose transactional fields are wrong."""
    marker = bytearray(encode_marker(9, 1, True, 3, 0))
    kind_at = reference.KEY_AT + 10  # no key, no tag: the marker byte follows the producer fields
    marker[kind_at] = 2
    control_alone = bytearray(reference.encode_record(b"v", b"k", 0))
    control_alone[reference.ATTRIBUTES_AT] = CONTROL
    reserved = bytearray(reference.encode_record(b"v", b"k", 0))
    reserved[reference.ATTRIBUTES_AT] = 0x20
    short = bytearray(reference.encode_record(b"", b"", 0))  # 24 bytes: no room for the producer fields
    short[reference.ATTRIBUTES_AT] = TRANSACTIONAL
    short_marker = bytearray(reference.encode_record(b"", b"", 0, transaction=TransactionFields(1, 1)))
    short_marker[reference.ATTRIBUTES_AT] = TRANSACTIONAL | CONTROL
    return {
        "a marker neither commit nor abort": _recrc(marker),
        "a control record without its transaction's fields": _recrc(control_alone),
        "reserved attribute bits": _recrc(reserved),
        "fields that overrun the record": _recrc(short),
        "a marker's fields that overrun the record": _recrc(short_marker),
    }


@pytest.mark.parametrize("name", sorted(_damaged_records()))
def test_damaged_transactional_fields_are_refused_alike_by_both_cores(name: str) -> None:
    good = reference.encode_record(b"before", b"k", 1)
    damaged = _damaged_records()[name]
    buf = good + damaged
    with pytest.raises(CorruptRecordError) as caught:
        reference.decode_record(damaged)
    assert caught.value.position == 0
    for decode in (reference.decode_messages, core.decode_messages):
        with pytest.raises(CorruptRecordError) as at:
            decode(buf, 0, 0, 2)
        assert at.value.position == len(good)
    scanned = core.scan_columns(buf)
    expected = reference.scan_columns(buf)
    assert (scanned.positions, scanned.end) == (expected.positions, expected.end) == ([0], len(good))
    assert str(scanned.error) == str(expected.error)


@given(
    st.lists(
        st.tuples(st.binary(max_size=12), st.binary(max_size=6), tags, st.sampled_from(["plain", "txn", "marker"])),
        max_size=12,
    ),
    producer_ids,
    epochs,
)
def test_both_cores_decode_and_scan_mixed_buffers_alike(
    records: list[tuple[bytes, bytes, str | None, str]], producer_id: int, epoch: int
) -> None:
    parts = []
    for value, key, tag, kind in records:
        if kind == "marker":
            parts.append(encode_marker(producer_id, epoch, bool(len(value) % 2), 4, 0))
        else:
            fields = TransactionFields(producer_id, epoch) if kind == "txn" else None
            parts.append(reference.encode_record(value, key, 3, None, 0, tag, fields))
    buf = b"".join(parts)
    assert core.decode_messages(buf, 2, 10, len(parts)) == reference.decode_messages(buf, 2, 10, len(parts))
    compiled, python = core.scan_columns(buf), reference.scan_columns(buf)
    assert (compiled.positions, compiled.sizes, compiled.end) == (python.positions, python.sizes, python.end)
    # Every proper prefix is torn, never damaged, in both (h11's rule).
    for cut in range(len(buf) - 1, max(len(buf) - 40, -1), -1):
        assert core.scan_columns(buf[:cut]).error is None
        assert reference.scan_columns(buf[:cut]).error is None
