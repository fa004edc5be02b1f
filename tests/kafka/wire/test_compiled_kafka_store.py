"""The compiled ``kafka_stored_records`` against its pure-Python reference: same run of stored records, or None alike.

A Kafka batch's records section becomes a run of adiskq's stored records (their bytes back to back,
their index entries numbered from 0, their key hashes) in one compiled call when a Produce takes the
plain path; both answer None wherever the step by step path must decide (bad
bytes, a record the mapping refuses, one the encoder cannot store), on valid sections, damaged
ones and noise.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq import _compiled
from adiskq._sansio.codec import decode_record
from adiskq._sansio.entries import EncodedRun
from adiskq._sansio.keyindex import pack_hashes
from adiskq._sansio.run_entries import place_entries_reference, run_records, run_timestamps
from adiskq.kafka.wire import codec as kafka_codec
from adiskq.kafka.wire import mapping as kafka_mapping
from adiskq.kafka.wire.codec import KafkaRecord
from adiskq.kafka.wire.mapping import MAX_PLAIN_HEADERS, NULLS_HEADER, stored_records_reference

I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
NOW = 1_800_000_000_123_456_789
# Names that repeat, the reserved one, non-ASCII, empty: every header rule gets its turn.
names = st.sampled_from(["a", "b", "é", "", "x" * 3, NULLS_HEADER])
headers = st.lists(st.tuples(names, st.one_of(st.binary(max_size=8), st.none())), max_size=4)
timestamps = st.one_of(
    st.integers(min_value=-5, max_value=2_000_000_000_000),
    st.sampled_from([-1, 0, 9_223_372_036_854, 9_223_372_036_855, 2**62]),
)
records = st.builds(
    KafkaRecord,
    st.just(0),
    timestamps,
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=40)),
    headers,
)


def section_of(batch: list[KafkaRecord], base_timestamp_ms: int = 0) -> bytes:
    """The records section of a batch of ``batch`` (offset deltas numbered in order)."""
    numbered = [record._replace(offset_delta=i) for i, record in enumerate(batch)]
    encoded = kafka_codec.encode_batch(base_offset=0, records=numbered, base_timestamp_ms=base_timestamp_ms)
    return encoded[kafka_codec.HEADER_BYTES :]


def compare(section: bytes, count: int, base_timestamp_ms: int = 0, pos: int = 0) -> EncodedRun | None:
    """Both functions on ``section``: equal results (None alike); the reference's."""
    want = stored_records_reference(section, pos, len(section), count, base_timestamp_ms, NOW)
    got = _compiled.kafka_stored_records(section, pos, len(section), count, base_timestamp_ms, NOW, NULLS_HEADER)
    if want is None:
        assert got is None
    else:
        assert got == tuple(want)
    return want


def records_of(stored: EncodedRun) -> list[bytes]:
    """The run's records, one bytes object each, as its index entries cut them."""
    return run_records(stored.data, stored.index_entries)


def test_the_compiled_function_is_in_use() -> None:
    """A built core maps Produce records with the compiled function."""
    assert kafka_mapping.stored_records is not stored_records_reference


@settings(max_examples=300, deadline=None)
@given(st.lists(records, min_size=1, max_size=8), st.one_of(st.just(0), st.integers(-(2**40), 2**40)))
def test_any_records_are_stored_as_the_reference_stores_them(batch: list[KafkaRecord], base: int) -> None:
    """Nulls, repeated and reserved header names, null header values, timestamps past 64 bits of ns:
    the same bytes, timestamps and key hashes, or None alike."""
    compare(section_of(batch, base), len(batch), base)


def test_plain_records_are_stored_by_the_mapping_rules() -> None:
    """Null key and value as empty bytes plus the nulls header after the record's own, header order
    kept, milliseconds as nanoseconds, a negative timestamp as now: what a library reader decodes."""
    batch = [
        KafkaRecord(0, 1_700_000_000_123, None, b"v", [("z", b"1"), ("a", b"")]),
        KafkaRecord(1, -1, b"k", None, []),
        KafkaRecord(2, 5, b"", b"", []),
    ]
    stored = compare(section_of(batch), 3)
    assert stored is not None
    first, second, third = (decode_record(record) for record in records_of(stored))
    assert (first.key, first.value, list(first.headers.items()), first.timestamp_ns) == (  # type: ignore[union-attr]
        b"",
        b"v",
        [("z", b"1"), ("a", b""), (NULLS_HEADER, b"key")],
        1_700_000_000_123_000_000,
    )
    assert (second.value, dict(second.headers), second.timestamp_ns) == (b"", {NULLS_HEADER: b"value"}, NOW)  # type: ignore[union-attr]
    assert (third.key, third.value, dict(third.headers), third.timestamp_ns) == (b"", b"", {}, 5_000_000)  # type: ignore[union-attr]
    assert stored.largest == max(map(len, records_of(stored)))
    assert run_timestamps(stored.time_entries) == [1_700_000_000_123_000_000, NOW, 5_000_000]
    assert stored.key_hashes == pack_hashes([zlib.crc32(b""), zlib.crc32(b"k"), zlib.crc32(b"")])
    placed = place_entries_reference(stored.data, stored.index_entries, stored.time_entries, stored.tag_entries, 0, 0)
    assert placed == (stored.index_entries, stored.time_entries)  # entries numbered from 0, each record where it is


