"""The compiled ``kafka_produce_request`` against its pure-Python reference and kio: for every
Produce version the gateway serves, the same fields kio reads from the bytes kio writes; for any
bytes (cut at every byte, flipped, huge or negative counts and lengths, tagged fields, noise), the
compiled call and the reference answer alike, and whatever they take kio reads the same way."""

from __future__ import annotations

import datetime as dt
import io
import struct
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from adiskq import _compiled
from adiskq.kafka.apis.produce import ProduceAsked
from adiskq.kafka.wire.produce_request import (
    PRODUCE_REQUEST_VERSIONS,
    produce_request,
    produce_request_reference,
)
from adiskq.kafka.wire.protocol import ProtocolError, decode_request, parse_header

_I16 = st.integers(-(2**15), 2**15 - 1)
_I32 = st.integers(-(2**31), 2**31 - 1)
_FLEXIBLE = 9
_HUGE_UVARINT = bytes.fromhex("ffffffff0f")  # 2**32 - 1: a compact count or length of 2**32 - 2


def _kio_class(version: int, name: str) -> Any:
    return getattr(sys.modules[load_request_schema(0, version).__module__], name)


def _request(
    version: int, transactional_id: str | None, acks: int, timeout_ms: int, topics: list[tuple[str, list[Any]]]
) -> Any:
    """kio's ProduceRequest of ``version``: ``topics`` as [(name, [(index, records)])]."""
    topic = _kio_class(version, "TopicProduceData")
    partition = _kio_class(version, "PartitionProduceData")
    return _kio_class(version, "ProduceRequest")(
        transactional_id=transactional_id,
        acks=acks,
        timeout=dt.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(
            topic(name=name, partition_data=tuple(partition(index=i, records=data) for i, data in partitions))
            for name, partitions in topics
        ),
    )


@st.composite
def _requests(draw: st.DrawFn, version: int) -> Any:
    topics = draw(
        st.lists(
            st.tuples(
                st.text(max_size=140),
                st.lists(st.tuples(_I32, st.one_of(st.none(), st.binary(max_size=300))), max_size=3),
            ),
            max_size=3,
        )
    )
    return _request(version, draw(st.one_of(st.none(), st.text(max_size=30))), draw(_I16), draw(_I32), topics)


def _kio_fields(request: Any) -> tuple[Any, ...]:
    """What the gateway uses of kio's request, in ``produce_request``'s shape."""
    return (
        request.transactional_id,
        request.acks,
        request.timeout // dt.timedelta(milliseconds=1),
        [(topic.name, [(p.index, p.records) for p in topic.partition_data]) for topic in request.topic_data],
    )


