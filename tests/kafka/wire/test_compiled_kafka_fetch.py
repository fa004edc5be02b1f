"""The compiled ``kafka_batch_from_stored`` against its pure-Python reference: the same batch, or None alike.

A Fetch turns a run of stored records straight into one Kafka record batch in one compiled call;
its reference decodes them to Messages and encodes those. Both must give the same bytes for any
records (nulls, header order, the nulls header, tags, compressed values, timestamps before 1970),
and None alike for damaged runs, wrong counts, noise and the records the Messages' path must handle
(a repeated header name, too many headers).
"""

from __future__ import annotations

import mmap
import pathlib
from collections.abc import Callable

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.compression import stream_dictionary

import adiskq
from adiskq import _compiled
from adiskq._sansio import codec
from adiskq._sansio.compression import COMPRESSED, DICTIONARY_ID_BASE, Dictionaries, ReferenceDictionary
from adiskq._storage.stream import StreamReader
from adiskq.kafka.wire.batch import KafkaRecord, decode_batches, encode_batch_from_messages
from adiskq.kafka.wire.codec import crc32c
from adiskq.kafka.wire.mapping import MAX_PLAIN_HEADERS, NULLS_HEADER
from adiskq.kafka.wire.stored_batch import batch_from_stored, batch_from_stored_reference

LIMIT = 1 << 20
names = st.sampled_from(
    ["a", "b", "é", "", "x" * 3, NULLS_HEADER, NULLS_HEADER + "~", NULLS_HEADER + "~~", NULLS_HEADER + "x"]
)
# What the nulls header may say: the gateway's three texts, and what a library producer might write.
nulls_texts = st.sampled_from([b"key", b"value", b"key,value", b"value,key", b"", b"keys", b"x,key,y", b","])
header_values = st.one_of(st.binary(max_size=8), nulls_texts)
timestamps = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, -999_999, -1_000_000, -1_000_001, 1_700_000_000_123_456_789]),
)


def dictionaries() -> Dictionaries:
    """A stream's dictionaries holding version 1, made ready for both cores."""
    ready = Dictionaries(lambda version: stream_dictionary(version, seed=version))
    ready.need(DICTIONARY_ID_BASE + 1, 0)
    return ready


COMPRESSOR = ReferenceDictionary(1, stream_dictionary(1, seed=1), 3)
DICTIONARIES = dictionaries()


@st.composite
def stored_record(draw: st.DrawFn) -> bytes:
    """One record as a producer stores it: any key, value, headers, tag and timestamp, its value
    compressed or not."""
    value = draw(st.binary(max_size=40))
    headers = draw(st.dictionaries(names, header_values, max_size=4))
    tag = draw(st.one_of(st.none(), st.sampled_from(["t", "é"])))
    attributes = codec.KEYLESS if draw(st.booleans()) else 0  # a push given no key: a null key
    if draw(st.booleans()):
        value, attributes = COMPRESSOR.compress(value), attributes | COMPRESSED
    return codec.encode_record(value, draw(st.binary(max_size=12)), draw(timestamps), headers, attributes, tag)


def compare(
    data: bytes | memoryview, first_offset: int, count: int, nulls_header: str | None = NULLS_HEADER
) -> bytes | None:
    """Both functions on ``data``: the same bytes, or None alike; the reference's."""
    want = batch_from_stored_reference(
        data,
        first_offset,
        count,
        max_record_bytes=LIMIT,
        dictionaries=DICTIONARIES,
        nulls_header=nulls_header,
        partition_leader_epoch=3,
    )
    got = _compiled.kafka_batch_from_stored(data, first_offset, count, LIMIT, DICTIONARIES.compiled, nulls_header, 3)
    assert got == want
    return want


def with_crc(record: bytearray) -> bytes:
    """The record with its CRC-32C made right again (bytes after the magic byte were changed)."""
    record[4:8] = crc32c(bytes(record[8:])).to_bytes(4, "little")
    return bytes(record)


def test_the_compiled_function_is_in_use() -> None:
    """A built core answers a Fetch with the compiled function."""
    assert batch_from_stored(
        codec.encode_record(b"v", b"k", 5), 0, 1, max_record_bytes=LIMIT, dictionaries=None, nulls_header=None
    ) == _compiled.kafka_batch_from_stored(codec.encode_record(b"v", b"k", 5), 0, 1, LIMIT, None, None, 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(stored_record(), min_size=1, max_size=8),
    st.integers(min_value=0, max_value=2**63 - 9),
    st.sampled_from([NULLS_HEADER, None, "a"]),
)
def test_any_records_make_the_batch_the_reference_makes(records: list[bytes], first: int, nulls: str | None) -> None:
    """Nulls named by any text, the nulls header or none, tags, compressed values, any timestamp:
    the same batch, byte for byte."""
    assert compare(b"".join(records), first, len(records), nulls) is not None


