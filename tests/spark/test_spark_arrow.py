"""The Arrow fast path of the Spark reader: the same batches as the reference decoder, every CRC checked."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from adiskq import CorruptRecordError
from adiskq._sansio.codec import DEFAULT_MAX_RECORD_BYTES, crc32c, decode_messages, encode_record
from adiskq._storage.columns import RawRun
from adiskq.spark import SCHEMA
from adiskq.spark._arrow import ARROW_SCHEMA, CRC_RESET, messages_to_batch, run_to_batch

_INDEX = struct.Struct("<QQQ")
Item = tuple[bytes, bytes, int, dict[str, bytes] | None]  # key, value, timestamp_ns, headers

records = st.lists(
    st.tuples(
        st.binary(max_size=20),  # key: inline (<= 12 bytes) and not
        st.binary(max_size=40),  # value: empty, inline and not
        st.integers(-(2**62), 2**62),  # timestamp_ns
        st.none() | st.dictionaries(st.text(max_size=5), st.binary(max_size=15), max_size=3),
    ),
    min_size=1,
    max_size=40,
)


@st.composite
def uniform_records(draw: st.DrawFn) -> list[Item]:
    """Records of one size and key length (the strided fast path), sometimes one with headers."""
    key_length = draw(st.integers(0, 20))
    value_length = draw(st.integers(0, 40))
    count = draw(st.integers(1, 40))
    items: list[Item] = [
        (
            draw(st.binary(min_size=key_length, max_size=key_length)),
            draw(st.binary(min_size=value_length, max_size=value_length)),
            draw(st.integers(-(2**62), 2**62)),
            None,
        )
        for _ in range(count)
    ]
    if draw(st.booleans()):
        key, value, stamp, _ = items[-1]
        items[-1] = (key, value[:-8] if len(value) >= 8 else value, stamp, {"h": b""})  # same size as the rest, or not
    return items


def make_run(encoded: list[bytes], *, first_offset: int = 7, data_position: int = 100) -> RawRun:
    """A run as RawSegment.read returns it, for records lying back to back from ``data_position``."""
    entries = []
    position = data_position
    for i, record in enumerate(encoded):
        entries.append(_INDEX.pack(first_offset + i, position, len(record)))
        position += len(record)
    return RawRun(3, first_offset, len(encoded), b"".join(entries), b"".join(encoded), data_position, "/s/x.data")


def encode_all(items: list[Item]) -> list[bytes]:
    return [encode_record(value, key, stamp, headers) for key, value, stamp, headers in items]


def test_arrow_schema_is_what_spark_expects_of_the_source_schema() -> None:
    """The batches' schema equals the Arrow form of the source's Spark schema (Spark checks it)."""
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_crc_reset_brings_crc32c_back_to_its_start() -> None:
    """CRC-32C of body, its CRC and CRC_RESET is 0, whatever the body."""
    for body in (b"", b"x", bytes(range(256)) * 3):
        tail = struct.pack("<II", crc32c(body), CRC_RESET)
        assert crc32c(body + tail) == 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_fast_batches_equal_the_reference_decoders(items: list[Item]) -> None:
    """For any records, the vectorised batch equals the one built from decode_messages."""
    encoded = encode_all(items)
    run = make_run(encoded)
    expected = messages_to_batch(decode_messages(run.data, 3, 7, len(encoded)))
    got = run_to_batch(run, max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
    assert got.schema.equals(ARROW_SCHEMA)
    assert got.to_pylist() == expected.to_pylist()


def test_batches_carry_partition_offsets_and_microsecond_timestamps() -> None:
    """Partition and offsets come from the run; timestamps are cut to microseconds, in UTC."""
    run = make_run(encode_all([(b"k", b"a", 1_500_999, None), (b"k", b"b", 2_000_000, {"h": b"1"})]))
    batch = run_to_batch(run, max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
    assert batch.column("partition").to_pylist() == [3, 3]
    assert batch.column("offset").to_pylist() == [7, 8]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1_500, 2_000]
    assert batch.column("headers").to_pylist() == [[], [("h", b"1")]]


@settings(max_examples=100, deadline=None)
@given(uniform_records())
def test_uniform_runs_equal_the_reference_decoders(items: list[Item]) -> None:
    """Runs of same-size records (the strided path) decode exactly like the reference."""
    encoded = encode_all(items)
    run = make_run(encoded)
    expected = messages_to_batch(decode_messages(run.data, 3, 7, len(encoded)))
    assert run_to_batch(run, max_record_bytes=DEFAULT_MAX_RECORD_BYTES).to_pylist() == expected.to_pylist()


@settings(max_examples=100, deadline=None)
@given(st.one_of(records, uniform_records()), st.data())
def test_a_damaged_byte_is_reported_with_its_record_position(items: list[Item], data: st.DataObject) -> None:
    """Flipping any byte a CRC covers raises CorruptRecordError at the damaged record's position."""
    encoded = encode_all(items)
    victim = data.draw(st.integers(0, len(encoded) - 1))
    record = bytearray(encoded[victim])
    spot = data.draw(st.integers(9, len(record) - 1))  # after size, CRC and magic
    record[spot] ^= 1 << data.draw(st.integers(0, 7))
    encoded[victim] = bytes(record)
    run = make_run(encoded)
    with pytest.raises(CorruptRecordError) as caught:
        run_to_batch(run, max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
    assert caught.value.path == "/s/x.data"
    assert caught.value.position == run.data_position + sum(map(len, encoded[:victim]))


def test_damage_in_two_records_is_still_found() -> None:
    """Two damaged records, the same damage in each: the first is named."""
    encoded = encode_all([(b"key", b"value-%d" % i, i, None) for i in range(10)])
    for victim in (2, 6):
        record = bytearray(encoded[victim])
        record[-1] ^= 0xFF
        encoded[victim] = bytes(record)
    with pytest.raises(CorruptRecordError) as caught:
        run_to_batch(make_run(encoded, data_position=0), max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
    assert caught.value.position == sum(map(len, encoded[:2]))


def test_the_data_decides_when_a_middle_index_entry_disagrees() -> None:
    """A damaged entry inside a run does not change what is read: .data is the source of truth."""
    encoded = encode_all([(b"k", b"v%d" % i, i, None) for i in range(3)])
    run = make_run(encoded)
    entries = bytearray(run.entries)
    entries[24:48] = _INDEX.pack(99, 12345, 5)
    batch = run_to_batch(run._replace(entries=bytes(entries)), max_record_bytes=DEFAULT_MAX_RECORD_BYTES)
    assert batch.column("offset").to_pylist() == [7, 8, 9]
    assert batch.column("value").to_pylist() == [b"v0", b"v1", b"v2"]