def _encode(request: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


def _kio_read(version: int, payload: bytes) -> tuple[Any, ...] | None:
    try:
        request, _ = entity_reader(load_request_schema(0, version))(payload, 0)
    except Exception:  # kio raises what its readers meet
        return None
    return _kio_fields(request)


def _both(payload: bytes, version: int, at: int = 0) -> Any:
    """The compiled call's answer, once held equal to the reference's."""
    compiled = _compiled.kafka_produce_request(payload, at, version)
    assert compiled == produce_request_reference(payload, at, version)
    return compiled


@pytest.mark.parametrize("version", PRODUCE_REQUEST_VERSIONS)
@given(data=st.data())
def test_fields_are_kios(version: int, data: st.DataObject) -> None:
    """Every Produce version: the compiled call and the reference read the fields kio reads from the
    bytes kio writes (null transactional ids and record sets, empty arrays, several topics and
    partitions), wherever in a message they start, with bytes after them ignored."""
    request = data.draw(_requests(version))
    payload = _encode(request)
    prefix = data.draw(st.binary(max_size=8))
    suffix = data.draw(st.binary(max_size=4))
    message = prefix + payload + suffix
    expected = _kio_fields(request)
    assert _compiled.kafka_produce_request(message, len(prefix), version) == expected
    assert produce_request_reference(message, len(prefix), version) == expected
    assert produce_request(message, len(prefix), version) == expected


def _several(version: int) -> bytes:
    """A request of two topics (two partitions, one with a null record set; then one), a transactional id."""
    return _encode(
        _request(
            version,
            "tx",
            -1,
            30_000,
            [("orders", [(0, b"\x01" * 70), (3, None)]), ("é", [(1, b"")]), ("empty", [])],
        )
    )


@pytest.mark.parametrize("version", PRODUCE_REQUEST_VERSIONS)
def test_a_request_cut_at_any_byte_is_not_taken(version: int) -> None:
    """A request cut short anywhere answers None from both (kio then names the fault); whole, its fields."""
    payload = _several(version)
    assert _both(payload, version) == (
        "tx",
        -1,
        30_000,
        [("orders", [(0, b"\x01" * 70), (3, None)]), ("é", [(1, b"")]), ("empty", [])],
    )
    for end in range(len(payload)):
        assert _both(payload[:end], version) is None, end
        assert _kio_read(version, payload[:end]) is None, end


@st.composite
def _damaged(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from(PRODUCE_REQUEST_VERSIONS))
    payload = bytearray(_encode(draw(_requests(version))))
    how = draw(st.sampled_from(["cut", "flip", "noise", "insert", "huge"]))
    if how == "cut":
        del payload[draw(st.integers(0, len(payload))) :]
    elif how == "flip" and payload:
        at = draw(st.integers(0, len(payload) - 1))
        payload[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xC3, payload[at] ^ 0x80]))
    elif how == "insert":
        at = draw(st.integers(0, len(payload)))
        payload[at:at] = draw(st.binary(min_size=1, max_size=6))
    elif how == "huge":
        at = draw(st.integers(0, len(payload)))
        payload[at:at] = draw(st.sampled_from([_HUGE_UVARINT, b"\x7f\xff\xff\xff", b"\xff\xff\xff\xfe", b"\x80\x00"]))
    else:
        payload = bytearray(draw(st.binary(max_size=120)))
    return version, bytes(payload)


@given(damaged=_damaged())
def test_damaged_bytes_are_read_alike(damaged: tuple[int, bytes]) -> None:
    """Cut, flipped, inserted, huge or random bytes: the compiled call answers what the reference
    answers (the fields, or None), and bytes they take, kio reads to the same fields."""
    version, payload = damaged
    compiled = _both(payload, version)
    if compiled is not None:
        assert _kio_read(version, payload) == compiled


_ACKS_TIMEOUT = struct.pack(">hi", 1, 1000)


