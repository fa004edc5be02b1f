"""Kafka record batches (v2): what a Kafka client sends is read exactly, what the gateway writes a
client reads exactly, and hostile bytes end in a clear KafkaBatchError.

Known bytes come from kafka-python's own record batch codec (a real client's), so the format is
not only checked against itself.
"""

from __future__ import annotations

import contextlib
import pickle
import struct
import warnings
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq._sansio.values import EMPTY_HEADERS, Message
from adiskq.kafka.wire import codec as kafka_codec
from adiskq.kafka.wire import compression as kafka_compression
from adiskq.kafka.wire.batch import (
    KafkaBatch,
    KafkaBatchError,
    KafkaCorruptBatchError,
    KafkaRecord,
    KafkaUnsupportedBatchError,
    decode_batches,
    encode_batch,
    encode_batch_from_messages,
)

with warnings.catch_warnings():
    # kafka-python's package import reads its protocol schemas with a deprecated importlib call.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

CODECS = [0, 1, 2, 3, 4]
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
header_lists = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=4)


@st.composite
def record_lists(draw: st.DrawFn) -> tuple[int, list[KafkaRecord]]:
    """A base timestamp and records around it, with increasing offset deltas."""
    base = draw(st.integers(min_value=-(2**62), max_value=2**62))
    count = draw(st.integers(min_value=1, max_value=6))
    gaps = draw(st.lists(st.integers(min_value=1, max_value=3), min_size=count, max_size=count))
    records = []
    delta = draw(st.integers(min_value=0, max_value=5))
    for gap in gaps:
        records.append(
            KafkaRecord(
                delta,
                base + draw(st.integers(min_value=-(2**40), max_value=2**40)),
                draw(st.one_of(st.none(), st.binary(max_size=20))),
                draw(st.one_of(st.none(), st.binary(max_size=200))),
                draw(header_lists),
            )
        )
        delta += gap
    return base, records


# kafka-python's DefaultRecordBatchBuilder: producer 7, epoch 1, base sequence 3; record 0 at
# 1700000000000 ms, key b"k1", value b"hello", headers [("h", b"x"), ("h", None)]; record 1 five
# milliseconds later with a null key, a null value and no headers.
KNOWN_BATCH = bytes.fromhex(
    "00000000000000000000004d00000000021ac408bf0000000000010000018bcfe568000000018bcfe568050000000000"
    "0000070001000000030000000228000000046b310a68656c6c6f04026802780268010c000a02010100"
)
KNOWN_DECODED = KafkaBatch(
    base_offset=0,
    partition_leader_epoch=0,
    attributes=0,
    last_offset_delta=1,
    base_timestamp_ms=1700000000000,
    max_timestamp_ms=1700000000005,
    producer_id=7,
    producer_epoch=1,
    base_sequence=3,
    records=[
        KafkaRecord(0, 1700000000000, b"k1", b"hello", [("h", b"x"), ("h", None)]),
        KafkaRecord(1, 1700000000005, None, None, []),
    ],
)


