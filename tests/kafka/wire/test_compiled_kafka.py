"""The compiled Kafka record batch codec against the pure-Python reference: same batches, bytes and errors.

The compiled functions answer None (decoding) or NotImplemented (encoding) wherever the reference
would raise, and exactly the reference's result everywhere else; the public functions of
``wire.batch`` then give the same results and the same errors, word for word and byte for byte,
on valid batches, damaged ones and noise.
"""

from __future__ import annotations

import struct
import types
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq import _compiled
from adiskq._sansio.values import EMPTY_HEADERS, Message
from adiskq.kafka.wire import batch as kafka_batch
from adiskq.kafka.wire import codec as kafka_codec
from adiskq.kafka.wire import codec as reference
from adiskq.kafka.wire.batch import KafkaBatch, KafkaRecord

I32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
# Values around the edges the checks sit on, as well as anything in range.
EDGY = st.one_of(
    I64, st.sampled_from([-(2**63), -(2**63) - 1, 2**63 - 1, 2**63, -(2**31) - 1, 2**31, 2**15, -(2**15) - 1, -1, 0])
)
names = st.one_of(st.text(max_size=6), st.sampled_from(["\ud800", "é", ""]))
header_values = st.one_of(st.none(), st.binary(max_size=12))
headers = st.lists(st.tuples(names, header_values), max_size=3)
records = st.builds(
    KafkaRecord,
    st.integers(min_value=0, max_value=6),
    st.one_of(I64, st.integers(min_value=-1000, max_value=1000)),
    st.one_of(st.none(), st.binary(max_size=12)),
    st.one_of(st.none(), st.binary(max_size=60)),
    headers,
)


@st.composite
def increasing(draw: st.DrawFn) -> list[KafkaRecord]:
    """Valid records: offset deltas increasing, timestamps near a base of 0."""
    out = []
    delta = draw(st.integers(min_value=0, max_value=3))
    for record in draw(st.lists(records, min_size=1, max_size=6)):
        out.append(
            record._replace(
                offset_delta=delta,
                timestamp_ms=draw(st.integers(min_value=-(2**62), max_value=2**62)),
                headers=[(n, v) for n, v in record.headers if n != "\ud800"],
            )
        )
        delta += draw(st.integers(min_value=1, max_value=2**20))
    return out


def outcome(call: Callable[[], object]) -> object:
    """What a call returned, or its error as (type, message, position): what must be equal."""
    try:
        return call()
    except Exception as error:  # every error, typed and worded, is part of the contract
        return (type(error).__name__, str(error), getattr(error, "position", None))


def test_the_compiled_codec_is_in_use() -> None:
    """A built core runs the compiled Kafka codec (ADISKQ_NO_EXTENSIONS=1 is the only way to the reference)."""
    assert kafka_batch.COMPILED


# -- encoding --------------------------------------------------------------------------------------


@given(increasing(), I64, I64, st.data())
def test_encode_batch_gives_the_references_bytes(
    batch: list[KafkaRecord], base_offset: int, base: int, data: st.DataObject
) -> None:
    """Valid records: the compiled batch, header and CRC included, is the reference's, byte for byte."""
    # Timestamps within 2**62 of 0 and a base within 2**61: every delta fits Kafka's 64-bit varlong.
    base_timestamp_ms = data.draw(st.one_of(st.just(0), st.integers(min_value=-(2**61), max_value=2**61)))
    arguments = {
        "base_offset": base_offset,
        "records": batch,
        "base_timestamp_ms": base_timestamp_ms,
        "producer_id": base,
        "producer_epoch": data.draw(st.integers(min_value=-(2**15), max_value=2**15 - 1)),
        "base_sequence": data.draw(I32),
        "partition_leader_epoch": data.draw(I32),
    }
    compiled = _compiled.kafka_encode_batch(*(arguments[name] for name in _ENCODE_ORDER))
    assert compiled is not NotImplemented
    assert compiled == reference.encode_batch(**arguments)  # type: ignore[arg-type]
    assert kafka_batch.encode_batch(**arguments) == compiled  # type: ignore[arg-type]