@pytest.mark.parametrize(
    ("version", "payload", "why"),
    [
        (3, b"", "nothing"),
        (3, b"\xff\xfe" + _ACKS_TIMEOUT + b"\0\0\0\0", "a transactional id of length -2"),
        (3, b"\x7f\xff" + _ACKS_TIMEOUT + b"\0\0\0\0", "a transactional id longer than the bytes"),
        (3, b"\0\x01\xff" + _ACKS_TIMEOUT + b"\0\0\0\0", "a transactional id that is not UTF-8"),
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\xff\xff\xff\xff", "a null topics array"),
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\x7f\xff\xff\xff", "a topic count the bytes cannot hold"),
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\0\0\0\x01\xff\xff\0\0\0\0", "a null topic name"),
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\0\0\0\x01\0\x01\xff\0\0\0\0", "a topic name that is not UTF-8"),
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\0\0\0\x01\0\x01a\x7f\xff\xff\xff", "a partition count too large"),
        (
            3,
            b"\xff\xff" + _ACKS_TIMEOUT + b"\0\0\0\x01\0\x01a\0\0\0\x01\0\0\0\0\x7f\xff\xff\xff",
            "a records length the bytes cannot hold",
        ),
        (
            3,
            b"\xff\xff" + _ACKS_TIMEOUT + b"\0\0\0\x01\0\x01a\0\0\0\x01\0\0\0\0\xff\xff\xff\xfe",
            "a records length of -2",
        ),
        (9, b"\0" + _ACKS_TIMEOUT + _HUGE_UVARINT + b"\0", "a compact topic count the bytes cannot hold"),
        (9, b"\0" + _ACKS_TIMEOUT + b"\x02\x02a" + _HUGE_UVARINT + b"\0\0", "a compact partition count too large"),
        (
            9,
            b"\0" + _ACKS_TIMEOUT + b"\x02\x02a\x02\0\0\0\0" + _HUGE_UVARINT + b"\0\0\0",
            "a compact records length the bytes cannot hold",
        ),
        (9, b"\0" + _ACKS_TIMEOUT + b"\x02\0\x01\0\0", "a null compact topic name"),
        (9, b"\x80\x80\x80\x80\x80\x01" + _ACKS_TIMEOUT + b"\x01\0", "a varint longer than 5 bytes"),
        (9, b"\x80\x80\x80\x80\x10" + _ACKS_TIMEOUT + b"\x01\0", "a varint above 32 bits"),
        (9, b"\0" + _ACKS_TIMEOUT + b"\x01\x01\x00\x01\x00", "a tagged field at the end"),
        (9, b"\0" + _ACKS_TIMEOUT + b"\x02\x02a\x01\x01\x00\x01\x00\x00", "a tagged field on a topic"),
        (9, b"\0" + _ACKS_TIMEOUT + b"\x02\x02a\x02\0\0\0\0\x01\x01\x00\x01\x00\0\0", "a tagged field on a partition"),
    ],
)
def test_malformed_requests_are_not_taken(version: int, payload: bytes, why: str) -> None:
    """Bytes the reader does not take answer None from both (the gateway then lets kio, after the
    request guard, name the fault): nothing is sized from a count or length the bytes cannot hold."""
    assert _compiled.kafka_produce_request(payload, 0, version) is None, why
    assert produce_request_reference(payload, 0, version) is None, why


def _message(version: int, payload: bytes) -> bytes:
    """A Produce request message (no size prefix): the header the version takes, then the payload."""
    header = struct.pack(">hhih", 0, version, 7, 4) + b"test" + (b"\0" if version >= _FLEXIBLE else b"")
    return header + payload


def _decoded(message: bytes) -> Any:
    header, at = parse_header(message)
    return decode_request(header, message, at)


@pytest.mark.parametrize("version", PRODUCE_REQUEST_VERSIONS)
def test_the_gateway_reads_a_produce_request_into_its_fields(version: int) -> None:
    """The gateway's decoding of a Produce request: the fields its handler uses, with the version."""
    assert _decoded(_message(version, _several(version))) == ProduceAsked(
        "tx", -1, 30_000, [("orders", [(0, b"\x01" * 70), (3, None)]), ("é", [(1, b"")]), ("empty", [])], version
    )


def test_a_tagged_field_is_left_to_kio() -> None:
    """A request carrying a tagged field (none is defined for Produce, so an unknown one) is not
    taken by the compiled reader: kio reads it, and refuses the unknown tag as a ProtocolError."""
    plain = _encode(_request(11, None, 1, 500, [("t", [(0, b"batch")])]))
    tagged = plain[:-1] + b"\x01\x05\x02hi"  # the request's tags: one field, tag 5, two bytes
    assert _both(tagged, 11) is None
    assert _decoded(_message(11, plain)) == (None, 1, 500, [("t", [(0, b"batch")])], 11)
    with pytest.raises(ProtocolError, match="tag"):
        _decoded(_message(11, tagged))