def kafka_python_batch(records: list[KafkaRecord], codec: int, producer_id: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    for record in records:
        builder.append(record.offset_delta, record.timestamp_ms, record.key, record.value, record.headers)
    return bytes(builder.build())


def kafka_python_read(batch: bytes) -> list[KafkaRecord]:
    decoded = DefaultRecordBatch(batch)
    assert decoded.validate_crc()
    return [KafkaRecord(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decoded]


def with_crc(batch: bytearray) -> bytes:
    """The batch with its CRC-32C recomputed (after a test changed a field the CRC covers)."""
    struct.pack_into(">I", batch, kafka_codec.CRC_AT, kafka_codec.crc32c(bytes(batch[kafka_codec.ATTRIBUTES_AT :])))
    return bytes(batch)


def fault(data: bytes, **kwargs: int) -> KafkaBatchError:
    with pytest.raises(KafkaBatchError) as caught:
        decode_batches(data, **kwargs)
    return caught.value


# -- known bytes --------------------------------------------------------------------------------------


def test_a_batch_kafka_python_built_decodes_field_for_field() -> None:
    """Every header field and record of a real client's batch, null key and value and repeated headers included."""
    assert decode_batches(KNOWN_BATCH) == [KNOWN_DECODED]


def test_encoding_those_records_gives_kafka_pythons_bytes() -> None:
    """encode_batch writes what the client's own encoder writes for the same batch, byte for byte."""
    encoded = encode_batch(
        base_offset=0,
        records=KNOWN_DECODED.records,
        base_timestamp_ms=1700000000000,
        producer_id=7,
        producer_epoch=1,
        base_sequence=3,
    )
    assert encoded == KNOWN_BATCH


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_a_client_compresses_with_is_read(codec: int) -> None:
    """gzip, snappy (xerial), lz4 and zstd batches from kafka-python decode to the records it was given."""
    records = [KafkaRecord(i, 1700000000000 + i, b"key-%d" % i, b"value " * 50, [("n", b"%d" % i)]) for i in range(300)]
    (batch,) = decode_batches(kafka_python_batch(records, codec, producer_id=9))
    assert batch.attributes == codec
    assert batch.records == records
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 0, 0)


@pytest.mark.parametrize("codec", CODECS)
def test_a_client_reads_every_codec_the_gateway_writes(codec: int) -> None:
    """kafka-python's reader takes encode_batch's batches, CRC and all, in every codec."""
    records = [KafkaRecord(i, 1700000000000 - i, b"k%d" % i, b"v" * i, [("a", b"1"), ("a", None)]) for i in range(500)]
    batch = encode_batch(base_offset=42, records=records, base_timestamp_ms=1700000000000, compression=codec)
    assert kafka_python_read(batch) == [r._replace(offset_delta=42 + r.offset_delta) for r in records]


def test_raw_snappy_as_librdkafka_sends_it_is_read() -> None:
    """A snappy batch compressed as one raw block (librdkafka's way) reads like a xerial one."""
    records = [KafkaRecord(0, 5, b"k", b"v" * 100, [])]
    section, _, _ = kafka_codec.encode_records(records, 5)
    plain = bytearray(encode_batch(base_offset=0, records=records, base_timestamp_ms=5))
    raw = bytes(cramjam.snappy.compress_raw(section))
    batch = plain[: kafka_codec.HEADER_BYTES] + raw
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, kafka_codec.ATTRIBUTES_AT, kafka_compression.SNAPPY)
    assert decode_batches(with_crc(batch))[0].records == records


# -- round trips -----------------------------------------------------------------------------------------


