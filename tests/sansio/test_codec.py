"""The record codec of ``.data``, format v1: exact bytes, round trips, short buffers and damage."""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq import CorruptRecordError, InvalidArgumentError
from adiskq._sansio.codec import (
    MAGIC_V1,
    MIN_RECORD_BYTES,
    NEED_MORE,
    DecodedRecord,
    NeedMore,
    RecordExtent,
    decode_record,
    encoded_size,
)

# The functions the compiled core provides, from whichever core runs (ADISKQ_NO_EXTENSIONS=1 selects the
# pure-Python reference; CI runs this file both ways).
from adiskq._sansio.core import (
    crc32c,
    decode_messages,
    encode_batch,
    encode_record,
    place,
    scan_columns,
    scan_records,
)
from adiskq._sansio.values import EMPTY_HEADERS, Message

# (value, key, timestamp_ns, headers) -> the exact bytes of the record, written out field by field.
TABLE: list[tuple[tuple[bytes, bytes, int, Mapping[str, bytes]], str]] = [
    (
        (b"", b"", 0, {}),
        "18 00 00 00"  # size 24
        " 5e 00 e0 62"  # crc
        " ad 00"  # magic, attributes
        " 00 00 00 00 00 00 00 00"  # timestamp_ns 0
        " 00 00 00 00"  # key_len 0
        " 00 00",  # header_count 0
    ),
    (
        (b"v", b"k", 1, {}),
        "1a 00 00 00 b2 d2 84 c1 ad 00 01 00 00 00 00 00 00 00 01 00 00 00 6b 00 00 76",
    ),
    (
        (b"hello", b"key", -1, {}),
        "20 00 00 00 b7 d5 6d 44 ad 00"
        " ff ff ff ff ff ff ff ff"  # timestamp_ns -1
        " 03 00 00 00 6b 65 79"  # key "key"
        " 00 00"
        " 68 65 6c 6c 6f",  # value "hello"
    ),
    (
        (b"x", b"", 2**63 - 1, {"t": b"ab"}),
        "22 00 00 00 8e f6 f1 17 ad 00 ff ff ff ff ff ff ff 7f 00 00 00 00"
        " 01 00"  # one header
        " 01 00 74"  # name "t"
        " 02 00 00 00 61 62"  # value "ab"
        " 78",
    ),
    (
        (b"", b"k", 1_700_000_000_000_000_000, {"a": b"", "é": b"1"}),
        "29 00 00 00 c9 89 a2 05 ad 00 00 00 2a 36 fe 9c 97 17 01 00 00 00 6b"
        " 02 00 01 00 61 00 00 00 00"  # header "a" = b""
        " 02 00 c3 a9 01 00 00 00 31",  # header "é" (UTF-8) = b"1"
    ),
]
TABLE_IDS = ["empty", "one-byte", "negative-time", "one-header", "two-headers"]

keys = st.binary(max_size=64)
values = st.binary(max_size=512)
timestamps = st.integers(min_value=-(2**63), max_value=2**63 - 1)
headers = st.dictionaries(st.text(max_size=12), st.binary(max_size=32), max_size=4)


def _record(value: bytes, key: bytes, timestamp_ns: int, hdrs: Mapping[str, bytes]) -> bytes:
    return encode_record(value, key, timestamp_ns, hdrs)


def _outcome(decode: Callable[[], object]) -> object:
    """What ``decode`` returns, or the CorruptRecordError it raises."""
    try:
        return decode()
    except CorruptRecordError as error:
        return error


def _reseal(record: bytearray) -> bytes:
    """The record with its CRC recomputed, so only the damage we made remains."""
    struct.pack_into("<I", record, 4, crc32c(bytes(record[8:])))
    return bytes(record)


@pytest.mark.parametrize(("fields", "expected"), TABLE, ids=TABLE_IDS)
def test_encode_gives_the_exact_bytes(fields: tuple[bytes, bytes, int, Mapping[str, bytes]], expected: str) -> None:
    """encode_record lays out size, CRC, magic, attributes, time, key, headers and value as documented."""
    assert encode_record(*fields) == bytes.fromhex(expected)