@pytest.mark.parametrize("version", [3, 9])
def test_a_null_topics_array_kio_reads_is_a_protocol_error(version: int) -> None:
    """A null topic array, which the compiled reader declines and Kafka's schema allows not, is a
    ProtocolError naming the field (the request check refuses it), not a failure in the handler."""
    payload = (b"\0" if version >= _FLEXIBLE else b"\xff\xff") + _ACKS_TIMEOUT
    payload += b"\0\0" if version >= _FLEXIBLE else b"\xff\xff\xff\xff"  # (then the request's tags)
    assert _both(payload, version) is None
    with pytest.raises(ProtocolError, match="topic_data is null"):
        _decoded(_message(version, payload))


@pytest.mark.parametrize(
    ("version", "payload", "field"),
    [
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\0\0\0\x01\0\x01a\0\0\0\x01\0\0\0\0\x7f\xff\xff\xff", "records: length"),
        (9, b"\0" + _ACKS_TIMEOUT + b"\x02\x02a" + _HUGE_UVARINT + b"\0\0", "partition_data[]"),
        (3, b"\xff\xff" + _ACKS_TIMEOUT + b"\x7f\xff\xff\xff", "topic_data[]"),
    ],
)
def test_a_hostile_request_is_a_protocol_error_naming_the_field(version: int, payload: bytes, field: str) -> None:
    """A count or length the bytes cannot hold, declined by the compiled reader, is a ProtocolError
    naming the field (the request guard's), not a crash or a huge allocation."""
    with pytest.raises(ProtocolError, match=r"ProduceRequest\.") as raised:
        _decoded(_message(version, payload))
    assert field in str(raised.value)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((bytearray(b"\0" * 40), 0, 9), TypeError),
        ((memoryview(b"\0" * 40), 0, 9), TypeError),
        ((b"\0" * 40, "0", 9), TypeError),
        ((b"\0" * 40, 0.0, 9), TypeError),
        ((b"\0" * 40, 0, None), TypeError),
        ((b"\0" * 40, 41, 9), ValueError),
        ((b"\0" * 40, -1, 9), ValueError),
        ((b"\0" * 40, 2**70, 9), ValueError),
        ((b"\0" * 40, -(2**70), 9), ValueError),
        ((b"\0" * 40, 0, 2), ValueError),
        ((b"\0" * 40, 0, 13), ValueError),
        ((b"\0" * 40, 0, 2**70), ValueError),
    ],
)
def test_bad_arguments_raise_the_same_class(arguments: tuple[Any, Any, Any], error: type[Exception]) -> None:
    """Arguments outside the contract raise the same class from both."""
    with pytest.raises(error):
        _compiled.kafka_produce_request(*arguments)
    with pytest.raises(error):
        produce_request_reference(*arguments)


def test_an_offset_at_the_end_reads_nothing() -> None:
    """``at`` may be the message's length (nothing left: not taken), not past it."""
    payload = _several(9)
    assert _both(payload, 9, len(payload)) is None
    with pytest.raises(ValueError, match="within the message"):
        _compiled.kafka_produce_request(payload, len(payload) + 1, 9)


def _read_many() -> None:
    """100,000 requests read (taken, cut short, not UTF-8, with a tag) and arguments refused."""
    payload = _several(9)
    not_utf8 = payload.replace(b"orders", b"order\xff")
    tagged = payload[:-1] + b"\x01\x05\x02hi"
    for _ in range(20_000):
        assert _compiled.kafka_produce_request(payload, 0, 9) is not None
        assert _compiled.kafka_produce_request(payload[:-9], 0, 9) is None
        assert _compiled.kafka_produce_request(not_utf8, 0, 9) is None
        assert _compiled.kafka_produce_request(tagged, 0, 9) is None
        with pytest.raises(ValueError, match="version"):
            _compiled.kafka_produce_request(payload, 0, 2)


def test_reading_leaves_memory_flat() -> None:
    """A million requests read, refused or cut short grow memory by less than 4 MiB (a leaked name,
    record set or partition tuple a call would be far more)."""
    from support.memory import growth_over

    grown = growth_over(_read_many, rounds=10)
    assert grown < 4 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB"