# No deadline where a codec runs: a library's first call (its tables, its context) takes far longer than the rest.
@settings(deadline=None)
@given(record_lists(), st.sampled_from(CODECS), I64, st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_any_records_round_trip_in_every_codec(
    based: tuple[int, list[KafkaRecord]], codec: int, base_offset: int, sequence: int
) -> None:
    """Keys, values, header order and repeats, nulls and timestamps come back exactly as encoded."""
    base, records = based
    batch = encode_batch(
        base_offset=base_offset,
        records=records,
        base_timestamp_ms=base,
        producer_id=3,
        producer_epoch=2,
        base_sequence=sequence,
        compression=codec,
    )
    (decoded,) = decode_batches(batch)
    latest = max(r.timestamp_ms for r in records)
    last_delta = records[-1].offset_delta
    assert decoded == KafkaBatch(base_offset, 0, codec, last_delta, base, latest, 3, 2, sequence, records)


@given(st.lists(record_lists(), min_size=1, max_size=4))
def test_batches_back_to_back_decode_in_order(batches: list[tuple[int, list[KafkaRecord]]]) -> None:
    """A records field of several batches decodes to each of them, in order."""
    data = b"".join(
        encode_batch(base_offset=i, records=records, base_timestamp_ms=base)
        for i, (base, records) in enumerate(batches)
    )
    decoded = decode_batches(memoryview(data))
    assert [(b.base_offset, b.records) for b in decoded] == [(i, r) for i, (_, r) in enumerate(batches)]


# -- hostile bytes -----------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_end_in_a_kafka_batch_error(data: bytes) -> None:
    """Noise never raises anything but KafkaBatchError."""
    with pytest.raises(KafkaBatchError):
        decode_batches(data)


@settings(deadline=None)
@given(record_lists(), st.sampled_from(CODECS), st.data())
def test_a_batch_cut_anywhere_is_refused_as_partial(
    based: tuple[int, list[KafkaRecord]], codec: int, data: st.DataObject
) -> None:
    """A records field that ends inside a batch is an error on Produce, never a shorter batch."""
    base, records = based
    batch = encode_batch(base_offset=0, records=records, base_timestamp_ms=base, compression=codec)
    cut = data.draw(st.integers(min_value=1, max_value=len(batch) - 1))
    error = fault(batch + batch[:cut])
    assert "partial batch" in str(error) or "past the end" in str(error)
    assert error.position is not None
    assert error.position >= len(batch)


@given(record_lists(), st.data())
def test_any_flipped_bit_after_the_crc_is_a_crc_mismatch(
    based: tuple[int, list[KafkaRecord]], data: st.DataObject
) -> None:
    """Damage to what the CRC covers raises KafkaCorruptBatchError at the batch."""
    base, records = based
    batch = bytearray(encode_batch(base_offset=0, records=records, base_timestamp_ms=base))
    at = data.draw(st.integers(min_value=kafka_codec.ATTRIBUTES_AT, max_value=len(batch) - 1))
    batch[at] ^= 1 << data.draw(st.integers(min_value=0, max_value=7))
    error = fault(bytes(batch))
    assert isinstance(error, KafkaCorruptBatchError)
    assert error.position == 0


def test_an_empty_records_field_is_refused() -> None:
    """Produce with no batch at all is an error, not zero records."""
    assert "no batch" in str(fault(b""))


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_other_message_formats_are_refused_by_name(magic: int) -> None:
    """Magic 0/1 (pre-0.11 clients) and unknown formats raise KafkaUnsupportedBatchError saying what is accepted."""
    batch = bytearray(KNOWN_BATCH)
    batch[kafka_codec.MAGIC_AT] = magic
    error = fault(bytes(batch))
    assert isinstance(error, KafkaUnsupportedBatchError)
    assert f"magic {magic}" in str(error)
    assert "only record batches of magic 2" in str(error)
    assert error.position == kafka_codec.MAGIC_AT


def test_control_batches_are_refused_even_from_a_transactional_producer() -> None:
    """A commit or abort marker is the broker's to write: a producer's control batch is refused."""
    batch = bytearray(KNOWN_BATCH)
    struct.pack_into(">h", batch, kafka_codec.ATTRIBUTES_AT, kafka_codec.CONTROL | kafka_codec.TRANSACTIONAL)
    for transactional in (False, True):
        with pytest.raises(KafkaUnsupportedBatchError, match="control batch") as raised:
            decode_batches(with_crc(batch), transactional=transactional)
        assert raised.value.position == kafka_codec.ATTRIBUTES_AT


def test_a_transactional_batch_is_decoded_only_for_a_transactional_request() -> None:
    """Without the request's transactional id a transactional batch is refused, saying why; with
    it, the batch decodes as any other, its attributes kept."""
    batch = bytearray(KNOWN_BATCH)
    struct.pack_into(">h", batch, kafka_codec.ATTRIBUTES_AT, kafka_codec.TRANSACTIONAL)
    data = with_crc(batch)
    with pytest.raises(KafkaUnsupportedBatchError, match=r"transactional\.id"):
        decode_batches(data)
    (decoded,) = decode_batches(data, transactional=True)
    (plain,) = decode_batches(KNOWN_BATCH)
    assert decoded.attributes == kafka_codec.TRANSACTIONAL
    assert decoded.records == plain.records
    assert kafka_codec.decode_batches(data, transactional=True) == [decoded]


def test_an_undefined_compression_codec_is_refused() -> None:
    """Codec bits 5-7 name no codec Kafka has."""
    batch = bytearray(KNOWN_BATCH)
    struct.pack_into(">h", batch, kafka_codec.ATTRIBUTES_AT, 5)
    assert isinstance(fault(with_crc(batch)), KafkaUnsupportedBatchError)


@pytest.mark.parametrize(
    ("length", "words"),
    [(-1, "below the minimum"), (48, "below the minimum"), (2**31 - 1, "past the end")],
)
def test_an_absurd_batch_length_is_refused_before_anything_is_read(length: int, words: str) -> None:
    """Negative, too-small and 2 GiB batch lengths are errors at the length field."""
    batch = bytearray(KNOWN_BATCH)
    struct.pack_into(">i", batch, 8, length)
    error = fault(bytes(batch))
    assert words in str(error)
    assert error.position == 8


@pytest.mark.parametrize(("count", "words"), [(-5, "negative"), (2**31 - 1, "ends after 2"), (1, "follow its 1")])
def test_a_record_count_that_disagrees_with_the_records_is_refused(count: int, words: str) -> None:
    """A count below, above (up to 2^31 - 1, without allocating for it) or negative is an error."""
    batch = bytearray(KNOWN_BATCH)
    struct.pack_into(">i", batch, kafka_codec.HEADER_BYTES - 4, count)
    assert words in str(fault(with_crc(batch)))


def batch_of_section(section: bytes, count: int = 1, codec: int = 0) -> bytes:
    """A batch whose records section is the given bytes (CRC right), for hand-made records."""
    batch = bytearray(KNOWN_BATCH[: kafka_codec.HEADER_BYTES]) + section
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, kafka_codec.ATTRIBUTES_AT, codec)
    struct.pack_into(">i", batch, kafka_codec.HEADER_BYTES - 4, count)
    return with_crc(batch)