_ENCODE_ORDER = (
    "base_offset",
    "records",
    "base_timestamp_ms",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "partition_leader_epoch",
)


@settings(deadline=None)
@given(st.lists(records, max_size=5), EDGY, EDGY, EDGY, EDGY, st.sampled_from([0, 1, 2, 3, 4, 5, -1]))
def test_any_arguments_encode_or_fail_as_the_reference_does(
    batch: list[KafkaRecord], base_offset: int, base_timestamp_ms: int, epoch: int, sequence: int, codec: int
) -> None:
    """Out-of-range numbers, deltas out of order, lone surrogates: the same bytes or the same error."""
    arguments = {
        "base_offset": base_offset,
        "records": batch,
        "base_timestamp_ms": base_timestamp_ms,
        "producer_epoch": epoch,
        "base_sequence": sequence,
        "compression": codec,
    }
    want = outcome(lambda: reference.encode_batch(**arguments))  # type: ignore[arg-type]
    assert outcome(lambda: kafka_batch.encode_batch(**arguments)) == want  # type: ignore[arg-type]
    if codec == 0:
        compiled = _compiled.kafka_encode_batch(base_offset, batch, base_timestamp_ms, -1, epoch, sequence, 0)
        assert compiled is NotImplemented or compiled == want


@given(st.lists(records, max_size=5), EDGY)
def test_encode_records_is_the_references_or_not_implemented(batch: list[KafkaRecord], base: int) -> None:
    """The records section: the reference's bytes, last delta and max timestamp, or NotImplemented where it raises."""
    want = outcome(lambda: reference.encode_records(batch, base))
    compiled = _compiled.kafka_encode_records(batch, base)
    if isinstance(want, tuple) and want and isinstance(want[0], bytes):
        assert compiled == want
    else:
        assert compiled is NotImplemented


@pytest.mark.parametrize(
    "odd",
    [
        [(0, 0, bytearray(b"k"), None, [])],
        [(0, 0, None, None, [("h", memoryview(b"x"))])],
        [(True, 0, None, None, [])],
        [(0, 0, None, None, ("not", "pairs"))],
        [(0, 0, None, None, [["h", None]])],
        [(0, 0, None, None)],
        [[0, 0, None, None, []]],
        ((0, 0, None, None, []) for _ in range(1)),
    ],
)
def test_unusual_records_go_to_the_reference(odd: object) -> None:
    """Types the compiled encoder does not take are NotImplemented; the public function gives the reference's answer."""
    assert _compiled.kafka_encode_batch(0, odd, 0, -1, -1, -1, 0) is NotImplemented
    assert outcome(lambda: kafka_batch.encode_batch(base_offset=0, records=odd, base_timestamp_ms=0)) == outcome(  # type: ignore[arg-type]
        lambda: reference.encode_batch(base_offset=0, records=odd, base_timestamp_ms=0)  # type: ignore[arg-type]
    )


# -- decoding --------------------------------------------------------------------------------------


def compare_decoding(data: bytes, max_bytes: int = kafka_codec.DEFAULT_MAX_BYTES) -> None:
    want = outcome(lambda: reference.decode_batches(data, max_bytes=max_bytes))
    assert outcome(lambda: kafka_batch.decode_batches(data, max_bytes=max_bytes)) == want
    compiled = _compiled.kafka_decode_batches(data, max_bytes, KafkaRecord, KafkaBatch)
    if compiled is not None:
        assert compiled == want
    elif isinstance(want, list):  # only a compressed batch may take the reference's path when all is well
        assert any(batch.attributes & kafka_codec.COMPRESSION_MASK for batch in want)