@pytest.mark.parametrize(("fields", "expected"), TABLE, ids=TABLE_IDS)
def test_decode_reads_the_exact_bytes(fields: tuple[bytes, bytes, int, Mapping[str, bytes]], expected: str) -> None:
    """decode_record turns the documented bytes back into the record's fields."""
    value, key, timestamp_ns, hdrs = fields
    raw = bytes.fromhex(expected)
    assert decode_record(raw) == DecodedRecord(timestamp_ns, key, value, hdrs, 0, len(raw))


@pytest.mark.parametrize(("fields", "expected"), TABLE, ids=TABLE_IDS)
def test_encoded_size_predicts_the_length(fields: tuple[bytes, bytes, int, Mapping[str, bytes]], expected: str) -> None:
    """encoded_size gives the length encode_record will produce."""
    value, key, _, hdrs = fields
    assert encoded_size(value, key, hdrs) == len(bytes.fromhex(expected))


def test_crc_is_castagnoli() -> None:
    """The checksum is CRC-32C: its standard check value for b'123456789' is 0xE3069283."""
    assert crc32c(b"123456789") == 0xE3069283


def test_smallest_record_is_24_bytes() -> None:
    """An empty key, no headers and an empty value make the minimum record size."""
    assert MIN_RECORD_BYTES == 24
    assert len(encode_record(b"", b"", 0)) == MIN_RECORD_BYTES


@given(values, keys, timestamps, headers)
def test_round_trip(value: bytes, key: bytes, timestamp_ns: int, hdrs: dict[str, bytes]) -> None:
    """Any value, key, timestamp (negative too) and headers decode to what was encoded."""
    raw = encode_record(value, key, timestamp_ns, hdrs)
    decoded = decode_record(raw)
    assert decoded == DecodedRecord(timestamp_ns, key, value, hdrs, 0, len(raw))
    assert encoded_size(value, key, hdrs) == len(raw)


@given(values, keys, timestamps, headers, st.binary(max_size=40))
def test_decode_at_a_position(
    value: bytes, key: bytes, timestamp_ns: int, hdrs: dict[str, bytes], before: bytes
) -> None:
    """A record that starts inside a buffer decodes from its position, and reports where it ends."""
    raw = encode_record(value, key, timestamp_ns, hdrs)
    decoded = decode_record(before + raw + b"trailing", len(before))
    assert not isinstance(decoded, type(NEED_MORE))
    assert (decoded.value, decoded.key, decoded.end) == (value, key, len(before) + len(raw))


@given(values, keys, timestamps, headers)
def test_every_proper_prefix_needs_more(value: bytes, key: bytes, timestamp_ns: int, hdrs: dict[str, bytes]) -> None:
    """A buffer that stops anywhere inside a valid record is 'need more', never an error."""
    raw = encode_record(value, key, timestamp_ns, hdrs)
    for cut in range(len(raw)):
        assert decode_record(raw[:cut]) is NEED_MORE


@pytest.mark.parametrize(("fields", "expected"), TABLE, ids=TABLE_IDS)
def test_every_prefix_of_table_records_needs_more(
    fields: tuple[bytes, bytes, int, Mapping[str, bytes]], expected: str
) -> None:
    """Each table record cut at every byte is 'need more' (also after a valid record)."""
    raw = bytes.fromhex(expected)
    first = encode_record(b"first", b"", 5)
    for cut in range(len(raw)):
        assert decode_record(first + raw[:cut], len(first)) is NEED_MORE


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
def test_random_bytes_never_decode(data: bytes, pos: int) -> None:
    """Random bytes give 'need more' or CorruptRecordError at the position asked about, never a record."""
    pos = min(pos, len(data))
    result = _outcome(lambda: decode_record(data, pos))
    assert result is NEED_MORE or (isinstance(result, CorruptRecordError) and result.position == pos)


@given(st.binary(max_size=2000))
def test_scanning_random_bytes_ends(data: bytes) -> None:
    """scan_records over random bytes yields nothing and stops, quietly or with CorruptRecordError."""
    result = _outcome(lambda: list(scan_records(data)))
    assert result == [] or (isinstance(result, CorruptRecordError) and result.position == 0)


@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=5))
def test_decode_messages_rejects_random_bytes(data: bytes, count: int) -> None:
    """decode_messages never turns random bytes into messages."""
    with pytest.raises(CorruptRecordError):
        decode_messages(data, 0, 0, count)


