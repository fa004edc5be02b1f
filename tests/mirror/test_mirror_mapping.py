"""The mirror's record mapping, both ways, with no broker: what a Kafka record becomes in a stream
and what goes back to Kafka from it must be the record Kafka had."""

from __future__ import annotations

import pytest

from adiskq._sansio.values import Headers, Message
from adiskq.kafka._mirror_mapping import (
    EXACT_HEADERS,
    OFFSET_HEADER,
    TAG_HEADER,
    decode_header_list,
    encode_header_list,
    local_record,
    offset_of,
    record_crc,
    to_kafka,
)
from adiskq.kafka.wire.mapping import NULLS_HEADER

KafkaHeaders = list[tuple[str, bytes | None]]


def _stored(
    key: bytes | None,
    value: bytes | None,
    headers: KafkaHeaders,
    timestamp_ms: int,
    offset: int,
    *,
    kafka_headers: bool = False,
) -> Message:
    """The message a stream hands back for the record the mirror pushed for this Kafka record
    (``kafka_headers``: a format-5 stream, which stores ``adiskq.Headers``)."""
    record = local_record(key, value, headers, timestamp_ms, offset, kafka_headers=kafka_headers)
    assert isinstance(record.timestamp, int)
    return Message(0, 7, record.timestamp, record.key, record.value, record.headers or {}, record.tag)


CASES: list[tuple[bytes | None, bytes | None, KafkaHeaders]] = [
    (b"k", b"v", []),
    (b"k", b"v", [("a", b"1"), ("b", b"2")]),
    (b"", b"", [("a", b"")]),
    (None, b"v", []),
    (b"k", None, [("a", b"1")]),
    (None, None, []),
    (b"k", b"v", [("a", b"1"), ("a", b"2"), ("b", b"3")]),  # a repeated name
    (b"k", b"v", [("a", None), ("b", b"3")]),  # a null header value
    (b"k", b"v", [(OFFSET_HEADER, b"99"), ("adiskq.kafka.null", b"key")]),  # names the mirror reserves
    (b"k", b"v", [(TAG_HEADER, b"created"), ("b", b"3")]),  # a tag
    (b"k", b"v", [(TAG_HEADER, b"x" * 300)]),  # too long for a tag: stays a header
    (b"k", b"v", [(TAG_HEADER, b"\xff")]),  # not UTF-8: stays a header
    (b"k", b"v", [(TAG_HEADER, b"a"), (TAG_HEADER, b"b")]),  # two: stays headers
    (b"\x00\xff", b"\x00" * 1000, [("\u00e9t\u00e9", b"\xff")]),
]


@pytest.mark.parametrize("kafka_headers", [True, False], ids=["format-5", "before-format-5"])
@pytest.mark.parametrize(("key", "value", "headers"), CASES)
def test_a_kafka_record_comes_back_from_the_stream_exactly(
    key: bytes | None, value: bytes | None, headers: KafkaHeaders, kafka_headers: bool
) -> None:
    message = _stored(key, value, headers, 1_700_000_000_123, 41, kafka_headers=kafka_headers)
    back = to_kafka(message)
    assert (back.key, back.value, back.timestamp_ms) == (key, value, 1_700_000_000_123)
    tag_moved = [name for name, _ in headers].count(TAG_HEADER) == 1 and message.tag is not None
    expected = [h for h in headers if h[0] != TAG_HEADER] + ([(TAG_HEADER, message.tag.encode())] if tag_moved else [])  # type: ignore[union-attr]
    if not tag_moved:
        expected = headers
    assert back.headers == expected
    assert offset_of(message) == 41


def test_a_plain_record_is_stored_without_the_exact_list() -> None:
    message = _stored(b"k", b"v", [("a", b"1"), (TAG_HEADER, b"t")], 5, 3)
    assert message.headers == {"a": b"1", OFFSET_HEADER: b"3"}
    assert message.tag == "t"
    assert message.timestamp_ns == 5_000_000


def test_a_record_whose_headers_do_not_map_keeps_the_first_values_and_the_exact_list() -> None:
    message = _stored(b"k", b"v", [("a", b"1"), ("a", b"2"), ("n", None)], 5, 3)
    assert message.headers["a"] == b"1"
    assert "n" not in message.headers
    assert decode_header_list(message.headers[EXACT_HEADERS]) == [("a", b"1"), ("a", b"2"), ("n", None)]


def test_a_format_5_stream_keeps_repeated_and_null_headers_as_headers() -> None:
    message = _stored(None, b"v", [("a", b"1"), ("a", b"2"), ("n", None)], 5, 3, kafka_headers=True)
    assert isinstance(message.headers, Headers)
    assert EXACT_HEADERS not in message.headers
    assert message.header_list == (("a", b"1"), ("a", b"2"), ("n", None), (NULLS_HEADER, b"key"), (OFFSET_HEADER, b"3"))
    assert message.headers.get_all("a") == [b"1", b"2"]


def test_a_record_using_a_reserved_name_keeps_the_exact_list_on_a_format_5_stream() -> None:
    message = _stored(b"k", b"v", [(OFFSET_HEADER, b"99"), ("a", b"1"), ("a", b"2")], 5, 3, kafka_headers=True)
    assert message.headers[OFFSET_HEADER] == b"3"  # the mirror's position, not the Kafka header
    assert decode_header_list(message.headers[EXACT_HEADERS]) == [(OFFSET_HEADER, b"99"), ("a", b"1"), ("a", b"2")]


def test_a_kafka_record_without_a_timestamp_is_stamped_by_the_producer() -> None:
    assert local_record(b"k", b"v", None, -1, 0).timestamp is None


def test_a_local_message_goes_to_kafka_with_its_tag_as_a_header_and_its_millisecond() -> None:
    message = Message(2, 10, 1_700_000_000_123_456_789, b"k", b"v", {"h": b"1"}, "created")
    side = to_kafka(message)
    assert side.headers == [("h", b"1"), (TAG_HEADER, b"created")]
    assert side.timestamp_ms == 1_700_000_000_123
    assert (side.key, side.value) == (b"k", b"v")


def test_the_header_list_format_round_trips_and_refuses_damage() -> None:
    headers: KafkaHeaders = [("a", b""), ("a", None), ("\u00e9", b"\x00" * 70_000)]
    encoded = encode_header_list(headers)
    assert decode_header_list(encoded) == headers
    for damaged in (encoded[:-1], encoded + b"x", b"\x00", b"\x00\x01\x00\x05ab"):
        with pytest.raises(ValueError, match=EXACT_HEADERS):
            decode_header_list(damaged)


def test_the_crc_of_a_record_changes_with_each_field() -> None:
    base = Message(0, 0, 1_000, b"k", b"v", {"h": b"1"}, "t")
    variants = [
        base._replace(timestamp_ns=1_001),
        base._replace(key=b"K"),
        base._replace(value=b"V"),
        base._replace(headers={"h": b"2"}),
        base._replace(tag=None),
    ]
    assert record_crc(base) == record_crc(base._replace(partition=3, offset=9))
    assert len({record_crc(base), *map(record_crc, variants)}) == 1 + len(variants)