def test_records_go_to_kafka_by_the_mapping_rules() -> None:
    """A key or value the nulls header names goes out null (that header left out), an empty one as
    empty, headers in their stored order, nanoseconds floored to milliseconds, offsets from the first."""
    records = [
        codec.encode_record(b"", b"", 1_700_000_000_123_999_999, {"z": b"1", NULLS_HEADER: b"key", "a": b""}),
        codec.encode_record(b"", b"k", -1, {NULLS_HEADER: b"value"}),
        codec.encode_record(b"", b"", 5_000_000, {NULLS_HEADER: b"key,value"}),
        codec.encode_record(b"", b"", 7, None),
        codec.encode_record(COMPRESSOR.compress(b"packed" * 20), b"c", 9, None, COMPRESSED),
    ]
    batch = compare(b"".join(records), 41, len(records))
    assert batch is not None
    (decoded,) = decode_batches(batch)
    assert decoded.base_offset == 41
    assert decoded.partition_leader_epoch == 3
    assert decoded.records == [
        KafkaRecord(0, 1_700_000_000_123, None, b"", [("z", b"1"), ("a", b"")]),
        KafkaRecord(1, -1, b"k", None, []),
        KafkaRecord(2, 5, None, None, []),
        KafkaRecord(3, 0, b"", b"", []),
        KafkaRecord(4, 0, b"c", b"packed" * 20, []),
    ]


def test_a_keyless_push_goes_out_with_a_null_key() -> None:
    """A library push given no key (attributes bit 4) reaches a Kafka client as Kafka's null key,
    as it would from a Kafka cluster; its generated bytes stay on disk for the library's readers."""
    records = [
        codec.encode_record(b"a", b"\x01" * 8, 5, None, codec.KEYLESS),
        codec.encode_record(b"b", b"\x02" * 8, 6, None),
        codec.encode_record(COMPRESSOR.compress(b"c" * 50), b"\x03" * 8, 7, {"h": b"1"}, codec.KEYLESS | COMPRESSED),
    ]
    batch = compare(b"".join(records), 0, len(records))
    assert batch is not None
    (decoded,) = decode_batches(batch)
    assert [(record.key, record.value) for record in decoded.records] == [
        (None, b"a"),
        (b"\x02" * 8, b"b"),
        (None, b"c" * 50),
    ]


def test_repeated_or_too_many_headers_are_none_in_both() -> None:
    """A record repeating a header name (which Messages merge) or with more than MAX_PLAIN_HEADERS
    headers makes the run None, so the Messages' path handles it."""
    plain = codec.encode_record(b"v", b"k", 1)
    repeated = bytearray(codec.encode_record(b"v", b"k", 1, {"a": b"1", "b": b"2"}))
    at = repeated.index(b"b\x01\x00\x00\x00")
    repeated[at : at + 1] = b"a"
    assert compare(plain + with_crc(repeated), 0, 2) is None
    many = {f"h{i}": b"" for i in range(MAX_PLAIN_HEADERS + 1)}
    assert compare(plain + codec.encode_record(b"v", b"k", 1, many), 0, 2) is None
    most = {f"h{i}": b"" for i in range(MAX_PLAIN_HEADERS)}
    assert compare(plain + codec.encode_record(b"v", b"k", 1, most), 0, 2) is not None


@pytest.mark.parametrize("limit", [0, 23, 24, 60, 61])
def test_a_record_over_max_record_bytes_is_none_in_both(limit: int) -> None:
    """A record larger than ``max_record_bytes`` is damage to both, as to every reader."""
    record = codec.encode_record(b"v" * 30, b"k", 1)  # 61 bytes
    want = batch_from_stored_reference(
        record, 0, 1, max_record_bytes=limit, dictionaries=None, nulls_header=NULLS_HEADER
    )
    assert _compiled.kafka_batch_from_stored(record, 0, 1, limit, None, NULLS_HEADER, 0) == want
    assert (want is None) == (limit < len(record))


def test_a_value_whose_dictionary_is_not_ready_is_none() -> None:
    """A compressed value without its prepared dictionary: None from the compiled function, so the
    Messages' path loads the dictionary and decodes it."""
    record = codec.encode_record(COMPRESSOR.compress(b"value"), b"k", 1, None, COMPRESSED)
    assert _compiled.kafka_batch_from_stored(record, 0, 1, LIMIT, None, NULLS_HEADER, 0) is None
    assert _compiled.kafka_batch_from_stored(record, 0, 1, LIMIT, {}, NULLS_HEADER, 0) is None


