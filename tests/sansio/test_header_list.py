"""Headers as Kafka has them in the record codec: a null value (value_len 0xFFFFFFFF, no bytes)
and a repeated name are decoded, in order, into a ``Headers`` (a mapping of the last value per name
that also keeps every header), by the compiled core exactly as by the reference; a record of either
kind is off the plain path of the Kafka Fetch batch, whose reference serves nulls and repeats."""

from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adiskq._errors import CorruptRecordError
from adiskq._sansio import codec as reference
from adiskq._sansio import core
from adiskq._sansio.values import EMPTY_HEADERS, Headers, Message, header_pairs
from adiskq.kafka.wire.codec import decode_records, encode_messages
from adiskq.kafka.wire.stored_batch import batch_from_stored, batch_from_stored_reference

KAFKA_PAIRS = [("trace", b"1"), ("empty", None), ("trace", b"2"), ("solo", b"")]


def _outcome(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except CorruptRecordError as error:
        return ("CorruptRecordError", str(error), error.position)


def _scanned(scan, data: bytes):  # type: ignore[no-untyped-def]
    """What a scan found, its error as (message, position): errors do not compare equal."""
    found = scan(data)
    error = None if found.error is None else (str(found.error), found.error.position)
    return (found.positions, found.sizes, found.timestamps, found.end, error)


def test_headers_read_as_a_mapping_of_the_last_value_and_keep_every_header() -> None:
    headers = Headers(KAFKA_PAIRS)
    assert dict(headers) == {"trace": b"2", "empty": b"", "solo": b""}
    assert list(headers) == ["trace", "empty", "solo"]
    assert headers["trace"] == b"2"
    assert headers.get("missing") is None
    assert "empty" in headers
    assert len(headers) == 3
    assert headers.all() == tuple(KAFKA_PAIRS)
    assert headers.get_all("trace") == [b"1", b"2"]
    assert headers.get_all("empty") == [None]
    assert headers.get_all("missing") == []
    assert pickle.loads(pickle.dumps(headers)) == headers
    assert hash(Headers(KAFKA_PAIRS)) == hash(headers)
    assert headers != {"trace": b"2", "empty": b"", "solo": b""}  # a dict cannot hold what it holds
    assert Headers([("a", b"1")]) == {"a": b"1"}
    assert repr(Headers([("a", None)])) == "Headers([('a', None)])"


def test_headers_refuse_what_a_record_cannot_hold() -> None:
    with pytest.raises(TypeError, match="header names are str"):
        Headers([(b"a", b"1")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="bytes or None"):
        Headers([("a", "text")])  # type: ignore[list-item]


def test_a_message_gives_every_header_in_order_whatever_its_headers_are() -> None:
    assert Message(0, 0, 0, b"", b"", Headers(KAFKA_PAIRS)).header_list == tuple(KAFKA_PAIRS)
    assert Message(0, 0, 0, b"", b"", {"a": b"1", "b": b"2"}).header_list == (("a", b"1"), ("b", b"2"))
    assert Message(0, 0, 0, b"", b"").header_list == ()
    assert header_pairs(EMPTY_HEADERS) == ()


def test_a_null_value_is_stored_as_its_length_alone() -> None:
    record = reference.encode_record(b"v", b"k", 5, Headers([("n", None)]))
    assert record[reference.KEY_AT + 1 :] == b"\x01\x00" + b"\x01\x00n" + b"\xff\xff\xff\xff" + b"v"
    assert len(record) == reference.encoded_size(b"v", b"k", Headers([("n", None)]))


def test_both_cores_decode_nulls_and_repeats_in_order_and_plain_headers_as_before() -> None:
    kafka = reference.encode_record(b"value", b"key", 7, Headers(KAFKA_PAIRS))
    plain = reference.encode_record(b"value", b"key", 8, {"a": b"1"})
    data = plain + kafka + plain
    for decode in (core.decode_messages, reference.decode_messages):
        first, second, third = decode(data, 2, 40, 3)
        assert type(first.headers) is dict
        assert first.headers == {"a": b"1"}
        assert type(second.headers) is Headers
        assert second.header_list == tuple(KAFKA_PAIRS)
        assert second[1:5] == (41, 7, b"key", b"value")
        assert third.offset == 42
    assert core.decode_at(data, 2, [5, 9, 11]) == [
        m._replace(offset=o) for m, o in zip(reference.decode_messages(data, 2, 0, 3), [5, 9, 11], strict=True)
    ]
    assert _scanned(core.scan_columns, data) == _scanned(reference.scan_columns, data)
    decoded = reference.decode_record(kafka)
    assert decoded is not reference.NEED_MORE
    assert decoded.headers == Headers(KAFKA_PAIRS)


@pytest.mark.parametrize(
    "damage",
    [
        b"\x01\x00" + b"\x01\x00n" + b"\xff\xff\xff\xfe",  # a length one short of null: overruns
        b"\x02\x00" + b"\x01\x00n" + b"\xff\xff\xff\xff",  # two headers announced, one there
        b"\x01\x00" + b"\x01\x00n" + b"\xff\xff\xff",  # the length cut short
        b"\x01\x00" + b"\x01\x00\xff" + b"\xff\xff\xff\xff",  # a name that is not UTF-8
    ],
)
def test_damage_around_a_null_is_refused_alike_by_both_cores(damage: bytes) -> None:
    body = struct.pack("<BBqI", reference.MAGIC_V1, 0, 3, 1) + b"k" + damage
    record = struct.pack("<II", len(body) + 8, reference.crc32c(body)) + body
    got = _outcome(lambda: core.decode_messages(record, 0, 0, 1))
    assert got == _outcome(lambda: reference.decode_messages(record, 0, 0, 1))
    assert got[0] == "CorruptRecordError"
    assert _scanned(core.scan_columns, record) == _scanned(reference.scan_columns, record)
    assert core.next_valid_record(record, 0) == reference.next_valid_record(record, 0) is None


_NAMES = st.sampled_from(["a", "b", "é", ""])
_VALUES = st.one_of(st.none(), st.binary(max_size=8))
_PAIRS = st.lists(st.tuples(_NAMES, _VALUES), max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PAIRS, min_size=1, max_size=6), st.integers(0, 2))
def test_random_headers_decode_and_serve_alike_from_both_cores(
    batch: list[list[tuple[str, bytes | None]]], at: int
) -> None:
    records = [reference.encode_record(b"v%d" % i, b"k", i, Headers(pairs)) for i, pairs in enumerate(batch)]
    data = b"".join(records)
    messages = core.decode_messages(data, 0, 100, len(records))
    assert messages == reference.decode_messages(data, 0, 100, len(records))
    assert [m.header_list for m in messages] == [tuple(pairs) for pairs in batch]
    assert _scanned(core.scan_columns, data) == _scanned(reference.scan_columns, data)
    cut = data[: len(data) - 1 - at]  # a torn tail, read alike
    assert _scanned(core.scan_columns, cut) == _scanned(reference.scan_columns, cut)
    stored = batch_from_stored(data, 100, len(records), max_record_bytes=2**30, dictionaries=None, nulls_header=None)
    assert stored == batch_from_stored_reference(
        data, 100, len(records), max_record_bytes=2**30, dictionaries=None, nulls_header=None
    )
    plain = all(len({n for n, _ in pairs}) == len(pairs) and None not in dict(pairs).values() for pairs in batch)
    assert (stored is not None) == plain


def test_a_fetch_batch_serves_nulls_and_repeats_in_order() -> None:
    """Messages with Kafka's headers become a Kafka batch with each header as it was."""
    messages = [Message(0, 7, 1_000_000, b"k", b"v", Headers(KAFKA_PAIRS)), Message(0, 8, 2_000_000, b"k", b"w")]
    batch = encode_messages(messages)
    # The records section follows the 61-byte batch header.
    records = decode_records(batch, 61, len(batch), 2, 1, "")
    assert [r.headers for r in records] == [KAFKA_PAIRS, []]
