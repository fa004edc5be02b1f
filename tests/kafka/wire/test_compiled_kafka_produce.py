"""A Produce's batches decoded whole by the compiled core, against ``decode_produce_reference``.

``decode_produce`` hands a request's records field to ``kafka_decode_batches`` with a run of stored
records a batch: it must answer exactly the batches the reference makes (each batch's fields, each
run's bytes, entries and key hashes), or None wherever the reference takes another path (compressed
batches, LogAppendTime batches, records the mapping refuses) or names a fault, on valid requests,
damaged ones and noise.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq._sansio.entries import EncodedRun
from adiskq._sansio.native import NATIVE
from adiskq.kafka._records import decode_produce, decode_produce_reference
from adiskq.kafka.wire.batch import KafkaBatch, KafkaBatchError, KafkaRecord, encode_batch
from adiskq.kafka.wire.codec import ATTRIBUTES_AT, CRC_AT, DEFAULT_MAX_BYTES, LOG_APPEND_TIME, crc32c
from adiskq.kafka.wire.mapping import NULLS_HEADER, stored_records_reference

assert NATIVE is not None
NOW = 1_800_000_000_123_456_789
names = st.sampled_from(["a", "b", "é", "", NULLS_HEADER])
records = st.builds(
    KafkaRecord,
    st.just(0),
    st.one_of(st.integers(min_value=-3, max_value=2_000_000_000_000), st.just(2**62)),
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.lists(st.tuples(names, st.one_of(st.binary(max_size=6), st.none())), max_size=3),
)
batches = st.tuples(
    st.lists(records, min_size=1, max_size=5),
    st.sampled_from([0, 0, 0, 1, 4]),  # compression
    st.sampled_from([0, 0, 0, LOG_APPEND_TIME]),
    st.sampled_from([-1, -1, 7]),  # producer id
)


def request_of(parts: list[tuple[list[KafkaRecord], int, int, int]]) -> bytes:
    """A partition's records field: the batches back to back, their attributes set and CRCs right."""
    data = b""
    for batch_records, compression, attributes, producer_id in parts:
        numbered = [record._replace(offset_delta=i) for i, record in enumerate(batch_records)]
        raw = bytearray(
            encode_batch(
                base_offset=0,
                records=numbered,
                base_timestamp_ms=1_000,
                compression=compression,
                producer_id=producer_id,
                producer_epoch=0 if producer_id >= 0 else -1,
                base_sequence=0 if producer_id >= 0 else -1,
            )
        )
        raw[ATTRIBUTES_AT + 1] |= attributes
        raw[CRC_AT : CRC_AT + 4] = crc32c(bytes(raw[ATTRIBUTES_AT:])).to_bytes(4, "big")
        data += bytes(raw)
    return data


def compiled(data: bytes) -> list[KafkaBatch] | None:
    found: list[KafkaBatch] | None = NATIVE.kafka_decode_batches(
        data, DEFAULT_MAX_BYTES, KafkaRecord, KafkaBatch, NOW, NULLS_HEADER, EncodedRun
    )
    return found


def compare(data: bytes) -> list[KafkaBatch] | None:
    """The compiled call's batches equal the reference's, or it is None where the reference goes
    another way (an error, a compressed or LogAppendTime batch, records off the plain path)."""
    got = compiled(data)
    try:
        want = decode_produce_reference(data, NOW, stored_records_reference)
    except KafkaBatchError:
        assert got is None
        return None
    if got is not None:
        assert got == want
        assert all(type(batch.records) is EncodedRun for batch in got)
        return got
    plain = all(type(batch.records) is EncodedRun and not batch.attributes & (LOG_APPEND_TIME | 0x07) for batch in want)
    assert not plain, "a plain request the compiled core left to the reference"
    return None


def test_the_gateway_decodes_with_the_compiled_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain request never reaches the reference: one compiled call decodes it."""
    from adiskq.kafka import _records

    def refuse(*args: object) -> object:
        raise AssertionError("the reference decoded a plain request")

    monkeypatch.setattr(_records, "decode_produce_reference", refuse)
    data = request_of([([KafkaRecord(0, 5, b"k", b"v", [("h", b"x")])], 0, 0, -1)] * 2)
    found = decode_produce(data)
    assert [type(batch.records) for batch in found] == [EncodedRun, EncodedRun]


@settings(max_examples=300, deadline=None)
@given(st.lists(batches, min_size=1, max_size=3))
def test_requests_are_decoded_as_the_reference_decodes_them(
    parts: list[tuple[list[KafkaRecord], int, int, int]],
) -> None:
    """Plain, compressed, LogAppendTime and idempotent batches, records the mapping refuses: the
    same batches and runs, or None just where the reference takes another path."""
    compare(request_of(parts))


@st.composite
def damaged_requests(draw: st.DrawFn) -> bytes:
    """A valid request with bytes changed, cut or inserted (its CRC made right again, or not)."""
    parts = draw(st.lists(batches.filter(lambda b: b[1] == 0), min_size=1, max_size=2))
    data = bytearray(request_of(parts))
    at = draw(st.integers(min_value=0, max_value=len(data) - 1))
    choice = draw(st.integers(min_value=0, max_value=2))
    if choice == 0:
        data[at] ^= draw(st.integers(min_value=1, max_value=255))
    elif choice == 1:
        del data[at:]
    else:
        data[at:at] = draw(st.binary(min_size=1, max_size=6))
    if draw(st.booleans()) and len(data) > ATTRIBUTES_AT:  # damage the CRC does not catch
        data[CRC_AT : CRC_AT + 4] = crc32c(bytes(data[ATTRIBUTES_AT:])).to_bytes(4, "big")
    return bytes(data)


@settings(max_examples=400, deadline=None)
@given(damaged_requests())
def test_damaged_requests_are_decoded_or_left_alike(data: bytes) -> None:
    """Damaged framing, counts, varints and records: the reference's batches, or None."""
    compare(data)


@given(st.binary(max_size=200))
def test_noise_is_left_to_the_reference(data: bytes) -> None:
    """Random bytes: None (the reference names the fault), never a read past the data."""
    compare(data)


def decode_with(*extra: object) -> object:
    """``kafka_decode_batches`` of an empty request with ``extra`` after its first four arguments."""
    return NATIVE.kafka_decode_batches(b"", 0, KafkaRecord, KafkaBatch, *extra)


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ((NOW, NULLS_HEADER), TypeError),
        ((1.5, NULLS_HEADER, EncodedRun), TypeError),
        ((2**63, NULLS_HEADER, EncodedRun), OverflowError),
        ((NOW, b"n", EncodedRun), TypeError),
        ((NOW, "\ud800", EncodedRun), UnicodeEncodeError),
        ((NOW, NULLS_HEADER, list), TypeError),
        ((NOW, NULLS_HEADER, None), TypeError),
    ],
)
def test_the_stored_arguments_are_checked(extra: tuple[object, ...], error: type[Exception]) -> None:
    """Wrong counts and types of the run's arguments raise before anything is read."""
    with pytest.raises(error):
        decode_with(*extra)