@st.composite
def damaged_runs(draw: st.DrawFn) -> tuple[bytes, int]:
    """A valid run with bytes changed, cut or inserted, and a count that may be wrong."""
    records = draw(st.lists(stored_record(), min_size=1, max_size=4))
    data = bytearray(b"".join(records))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        choice = draw(st.integers(min_value=0, max_value=3))
        if choice == 0 and data:
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif choice == 1:
            del data[at:]
        elif choice == 2:
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        elif len(data) >= len(records[0]):  # a field of the first record changed, its CRC made to agree
            first = len(records[0])
            data[at % first] = draw(st.integers(min_value=0, max_value=255))
            data[:first] = with_crc(data[:first])
    count = max(1, len(records) + draw(st.sampled_from([0, 0, 0, -1, 1, 5])))
    return bytes(data), count


@settings(max_examples=400, deadline=None)
@given(damaged_runs())
def test_damaged_runs_are_none_or_the_reference_batch(damaged: tuple[bytes, int]) -> None:
    """Damaged bytes and wrong counts: the reference's batch where the records still hold, else None in both."""
    compare(damaged[0], 0, damaged[1])


@given(st.binary(max_size=200), st.integers(min_value=1, max_value=12))
def test_noise_is_none_as_in_the_reference(data: bytes, count: int) -> None:
    """Random bytes: None just where the reference says None."""
    compare(data, 0, count)


def test_a_run_in_a_mapped_segment_is_read_in_place(tmp_path: pathlib.Path) -> None:
    """The run as a view of a mapped file (a sealed segment's), or a bytearray: the same batch."""
    data = b"".join(codec.encode_record(b"v%d" % i, b"k%d" % i, i, {"h": b"%d" % i}) for i in range(50))
    path = tmp_path / "data"
    path.write_bytes(data)
    want = compare(data, 7, 50)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, prot=mmap.PROT_READ) as mapping:
        view = memoryview(mapping)
        assert compare(view[: len(data)], 7, 50) == want
        view.release()
    assert compare(bytearray(data), 7, 50) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: _compiled.kafka_batch_from_stored(b"", 0, 1, LIMIT, None, None), TypeError),
        (lambda: _compiled.kafka_batch_from_stored("text", 0, 1, LIMIT, None, None, 0), TypeError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", -1, 1, LIMIT, None, None, 0), ValueError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 2**63 - 1, 2, LIMIT, None, None, 0), ValueError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 2**64, 1, LIMIT, None, None, 0), OverflowError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 0, LIMIT, None, None, 0), ValueError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 2**31, LIMIT, None, None, 0), ValueError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1.5, LIMIT, None, None, 0), TypeError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1, -1, None, None, 0), ValueError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1, LIMIT, [], None, 0), TypeError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1, LIMIT, None, b"null", 0), TypeError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1, LIMIT, None, "\ud800", 0), UnicodeEncodeError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1, LIMIT, None, None, 2**31), ValueError),
        (lambda: _compiled.kafka_batch_from_stored(b"abc", 0, 1, LIMIT, None, None, None), TypeError),
    ],
)
def test_the_compiled_function_checks_every_argument(call: Callable[[], object], error: type[Exception]) -> None:
    """Wrong counts, types and ranges of arguments raise, never read out of bounds."""
    with pytest.raises(error):
        call()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((-1, 1, LIMIT, 0), ValueError),
        ((2**63 - 1, 2, LIMIT, 0), ValueError),
        ((0, 0, LIMIT, 0), ValueError),
        ((0, 1.5, LIMIT, 0), TypeError),
        ((0, 1, LIMIT, 2**31), ValueError),
    ],
)
def test_the_reference_checks_the_same_arguments(arguments: tuple[int, int, int, int], error: type[Exception]) -> None:
    """The reference refuses what the compiled function refuses, with the same error type."""
    first, count, limit, epoch = arguments
    with pytest.raises(error):
        batch_from_stored_reference(
            b"abc",
            first,
            count,
            max_record_bytes=limit,
            dictionaries=None,
            nulls_header=None,
            partition_leader_epoch=epoch,
        )


def test_a_stream_read_straight_gives_what_its_messages_give(tmp_path: pathlib.Path) -> None:
    """A stream's segment, read as stored bytes, makes the batch its Messages make."""

    async def write() -> None:
        async with adiskq.Producer(str(tmp_path / "s")) as producer:
            await producer.push_many(
                [adiskq.Record(b"v%d" % i, key=b"k%d" % i, headers={"n": b"%d" % i}) for i in range(300)]
            )

    anyio.run(write)
    reader = StreamReader.open(str(tmp_path / "s"))
    cursor = reader.partition(0).cursor(0)
    run = cursor.peek_stored(300)
    assert run is not None
    assert (run.first_offset, run.record_count) == (0, 300)
    batch = batch_from_stored(
        run.data,
        0,
        300,
        max_record_bytes=run.max_record_bytes,
        dictionaries=run.dictionaries,
        nulls_header=NULLS_HEADER,
    )
    assert cursor.position == 0  # peeking leaves the position
    assert batch == encode_batch_from_messages(cursor.read(300), nulls_header=NULLS_HEADER)
    cursor.close()