@given(st.integers(min_value=0, max_value=MIN_RECORD_BYTES - 1), st.binary(min_size=20, max_size=20))
def test_size_below_minimum_is_reported_at_its_position(size: int, rest: bytes) -> None:
    """A size field below 24 is corrupt, reported at the record's first byte."""
    good = encode_record(b"ok", b"", 1)
    with pytest.raises(CorruptRecordError, match="below the minimum") as caught:
        decode_record(good + struct.pack("<I", size) + rest, len(good))
    assert caught.value.position == len(good)


def test_size_above_limit_is_reported_at_its_position() -> None:
    """A size field above max_record_bytes is corrupt, even before the record's bytes arrive."""
    good = encode_record(b"ok", b"", 1)
    with pytest.raises(CorruptRecordError, match="above the limit") as caught:
        decode_record(good + struct.pack("<I", 1001), len(good), max_record_bytes=1000)
    assert caught.value.position == len(good)


def test_bad_magic_is_reported_at_its_position() -> None:
    """A wrong magic byte is corrupt as soon as it is seen, at the record's first byte."""
    good = encode_record(b"ok", b"", 1)
    bad = bytearray(encode_record(b"value", b"key", 2))
    bad[8] = 0xAC
    with pytest.raises(CorruptRecordError, match="magic byte is 0xac") as caught:
        decode_record(good + bytes(bad[:9]), len(good))
    assert caught.value.position == len(good)