@st.composite
def damaged_batches(draw: st.DrawFn) -> bytes:
    """Valid batches (any codec), then cut, flipped, overwritten, or with their CRC made right again."""
    parts = []
    for base_offset in range(draw(st.integers(min_value=1, max_value=3))):
        batch = draw(increasing())
        codec = draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4]))
        parts.append(
            reference.encode_batch(base_offset=base_offset, records=batch, base_timestamp_ms=0, compression=codec)
        )
    data = bytearray(b"".join(parts))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=len(data) - 1))
        choice = draw(st.integers(min_value=0, max_value=3))
        if choice == 0:
            data[at] = draw(st.integers(min_value=0, max_value=255))
        elif choice == 1:
            del data[at:]
            if not data:
                break
        elif choice == 2:
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
    if draw(st.booleans()) and len(data) >= kafka_codec.HEADER_BYTES:
        # Damage past the CRC with the CRC made right again: the record checks' turn.
        length = struct.unpack_from(">i", data, 8)[0]
        end = min(len(data), 12 + max(length, 0))
        crc = kafka_codec.crc32c(bytes(data[kafka_codec.ATTRIBUTES_AT : end]))
        struct.pack_into(">I", data, kafka_codec.CRC_AT, crc)
    return bytes(data)


# No deadline where a codec runs: a library's first call (its tables, its context) takes far longer than the rest.
@settings(max_examples=400, deadline=None)
@given(damaged_batches())
def test_damaged_batches_decode_or_fail_as_the_reference_does(data: bytes) -> None:
    """The same batches from whatever survives, else the same error type, message and position."""
    compare_decoding(data)


@given(st.binary(max_size=300))
def test_noise_fails_as_the_reference_does(data: bytes) -> None:
    """Random bytes: the same error, word for word."""
    compare_decoding(data)


@given(st.binary(max_size=120), st.integers(min_value=0, max_value=12), I64)
def test_any_records_section_decodes_as_the_reference_does(section: bytes, count: int, base: int) -> None:
    """Hand-made records sections (negative lengths, long varints, bad UTF-8): None just where the reference raises."""
    want = outcome(lambda: reference.decode_records(section, 0, len(section), count, base, "batch 0"))
    compiled = _compiled.kafka_decode_records(section, 0, len(section), count, base, KafkaRecord)
    if isinstance(want, list):
        assert compiled == want
    else:
        assert compiled is None


@settings(deadline=None)
@given(increasing(), st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=2000))
def test_max_bytes_is_applied_as_the_reference_applies_it(batch: list[KafkaRecord], codec: int, max_bytes: int) -> None:
    """A batch over max_bytes fails alike in both, compressed or not."""
    compare_decoding(
        reference.encode_batch(base_offset=0, records=batch, base_timestamp_ms=0, compression=codec), max_bytes
    )


def assert_decodes_as_reference(section: bytes, label: bytes) -> None:
    """The compiled decoder gives the reference's records for one record ``section``, or None where it raises."""
    want = outcome(lambda: reference.decode_records(section, 0, len(section), 1, 5, "batch 0"))
    got = _compiled.kafka_decode_records(section, 0, len(section), 1, 5, KafkaRecord)
    assert got == want if isinstance(want, list) else got is None, label