@pytest.mark.parametrize(
    "headers",
    [
        [("a", b"1"), ("a", b"2")],
        [("a", None)],
        [(NULLS_HEADER, b"key")],
        [(f"h{i}", b"") for i in range(MAX_PLAIN_HEADERS + 1)],
    ],
    ids=["repeated", "null value", "reserved", "too many"],
)
def test_records_off_the_plain_path_are_none_in_both(headers: list[tuple[str, bytes | None]]) -> None:
    """A refused or unusual record makes the whole section None, so the step by step path names it."""
    batch = [KafkaRecord(0, 1, b"k", b"v", []), KafkaRecord(1, 1, b"k", b"v", headers)]
    assert compare(section_of(batch), 2) is None


def test_as_many_headers_as_the_plain_path_takes_are_stored() -> None:
    """MAX_PLAIN_HEADERS distinct headers, and the nulls header besides, are stored."""
    batch = [KafkaRecord(0, 1, None, b"v", [(f"h{i}", b"%d" % i) for i in range(MAX_PLAIN_HEADERS)])]
    assert compare(section_of(batch), 1) is not None


@st.composite
def damaged_sections(draw: st.DrawFn) -> tuple[bytes, int]:
    """A valid section with bytes changed, cut or inserted, and a count that may be wrong."""
    batch = draw(st.lists(records, min_size=1, max_size=5))
    data = bytearray(section_of(batch))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        choice = draw(st.integers(min_value=0, max_value=2))
        if choice == 0 and data:
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif choice == 1:
            del data[at:]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
    count = len(batch) + draw(st.sampled_from([0, 0, 0, -1, 1, -len(batch)]))
    return bytes(data), count


@settings(max_examples=400, deadline=None)
@given(damaged_sections())
def test_damaged_sections_are_stored_or_none_as_in_the_reference(damaged: tuple[bytes, int]) -> None:
    """Damaged bytes and wrong counts: the reference's records where they still hold, else None in both."""
    compare(*damaged)


@given(st.binary(max_size=150), st.integers(min_value=-3, max_value=12), I64)
def test_noise_is_none_as_in_the_reference(section: bytes, count: int, base: int) -> None:
    """Random bytes (negative lengths, long varints, bad UTF-8): None just where the reference says None."""
    compare(section, count, base)


def test_varints_and_counts_at_their_limits_are_refused_alike() -> None:
    """Over-long and over-wide varints, a huge record count, a record length past the section: None in both."""
    body = b"\x00" + b"\xff" * 9 + b"\x02" + b"\x00\x01\x01\x00"
    compare(bytes([len(body) << 1]) + body, 1)
    compare(b"\xff\xff\xff\xff\x0f" + b"\x00" * 6, 1)
    compare(b"\x8c\x80\x80\x80\x00" + b"\x00" * 6, 1)
    valid = section_of([KafkaRecord(0, 1, b"k", b"v", [])])
    for count in (2**31 - 1, 2**62, -(2**31)):
        compare(valid, count)
    compare(valid[:1] + b"\x7f" + valid[2:], 1)  # a key length far past the record


def test_a_section_inside_a_larger_buffer_is_read_in_place() -> None:
    """pos and end pick the section out of a request's bytes (a memoryview too)."""
    section = section_of([KafkaRecord(0, 7, b"k", b"v", [("h", b"x")])])
    framed = b"\x01" * 9 + section + b"\x02" * 4
    want = stored_records_reference(section, 0, len(section), 1, 0, NOW)
    assert want is not None
    expected = tuple(want)
    for buf in (framed, memoryview(framed), bytearray(framed)):
        assert _compiled.kafka_stored_records(buf, 9, 9 + len(section), 1, 0, NOW, NULLS_HEADER) == expected


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: _compiled.kafka_stored_records(b"", 0, 0, 0, 0, NOW), TypeError),
        (lambda: _compiled.kafka_stored_records("text", 0, 0, 0, 0, NOW, NULLS_HEADER), TypeError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 4, 1, 0, NOW, NULLS_HEADER), ValueError),
        (lambda: _compiled.kafka_stored_records(b"abc", 2, 1, 1, 0, NOW, NULLS_HEADER), ValueError),
        (lambda: _compiled.kafka_stored_records(b"abc", -1, 1, 1, 0, NOW, NULLS_HEADER), ValueError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 3, 2**64, 0, NOW, NULLS_HEADER), OverflowError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 3, 1, None, NOW, NULLS_HEADER), TypeError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 3, 1, 0, 2**63, NULLS_HEADER), OverflowError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 3, 1, 0, 1.5, NULLS_HEADER), TypeError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 3, 1, 0, NOW, b"adiskq.kafka.null"), TypeError),
        (lambda: _compiled.kafka_stored_records(b"abc", 0, 3, 1, 0, NOW, "\ud800"), UnicodeEncodeError),
    ],
)
def test_the_compiled_function_checks_every_argument(call: Callable[[], object], error: type[Exception]) -> None:
    """Wrong counts, types and ranges of arguments raise, never read out of bounds."""
    with pytest.raises(error):
        call()