@given(values, keys, timestamps, st.data())
def test_any_damaged_byte_after_the_size_is_caught(
    value: bytes, key: bytes, timestamp_ns: int, data: st.DataObject
) -> None:
    """Changing any byte after the size field makes the record corrupt (magic or CRC), at its position."""
    good = encode_record(b"before", b"", 0)
    raw = bytearray(encode_record(value, key, timestamp_ns))
    index = data.draw(st.integers(min_value=4, max_value=len(raw) - 1))
    raw[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(CorruptRecordError, match=r"magic|CRC") as caught:
        decode_record(good + bytes(raw), len(good))
    assert caught.value.position == len(good)


def test_key_overrunning_the_record_is_corrupt() -> None:
    """A key_len past the record's end is corrupt even with a matching CRC."""
    raw = bytearray(encode_record(b"value", b"key", 1))
    struct.pack_into("<I", raw, 18, 100)
    with pytest.raises(CorruptRecordError, match="key overruns"):
        decode_record(_reseal(raw))


def test_header_count_overrunning_the_record_is_corrupt() -> None:
    """More headers than the record holds is corrupt even with a matching CRC."""
    raw = bytearray(encode_record(b"", b"", 1, {"a": b"b"}))
    struct.pack_into("<H", raw, 22, 2)
    with pytest.raises(CorruptRecordError, match="headers overrun"):
        decode_record(_reseal(raw))


def test_header_value_overrunning_the_record_is_corrupt() -> None:
    """A header value longer than the record is corrupt even with a matching CRC."""
    raw = bytearray(encode_record(b"", b"", 1, {"a": b"b"}))
    struct.pack_into("<I", raw, 27, 50)
    with pytest.raises(CorruptRecordError, match="header value overruns"):
        decode_record(_reseal(raw))


def test_header_name_that_is_not_utf8_is_corrupt() -> None:
    """A header name that is not UTF-8 is corrupt even with a matching CRC."""
    raw = bytearray(encode_record(b"", b"", 1, {"a": b"b"}))
    raw[26] = 0xFF
    with pytest.raises(CorruptRecordError, match="not UTF-8"):
        decode_record(_reseal(raw))


def test_timestamp_outside_int64_is_refused() -> None:
    """encode_record refuses a timestamp that does not fit the i64 field."""
    with pytest.raises(ValueError, match="signed 64-bit"):
        encode_record(b"", b"", 2**63)


def test_header_value_must_be_bytes() -> None:
    """A text header value is refused with a hint to encode it."""
    with pytest.raises(TypeError, match=r"\.encode\(\)"):
        encode_record(b"", b"", 0, {"a": "text"})  # type: ignore[dict-item]


def test_header_name_must_be_text() -> None:
    """A bytes header name is refused."""
    with pytest.raises(TypeError, match="header names are str"):
        encode_record(b"", b"", 0, {b"a": b"x"})  # type: ignore[dict-item]


def test_magic_is_version_one() -> None:
    """Format version 1 records carry the magic byte 0xAD."""
    assert MAGIC_V1 == 0xAD
    assert encode_record(b"", b"", 0)[8] == 0xAD


# -- batches -------------------------------------------------------------------------------------

batches = st.lists(st.tuples(values, keys, timestamps, headers), min_size=1, max_size=20)


@given(batches, st.integers(min_value=0, max_value=5), st.integers(min_value=0, max_value=10**12))
def test_decode_messages_round_trip(
    batch: list[tuple[bytes, bytes, int, dict[str, bytes]]], partition: int, first_offset: int
) -> None:
    """A batch of records decodes to Messages numbered from the first offset."""
    buf = b"".join(encode_record(*fields) for fields in batch)
    messages = decode_messages(buf, partition, first_offset, len(batch))
    assert messages == [
        Message(partition, first_offset + i, ts, key, value, hdrs) for i, (value, key, ts, hdrs) in enumerate(batch)
    ]
    assert all(type(m) is Message for m in messages)


def test_decode_messages_without_headers_share_the_empty_mapping() -> None:
    """Messages without headers carry the read-only empty mapping."""
    (message,) = decode_messages(encode_record(b"v", b"k", 1), 0, 0, 1)
    assert message.headers is EMPTY_HEADERS


@given(batches)
def test_scan_records_finds_every_record(batch: list[tuple[bytes, bytes, int, dict[str, bytes]]]) -> None:
    """scan_records gives the position, size and timestamp of each record in order."""
    records = [encode_record(*fields) for fields in batch]
    positions = [sum(map(len, records[:i])) for i in range(len(records))]
    expected = [RecordExtent(p, len(r), f[2]) for p, r, f in zip(positions, records, batch, strict=True)]
    assert list(scan_records(b"".join(records))) == expected


@given(batches, st.data())
def test_scan_records_stops_quietly_at_a_torn_tail(
    batch: list[tuple[bytes, bytes, int, dict[str, bytes]]], data: st.DataObject
) -> None:
    """A buffer cut inside its last record yields the records before it, without error."""
    records = [encode_record(*fields) for fields in batch]
    buf = b"".join(records)
    cut = data.draw(st.integers(min_value=len(buf) - len(records[-1]), max_value=len(buf) - 1))
    assert len(list(scan_records(buf[:cut]))) == len(records) - 1


def test_scan_records_raises_at_the_first_bad_record() -> None:
    """scan_records raises CorruptRecordError at the position of the first bad record."""
    first, second = encode_record(b"a", b"", 1), bytearray(encode_record(b"b", b"", 2))
    second[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC") as caught:
        list(scan_records(first + bytes(second) + encode_record(b"c", b"", 3)))
    assert caught.value.position == len(first)


def _three_records() -> list[bytes]:
    return [encode_record(f"value {i}".encode(), b"key", i) for i in range(3)]


def test_decode_messages_reports_a_bad_crc_at_the_record() -> None:
    """A CRC mismatch inside a batch is reported at that record's first byte."""
    records = _three_records()
    damaged = bytearray(records[2])
    damaged[-1] ^= 0x01
    buf = records[0] + records[1] + bytes(damaged)
    with pytest.raises(CorruptRecordError, match="CRC") as caught:
        decode_messages(buf, 0, 0, 3)
    assert caught.value.position == len(records[0]) + len(records[1])


def test_decode_messages_reports_a_bad_magic_at_the_record() -> None:
    """A wrong magic byte inside a batch is reported at that record's first byte."""
    records = _three_records()
    damaged = bytearray(records[1])
    damaged[8] = 0
    with pytest.raises(CorruptRecordError, match="magic") as caught:
        decode_messages(records[0] + bytes(damaged) + records[2], 0, 0, 3)
    assert caught.value.position == len(records[0])


def test_decode_messages_reports_a_bad_size_at_the_record() -> None:
    """A size below the minimum inside a batch is reported at that record's first byte."""
    records = _three_records()
    damaged = bytearray(records[1])
    struct.pack_into("<I", damaged, 0, 3)
    with pytest.raises(CorruptRecordError, match="below the minimum") as caught:
        decode_messages(records[0] + bytes(damaged) + records[2], 0, 0, 3)
    assert caught.value.position == len(records[0])


def test_decode_messages_reports_records_running_past_the_buffer() -> None:
    """A record whose size runs past the data the index covers is corrupt at its position."""
    records = _three_records()
    buf = b"".join(records)[:-1]
    with pytest.raises(CorruptRecordError) as caught:
        decode_messages(buf, 0, 0, 3)
    assert caught.value.position == len(records[0]) + len(records[1])


def test_decode_messages_reports_fewer_records_than_entries() -> None:
    """More index entries than records is corrupt where the data ends."""
    records = _three_records()
    buf = b"".join(records)
    with pytest.raises(CorruptRecordError, match="past the end") as caught:
        decode_messages(buf, 0, 0, 4)
    assert caught.value.position == len(buf)


def test_decode_messages_reports_more_data_than_entries() -> None:
    """Data left over after the last indexed record is corrupt where the records end."""
    records = _three_records()
    with pytest.raises(CorruptRecordError, match="disagree") as caught:
        decode_messages(b"".join(records), 0, 0, 2)
    assert caught.value.position == len(records[0]) + len(records[1])


def test_decode_messages_reports_a_key_overrun() -> None:
    """A key_len past its record's end inside a batch is corrupt at that record."""
    records = _three_records()
    damaged = bytearray(records[1])
    struct.pack_into("<I", damaged, 18, 1000)
    with pytest.raises(CorruptRecordError, match="key overruns") as caught:
        decode_messages(records[0] + _reseal(damaged) + records[2], 0, 0, 3)
    assert caught.value.position == len(records[0])


def test_decode_messages_reports_a_record_over_the_limit() -> None:
    """A record above max_record_bytes inside a batch is corrupt at that record."""
    records = [encode_record(b"x" * 100, b"", 0), encode_record(b"x" * 300, b"", 1)]
    with pytest.raises(CorruptRecordError, match="above the limit") as caught:
        decode_messages(b"".join(records), 0, 0, 2, max_record_bytes=200)
    assert caught.value.position == len(records[0])


@given(batches, st.data())
def test_decode_messages_and_decode_record_agree_on_damage(
    batch: list[tuple[bytes, bytes, int, dict[str, bytes]]], data: st.DataObject
) -> None:
    """For a damaged byte anywhere, decode_messages fails at the record decode_record fails at."""
    records = [encode_record(*fields) for fields in batch]
    buf = bytearray(b"".join(records))
    index = data.draw(st.integers(min_value=0, max_value=len(buf) - 1))
    buf[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    damaged = bytes(buf)
    expected_position = None
    pos = 0
    for _ in records:
        try:
            decoded = decode_record(damaged, pos)
        except CorruptRecordError as error:
            expected_position = error.position
            break
        if decoded is NEED_MORE:
            break
        pos = decoded.end
    result = _outcome(lambda: decode_messages(damaged, 0, 0, len(records)))
    assert isinstance(result, CorruptRecordError), "a damaged batch decoded"
    assert expected_position is None or result.position == expected_position


# -- batches of same-sized records (decoded column by column) ------------------------------------


@st.composite
def uniform_batches(draw: st.DrawFn) -> list[tuple[bytes, bytes, int, dict[str, bytes]]]:
    """8 to 40 records whose values and keys all have one length each, and no headers."""
    value_size = draw(st.integers(min_value=0, max_value=40))
    key_size = draw(st.integers(min_value=0, max_value=12))
    count = draw(st.integers(min_value=8, max_value=40))
    return [
        (
            draw(st.binary(min_size=value_size, max_size=value_size)),
            draw(st.binary(min_size=key_size, max_size=key_size)),
            draw(timestamps),
            {},
        )
        for _ in range(count)
    ]


@given(uniform_batches(), st.integers(min_value=0, max_value=10**12))
def test_uniform_batch_round_trip(batch: list[tuple[bytes, bytes, int, dict[str, bytes]]], first_offset: int) -> None:
    """A batch of same-sized records decodes to exactly its Messages."""
    buf = b"".join(encode_record(*fields) for fields in batch)
    messages = decode_messages(buf, 3, first_offset, len(batch))
    assert messages == [
        Message(3, first_offset + i, ts, key, value, EMPTY_HEADERS) for i, (value, key, ts, _) in enumerate(batch)
    ]
    assert all(type(m) is Message and m.headers is EMPTY_HEADERS for m in messages)


@given(uniform_batches(), st.data())
def test_uniform_batch_damage_is_found_at_its_record(
    batch: list[tuple[bytes, bytes, int, dict[str, bytes]]], data: st.DataObject
) -> None:
    """Any damaged byte in a same-sized batch raises CorruptRecordError at the record that holds it."""
    records = [encode_record(*fields) for fields in batch]
    size = len(records[0])
    buf = bytearray(b"".join(records))
    index = data.draw(st.integers(min_value=0, max_value=len(buf) - 1))
    buf[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    result = _outcome(lambda: decode_messages(bytes(buf), 0, 0, len(records)))
    assert isinstance(result, CorruptRecordError)
    record_start = index - index % size
    if index % size >= 4:  # damage to a size field may move where the error is found
        assert result.position == record_start


def test_same_size_records_with_other_shapes_decode() -> None:
    """Same-sized records whose key lengths or headers differ still decode, each in its own shape."""
    batch = [(b"abcdefgh", b"k", 1, {}), (b"abcdefg", b"kk", 2, {}), (b"a", b"k", 3, {"x": b""})] * 4
    records = [encode_record(*fields) for fields in batch]
    assert len({len(r) for r in records}) == 1
    assert decode_messages(b"".join(records), 0, 0, len(batch)) == [
        Message(0, i, ts, key, value, hdrs) for i, (value, key, ts, hdrs) in enumerate(batch)
    ]


def test_uniform_batch_over_the_record_limit_is_corrupt() -> None:
    """Same-sized records above max_record_bytes are refused like any others."""
    buf = b"".join(encode_record(b"x" * 100, b"", i) for i in range(10))
    with pytest.raises(CorruptRecordError, match="above the limit") as caught:
        decode_messages(buf, 0, 0, 10, max_record_bytes=100)
    assert caught.value.position == 0


# -- encode_batch --------------------------------------------------------------------------------


@given(st.lists(st.tuples(values, keys, timestamps), max_size=20))
def test_encode_batch_equals_encode_record(batch: list[tuple[bytes, bytes, int]]) -> None:
    """encode_batch gives, record for record, the bytes encode_record gives."""
    encoded = encode_batch([v for v, _, _ in batch], [k for _, k, _ in batch], [t for _, _, t in batch])
    assert encoded == [encode_record(v, k, t) for v, k, t in batch]


@given(st.lists(st.tuples(values, keys, timestamps, st.one_of(st.none(), headers)), max_size=10))
def test_encode_batch_with_headers_equals_encode_record(
    batch: list[tuple[bytes, bytes, int, dict[str, bytes] | None]],
) -> None:
    """encode_batch with per-record headers matches encode_record too."""
    columns = list(zip(*batch, strict=True)) if batch else [[], [], [], []]
    assert encode_batch(*columns) == [encode_record(*fields) for fields in batch]  # type: ignore[arg-type]


def test_encode_batch_refuses_a_timestamp_outside_int64() -> None:
    """encode_batch refuses a timestamp that does not fit the i64 field, like encode_record."""
    with pytest.raises(ValueError, match="signed 64-bit"):
        encode_batch([b""], [b""], [2**63])


def test_encode_batch_refuses_columns_of_different_lengths() -> None:
    """Values, keys and timestamps must pair up one to one."""
    with pytest.raises(ValueError, match="zip"):
        encode_batch([b"a", b"b"], [b"k"], [1, 2])


# -- scan_columns (recovery's check) -------------------------------------------------------------


def _reference_scan(buf: bytes) -> tuple[list[int], int | None]:
    """Record positions and the error position, walking with decode_record one record at a time."""
    positions: list[int] = []
    pos = 0
    while pos < len(buf):
        try:
            decoded = decode_record(buf, pos)
        except CorruptRecordError as error:
            return positions, error.position
        if decoded is NEED_MORE:
            break
        positions.append(pos)
        pos = decoded.end
    return positions, None


@given(batches, st.data())
def test_scan_columns_agrees_with_decode_record(
    batch: list[tuple[bytes, bytes, int, dict[str, bytes]]], data: st.DataObject
) -> None:
    """On damaged, cut or extended data, scan_columns finds the records and the stop decode_record finds."""
    buf = bytearray(b"".join(encode_record(*fields) for fields in batch))
    for _ in range(data.draw(st.integers(min_value=0, max_value=2))):
        index = data.draw(st.integers(min_value=0, max_value=len(buf) - 1))
        buf[index] ^= data.draw(st.integers(min_value=1, max_value=255))
    cut = data.draw(st.integers(min_value=0, max_value=len(buf)))
    damaged = bytes(buf[:cut]) + data.draw(st.binary(max_size=30))
    positions, error_position = _reference_scan(damaged)
    scanned = scan_columns(damaged)
    assert scanned.positions == positions
    assert (scanned.error.position if scanned.error else None) == error_position
    assert scanned.end == (positions[-1] + scanned.sizes[-1] if positions else 0)
    assert len(scanned.sizes) == len(scanned.timestamps) == len(positions)


@pytest.mark.parametrize(
    ("tag", "error", "says"),
    [
        ("", InvalidArgumentError, "1 to 255 bytes"),
        ("é" * 128, InvalidArgumentError, "256 bytes"),
        (b"created", TypeError, "a tag is a str"),
        ("\udc80", InvalidArgumentError, "surrogate"),
    ],
    ids=["empty", "too long", "bytes", "surrogate"],
)
def test_a_bad_tag_is_refused_with_what_to_give(tag: object, error: type[Exception], says: str) -> None:
    """A tag is 1 to 255 bytes of UTF-8 given as str; anything else is refused saying so."""
    with pytest.raises(error, match=says):
        encode_record(b"v", b"k", 0, None, 0, tag)  # type: ignore[arg-type]


def test_a_tag_round_trips_through_every_decoder() -> None:
    """decode_record, decode_messages and the scans all read a tagged record whole, tag included."""
    record = encode_record(b"value", b"key", 7, {"h": b"x"}, 0, "paid")
    decoded = decode_record(record)
    assert not isinstance(decoded, NeedMore)
    assert (decoded.tag, decoded.key, decoded.value, dict(decoded.headers)) == ("paid", b"key", b"value", {"h": b"x"})
    assert decode_messages(record, 0, 0, 1)[0].tag == "paid"
    assert scan_columns(record).end == len(record)


def wide_buffers() -> list[memoryview]:
    """Views whose items are wider than a byte, or not one run of bytes: len() is not their size."""
    import array

    return [
        memoryview(array.array("I", [0x41414141, 0x42424242])),
        memoryview(array.array("d", [1.5, -2.0, 3.25])),
        memoryview(bytes(range(24))).cast("B", (4, 6)),
        memoryview(bytes(range(40)))[::3],
    ]


@pytest.mark.parametrize("view", wide_buffers(), ids=["u32", "f64", "2-d", "strided"])
def test_a_header_value_given_as_a_view_of_wide_items_is_stored_whole(view: memoryview) -> None:
    """A header value that is a view of wider items (array('I'), a numpy array, a 2-D or strided
    view) is stored as all of its bytes, with their count as its length: it reads back equal, and
    the value after it is untouched (one record and a batch, on either core)."""
    whole = view.tobytes()
    record = encode_record(b"VALUE", b"k", 1, {"h": view})  # type: ignore[dict-item]
    (batched,) = encode_batch([b"VALUE"], [b"k"], [1], [{"h": view}])  # type: ignore[list-item]
    assert batched == record
    assert len(record) == encoded_size(b"VALUE", b"k", {"h": view})  # type: ignore[dict-item]
    (message,) = decode_messages(record, 0, 0, 1)
    assert (dict(message.headers), message.value) == ({"h": whole}, b"VALUE")


@pytest.mark.parametrize(
    "encode",
    [
        lambda: encode_record(b"v", b"k", 0, {"\ud800": b"x"}),
        lambda: encode_batch([b"v"], [b"k"], [0], [{"ok": b"", "\udcff": b"x"}]),
        lambda: encoded_size(b"v", b"k", {"\ud800": b"x"}),
        lambda: place("\udcff", 3),
    ],
    ids=["header name", "header name in a batch", "size of a header name", "key"],
)
def test_a_lone_surrogate_in_a_key_or_header_name_is_an_invalid_argument(encode: Callable[[], object]) -> None:
    """A key or header name UTF-8 cannot store (a lone surrogate, as os.fsdecode makes of bytes that
    are not UTF-8) is refused with InvalidArgumentError naming it, as a tag is."""
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        encode()