def test_varints_at_their_limits_decode_as_the_reference_does() -> None:
    """Five-byte varints at 2^32 - 1 and 2^32 (offset delta, record length), ten-byte ones at 2^64 - 1 and
    2^64 (timestamp delta): above the bits a field has is refused, not wrapped."""
    for timestamp_varint in (
        b"\xff" * 9 + b"\x01",
        b"\xff" * 9 + b"\x02",
        b"\xfe" * 9 + b"\x01",
        b"\x80" * 9 + b"\x00",
        b"\x80" * 10 + b"\x00",
    ):
        body = b"\x00" + timestamp_varint + b"\x00\x01\x01\x00"
        section = bytes([len(body) << 1]) + body
        assert_decodes_as_reference(section, timestamp_varint)
    for offset_varint in (b"\x82\x80\x80\x80\x10", b"\x82\x80\x80\x80\x0f", b"\xfe\xff\xff\xff\x0f"):
        body = b"\x00\x00" + offset_varint + b"\x01\x01\x00"
        section = bytes([len(body) << 1]) + body
        assert_decodes_as_reference(section, offset_varint)
    for length_varint in (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x1f", b"\x8c\x80\x80\x80\x00"):
        section = length_varint + b"\x00" * 6
        assert_decodes_as_reference(section, length_varint)


def test_a_memoryview_slice_decodes_in_place() -> None:
    """A view of part of a request (what a server holds) decodes without a copy, as bytes would."""
    batch = reference.encode_batch(base_offset=0, records=[KafkaRecord(0, 1, b"k", b"v", [])], base_timestamp_ms=1)
    framed = b"\x00" * 7 + batch + b"\x00" * 3
    assert kafka_batch.decode_batches(memoryview(framed)[7:-3]) == reference.decode_batches(batch)
    strided = memoryview(batch + batch)[::2]
    assert outcome(lambda: kafka_batch.decode_batches(strided)) == outcome(lambda: reference.decode_batches(strided))


# -- argument checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: _compiled.kafka_decode_batches(b"", 1, KafkaRecord), TypeError),
        (lambda: _compiled.kafka_decode_batches("text", 1, KafkaRecord, KafkaBatch), TypeError),
        (lambda: _compiled.kafka_decode_batches(b"", -1, KafkaRecord, KafkaBatch), ValueError),
        (lambda: _compiled.kafka_decode_batches(b"", 1.5, KafkaRecord, KafkaBatch), TypeError),
        (lambda: _compiled.kafka_decode_batches(b"", 1, dict, KafkaBatch), TypeError),
        (lambda: _compiled.kafka_decode_batches(b"", 1, KafkaRecord, KafkaBatch()), TypeError),  # type: ignore[call-arg]
        (lambda: _compiled.kafka_decode_records(b"abc", 0, 4, 1, 0, KafkaRecord), ValueError),
        (lambda: _compiled.kafka_decode_records(b"abc", 2, 1, 1, 0, KafkaRecord), ValueError),
        (lambda: _compiled.kafka_decode_records(b"abc", -1, 1, 1, 0, KafkaRecord), ValueError),
        (lambda: _compiled.kafka_decode_records(b"abc", 0, 3, 2**64, 0, KafkaRecord), OverflowError),
        (lambda: _compiled.kafka_decode_records(b"abc", 0, 3, 1, None, KafkaRecord), TypeError),
        (lambda: _compiled.kafka_decode_records(b"abc", 0, 3, 1, 0), TypeError),
        (lambda: _compiled.kafka_encode_records([]), TypeError),
        (lambda: _compiled.kafka_encode_batch(0, [], 0, -1, -1, -1), TypeError),
    ],
)
def test_the_compiled_functions_check_every_argument(call: Callable[[], object], error: type[Exception]) -> None:
    """Wrong counts, types and ranges of arguments raise, never read out of bounds."""
    with pytest.raises(error):
        call()


# -- batches from stored messages -------------------------------------------------------------------------

NULLS = "adiskq.kafka.null"
nulls_values = st.sampled_from([b"key", b"value", b"key,value", b"value,key", b"", b"x,key", b"keys", b","])
stored_headers = st.one_of(
    st.just(EMPTY_HEADERS),
    st.dictionaries(
        st.sampled_from(["a", "b", NULLS, NULLS + "~", NULLS + "~~", NULLS + "~x", "é", ""]),
        st.binary(max_size=6),
        max_size=4,
    ),
    st.builds(lambda d, n: {**d, NULLS: n}, st.dictionaries(names, st.binary(max_size=6), max_size=2), nulls_values),
)