@pytest.mark.parametrize(
    ("section", "words"),
    [
        (b"\x0c\x00\x00\x00\x03\x00\x00", "key length -2 is below -1"),  # key length varint 3 = -2
        (b"\x0c\x00\x00\x00\x00\x03\x00", "value length -2 is below -1"),
        (b"\x0c\x00\x00\x00\x00\x00\x01", "header count -1 is negative"),
        (b"\x0c\x00\x00\x00\x7e\x00\x00", "key of 63 bytes overruns the record"),
        (b"\x01", "record length -1 is below the minimum"),
        (b"\x0a\x00\x00\x00\x00\x00\x00", "record length 5 is below the minimum"),
        (b"\x0e\x00\x00\x00\x00\x00\x00\x00", "1 bytes follow the record's last header"),
        (b"\x0c\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "timestamp delta is cut off"),
        (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
        (b"\x80\x80\x80\x80\x10", "does not fit in 32 bits"),
        (b"\x80\x80", "record length is cut off"),
        (b"\x18\x00" + b"\xff" * 9 + b"\x03\x00\x00\x00\x00", "timestamp delta does not fit in 64 bits"),
        (b"\x0e\x00\x00\x00\x00\x00\x02\x01", "a header key is null"),
        (b"\x12\x00\x00\x00\x00\x00\x02\x02\xff\x00", "a header key is not UTF-8"),
    ],
)
def test_malformed_records_name_the_fault(section: bytes, words: str) -> None:
    """Negative lengths, overruns, over-long varints and bad header keys each say what is wrong and where."""
    error = fault(batch_of_section(section))
    assert words in str(error)
    assert "batch 0, record 0" in str(error)
    assert error.position is not None
    assert kafka_codec.HEADER_BYTES <= error.position < len(section) + 61


def test_a_timestamp_beyond_64_bits_after_adding_the_delta_is_refused() -> None:
    """base timestamp plus delta past 2^63 - 1 is an error, not a wrapped number."""
    batch = bytearray(batch_of_section(b"\x0c\x00\x02\x00\x00\x00\x00"))  # delta +1
    struct.pack_into(">q", batch, 27, 2**63 - 1)  # base_timestamp_ms
    assert "does not fit in 64 bits" in str(fault(with_crc(batch)))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_a_decompression_bomb_stops_at_max_bytes(codec: int) -> None:
    """64 MiB of zeros compressed into a small batch stops at max_bytes with a KafkaBatchError, quickly."""
    zeros = bytes(64 * 2**20)
    compressed = kafka_compression.compress(codec, zeros)
    assert len(compressed) < 4 * 2**20
    error = fault(batch_of_section(compressed, count=1, codec=codec), max_bytes=2**20)
    assert f"more than the {2**20} bytes allowed" in str(error)


def test_max_bytes_bounds_the_whole_call_not_each_batch() -> None:
    """Many batches each under max_bytes but together over it are refused."""
    batch = encode_batch(base_offset=0, records=[KafkaRecord(0, 0, None, b"x" * 1000, [])], base_timestamp_ms=0)
    decode_batches(batch * 3, max_bytes=3 * 1100)
    assert "more than 2000 bytes of records" in str(fault(batch * 3, max_bytes=2000))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_in_a_compressed_batch_is_a_batch_error(codec: int) -> None:
    """Bytes that are not the codec's format raise KafkaBatchError naming the codec."""
    error = fault(batch_of_section(b"\x00\x01garbage" * 8, codec=codec))
    assert kafka_compression.NAMES[codec] in str(error)


def test_a_truncated_gzip_member_is_refused() -> None:
    """gzip records cut short are an error, not the part that decompressed."""
    compressed = zlib.compress(b"x" * 10000, wbits=31)
    assert "end inside a gzip member" in str(fault(batch_of_section(compressed[:-10], codec=1)))


def test_errors_pickle_with_their_position() -> None:
    """A KafkaBatchError crosses a process boundary with its reason and position."""
    error = fault(KNOWN_BATCH[:-1])
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.position) == (type(error), str(error), error.position)
    assert isinstance(copy, ValueError)


# -- encoding's argument checks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"records": []}, ValueError),
        ({"records": [KafkaRecord(1, 0, None, None, []), KafkaRecord(1, 0, None, None, [])]}, ValueError),
        ({"records": [KafkaRecord(-1, 0, None, None, [])]}, ValueError),
        ({"records": [KafkaRecord(0, 0, "text", None, [])]}, TypeError),  # type: ignore[arg-type]
        ({"records": [KafkaRecord(0, 0, None, None, [("h", "text")])]}, TypeError),  # type: ignore[list-item]
        ({"records": [KafkaRecord(0, 0, None, None, [(b"h", None)])]}, TypeError),  # type: ignore[list-item]
        ({"records": [KafkaRecord(0, 0, None, None, [("\ud800", None)])]}, ValueError),
        ({"records": [KafkaRecord(0, 2**63 - 1, None, None, [])], "base_timestamp_ms": -1}, ValueError),
        ({"records": [(0, 0, None)]}, TypeError),
        ({"base_offset": 2**63}, ValueError),
        ({"producer_epoch": 2**15}, ValueError),
        ({"base_sequence": 2**31}, ValueError),
        ({"compression": 5}, ValueError),
        ({"base_offset": 1.0}, TypeError),
    ],
)
def test_encode_batch_checks_every_argument(change: dict[str, object], error: type[Exception]) -> None:
    """Out-of-range numbers, wrong types and non-increasing offset deltas are refused before any byte is written."""
    arguments: dict[str, object] = {
        "base_offset": 0,
        "records": [KafkaRecord(0, 0, None, None, [])],
        "base_timestamp_ms": 0,
    }
    arguments.update(change)
    with pytest.raises(error):
        encode_batch(**arguments)  # type: ignore[arg-type]


# -- batches from stored messages ------------------------------------------------------------------------------

NULLS = "adiskq.kafka.null"


def test_stored_messages_become_one_batch_a_client_reads() -> None:
    """Offsets from the first message, milliseconds floored, header order kept, nulls restored from their header."""
    messages = [
        Message(0, 40, 1_700_000_000_123_999_999, b"k", b"", {"b": b"2", NULLS: b"value", "a": b"1"}),
        Message(0, 41, -1, b"", b"", {NULLS: b"key,value"}),
        Message(0, 42, 5_000_000, b"", b"v", EMPTY_HEADERS),
    ]
    batch = encode_batch_from_messages(messages, nulls_header=NULLS, partition_leader_epoch=3)
    assert kafka_python_read(batch) == [
        KafkaRecord(40, 1_700_000_000_123, b"k", None, [("b", b"2"), ("a", b"1")]),
        KafkaRecord(41, -1, None, None, []),
        KafkaRecord(42, 5, b"", b"v", []),
    ]
    (decoded,) = decode_batches(batch)
    assert (decoded.base_offset, decoded.partition_leader_epoch, decoded.last_offset_delta) == (40, 3, 2)
    assert (decoded.base_timestamp_ms, decoded.max_timestamp_ms) == (1_700_000_000_123, 1_700_000_000_123)


def test_without_a_nulls_header_every_header_is_passed_on() -> None:
    """With nulls_header None, a header of that name is an ordinary header and keys stay bytes."""
    messages = [Message(0, 7, 0, b"", b"", {NULLS: b"key"})]
    (decoded,) = decode_batches(encode_batch_from_messages(messages))
    assert decoded.records == [KafkaRecord(0, 0, b"", b"", [(NULLS, b"key")])]


def test_no_messages_is_refused() -> None:
    """An empty read is not a batch: the caller sends no records instead."""
    with pytest.raises(ValueError, match="at least one message"):
        encode_batch_from_messages([])


@settings(deadline=None)
@given(st.sampled_from([1, 2, 3, 4]), st.binary(max_size=200), st.booleans())
def test_any_bytes_as_compressed_records_end_in_a_batch_error(codec: int, noise: bytes, framed: bool) -> None:
    """Noise behind a right CRC (half the time behind the codec's own magic) fails only as KafkaBatchError."""
    header = {
        1: b"\x1f\x8b\x08\x00",
        2: kafka_compression.XERIAL_MAGIC + b"\x00\x00\x00\x01" * 2,
        3: b"\x04\x22\x4d\x18",
        4: b"\x28\xb5\x2f\xfd",
    }
    section = header[codec] + noise if framed else noise
    with contextlib.suppress(KafkaBatchError):
        decode_batches(batch_of_section(section, count=1, codec=codec), max_bytes=2**16)