@st.composite
def stored_messages(draw: st.DrawFn) -> list[Message]:
    """Messages as a reader returns them: increasing offsets, any timestamps, keys, values and headers."""
    offset = draw(st.integers(min_value=0, max_value=2**62))
    out = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        timestamp_ns = draw(st.one_of(I64, st.integers(min_value=-(10**7), max_value=10**7)))
        key = draw(st.binary(max_size=10))
        value = draw(st.binary(max_size=40))
        out.append(Message(0, offset, timestamp_ns, key, value, draw(stored_headers), None))
        offset += draw(st.integers(min_value=1, max_value=3))
    return out


@given(stored_messages(), st.sampled_from([None, NULLS, "a"]), I32)
def test_a_batch_from_messages_is_the_references(messages: list[Message], nulls: str | None, epoch: int) -> None:
    """Stored messages: the compiled batch is the reference's, byte for byte, or the same error."""
    want = outcome(lambda: reference.encode_messages(messages, nulls_header=nulls, partition_leader_epoch=epoch))
    compiled = _compiled.kafka_encode_messages(messages, nulls, epoch)
    if isinstance(want, bytes):
        assert compiled == want
    else:
        assert compiled is NotImplemented
    assert (
        outcome(
            lambda: kafka_batch.encode_batch_from_messages(messages, nulls_header=nulls, partition_leader_epoch=epoch)
        )
        == want
    )


@pytest.mark.parametrize(
    "messages",
    [
        [Message(0, 5, 0, b"", b""), Message(0, 5, 0, b"", b"")],  # offsets that do not increase
        [Message(0, 5, 0, b"", b""), Message(0, 5 + 2**31, 0, b"", b"")],  # a delta past 32 bits
        [Message(0, 5, 0, bytearray(b"k"), b"")],  # type: ignore[arg-type]
        [Message(0, 5, 0, b"", b"", types.MappingProxyType({"a": b"1"}))],
        [Message(0, 5, 0, b"", b"", {NULLS: bytearray(b"key")})],  # type: ignore[dict-item]
        [Message(0, 5, 0, b"", b"", {"\ud800": b""})],
        [Message(0, 5, 0, b"", b"", {1: b"x"})],  # type: ignore[dict-item]
        [Message(0, 5, 0.5, b"", b"")],  # type: ignore[arg-type]
        [Message(0, 5, 0, b"", b"")[:6]],
        [],
    ],
)
def test_unusual_messages_go_to_the_reference(messages: list[Message]) -> None:
    """What the compiled encoder does not take gives the reference's batch or error."""
    assert _compiled.kafka_encode_messages(messages, NULLS, 0) is NotImplemented
    want = outcome(lambda: reference.encode_messages(messages, nulls_header=NULLS))
    assert outcome(lambda: kafka_batch.encode_batch_from_messages(messages, nulls_header=NULLS)) == want


def test_encode_messages_checks_its_arguments() -> None:
    """A nulls header that is not a str, or the wrong count of arguments, raises TypeError."""
    with pytest.raises(TypeError):
        _compiled.kafka_encode_messages([], b"x", 0)
    with pytest.raises(TypeError):
        _compiled.kafka_encode_messages([])


def test_header_names_of_one_batch_are_each_records_own() -> None:
    """Records whose headers share positions but not names (same length, ASCII or not) keep their own names."""
    names = [["a", "b"], ["b", "a"], ["é", "a"], ["a", "é"], ["ab", "b"], ["a", "b", "c"], ["a"], []]
    batch = [KafkaRecord(i, i, None, b"", [(name, b"") for name in record]) for i, record in enumerate(names)]
    encoded = reference.encode_batch(base_offset=0, records=batch, base_timestamp_ms=0)
    decoded = _compiled.kafka_decode_batches(encoded, 2**20, KafkaRecord, KafkaBatch)
    assert decoded == reference.decode_batches(encoded)
    assert [[name for name, _ in record.headers] for record in decoded[0].records] == names
