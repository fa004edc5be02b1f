"""The compiled ``kafka_fetch_request`` against its pure-Python reference and kio: for every Fetch
version, the same fields kio reads from the bytes kio writes; for any bytes (cut, flipped, noise),
the compiled call and the reference answer alike, and whatever they take kio reads the same way."""

from __future__ import annotations

import datetime as dt
import io
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from adiskq import _compiled
from adiskq.kafka.wire.fetch_request import FETCH_REQUEST_VERSIONS, fetch_request, fetch_request_reference

_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)


def _kio_class(version: int, name: str) -> Any:
    return getattr(sys.modules[load_request_schema(1, version).__module__], name)


def _build(version: int, name: str, **fields: Any) -> Any:
    cls = _kio_class(version, name)
    names = set(cls.__dataclass_fields__)
    return cls(**{key: value for key, value in fields.items() if key in names})


@st.composite
def _requests(draw: st.DrawFn, version: int) -> Any:
    def topic_fields() -> dict[str, Any]:
        if version >= 13:
            return {"topic_id": uuid.UUID(bytes=draw(st.binary(min_size=16, max_size=16)))}
        return {"topic": draw(st.text(max_size=140))}

    topics = tuple(
        _build(
            version,
            "FetchTopic",
            **topic_fields(),
            partitions=tuple(
                _build(
                    version,
                    "FetchPartition",
                    partition=draw(_I32),
                    current_leader_epoch=draw(_I32),
                    fetch_offset=draw(_I64),
                    last_fetched_epoch=draw(_I32),
                    log_start_offset=draw(_I64),
                    partition_max_bytes=draw(_I32),
                )
                for _ in range(draw(st.integers(0, 3)))
            ),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    forgotten = tuple(
        _build(version, "ForgottenTopic", **topic_fields(), partitions=tuple(draw(st.lists(_I32, max_size=3))))
        for _ in range(draw(st.integers(0, 2)) if version >= 7 else 0)
    )
    return _build(
        version,
        "FetchRequest",
        replica_id=draw(_I32),
        max_wait=dt.timedelta(milliseconds=draw(_I32)),
        min_bytes=draw(_I32),
        max_bytes=draw(_I32),
        isolation_level=draw(st.integers(0, 1)),
        session_id=draw(_I32),
        session_epoch=draw(_I32),
        topics=topics,
        forgotten_topics_data=forgotten,
        rack_id=draw(st.text(max_size=20)),
    )


def _kio_fields(request: Any) -> tuple[Any, ...]:
    """What the gateway uses of kio's request, in ``fetch_request``'s shape."""
    by_id = request.__version__ >= 13
    return (
        request.max_wait // dt.timedelta(milliseconds=1),
        request.min_bytes,
        request.max_bytes,
        request.isolation_level,
        [
            (
                topic.topic_id.bytes if by_id else topic.topic,
                [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in topic.partitions],
            )
            for topic in request.topics
        ],
    )


def _encode(request: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    return buffer.getvalue()


def _kio_read(version: int, payload: bytes) -> tuple[Any, ...] | None:
    try:
        request, _ = entity_reader(load_request_schema(1, version))(payload, 0)
    except Exception:  # kio raises what its readers meet
        return None
    return _kio_fields(request)


@pytest.mark.parametrize("version", FETCH_REQUEST_VERSIONS)
@given(data=st.data())
def test_fields_are_kios(version: int, data: st.DataObject) -> None:
    """Every Fetch version: the compiled call and the reference read the fields kio reads from the
    bytes kio writes, wherever in a message they start, with bytes after them ignored."""
    request = data.draw(_requests(version))
    payload = _encode(request)
    prefix = data.draw(st.binary(max_size=8))
    suffix = data.draw(st.binary(max_size=4))
    message = prefix + payload + suffix
    expected = _kio_fields(request)
    assert _compiled.kafka_fetch_request(message, len(prefix), version) == expected
    assert fetch_request_reference(message, len(prefix), version) == expected
    assert fetch_request(message, len(prefix), version) == expected


@st.composite
def _damaged(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.sampled_from(FETCH_REQUEST_VERSIONS))
    payload = bytearray(_encode(draw(_requests(version))))
    how = draw(st.sampled_from(["cut", "flip", "noise", "insert"]))
    if how == "cut":
        del payload[draw(st.integers(0, len(payload))) :]
    elif how == "flip" and payload:
        at = draw(st.integers(0, len(payload) - 1))
        payload[at] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xC3, payload[at] ^ 0x80]))
    elif how == "insert":
        at = draw(st.integers(0, len(payload)))
        payload[at:at] = draw(st.binary(min_size=1, max_size=6))
    else:
        payload = bytearray(draw(st.binary(max_size=120)))
    return version, bytes(payload)


@given(damaged=_damaged())
def test_damaged_bytes_are_read_alike(damaged: tuple[int, bytes]) -> None:
    """Cut, flipped, inserted or random bytes: the compiled call answers what the reference answers
    (the fields, or None), and bytes they take, kio reads to the same fields."""
    version, payload = damaged
    compiled = _compiled.kafka_fetch_request(payload, 0, version)
    assert compiled == fetch_request_reference(payload, 0, version)
    if compiled is not None:
        assert _kio_read(version, payload) == compiled


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        (b"", "nothing"),
        (b"\0" * 17 + b"\xff\xff\xff\xff", "a null topics array"),
        (b"\0" * 17 + b"\0\0\0\x01\0\x01\xff", "a name that is not UTF-8"),
        (b"\0" * 17 + b"\0\0\0\x01\xff\xff", "a null name"),
        (b"\0" * 17 + b"\x7f\xff\xff\xff", "a count the bytes cannot hold"),
    ],
)
def test_malformed_version_4_requests_are_not_taken(payload: bytes, why: str) -> None:
    """Bytes the reader does not take answer None from both (the gateway then lets kio name the fault)."""
    assert _compiled.kafka_fetch_request(payload, 0, 4) is None, why
    assert fetch_request_reference(payload, 0, 4) is None, why


def test_a_tagged_field_is_left_to_kio() -> None:
    """A request carrying a tagged field (a cluster id) is not taken: kio reads it."""
    request = _build(
        16, "FetchRequest", cluster_id="c", max_wait=dt.timedelta(0), min_bytes=1, topics=(), forgotten_topics_data=()
    )
    payload = _encode(request)
    assert _compiled.kafka_fetch_request(payload, 0, 16) is None
    assert fetch_request_reference(payload, 0, 16) is None
    assert _kio_read(16, payload) == (0, 1, 2**31 - 1, 0, [])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((bytearray(b"\0" * 40), 0, 12), TypeError),
        ((b"\0" * 40, "0", 12), TypeError),
        ((b"\0" * 40, 0, None), TypeError),
        ((b"\0" * 40, 41, 12), ValueError),
        ((b"\0" * 40, -1, 12), ValueError),
        ((b"\0" * 40, 2**70, 12), ValueError),
        ((b"\0" * 40, 0, 3), ValueError),
        ((b"\0" * 40, 0, 17), ValueError),
    ],
)
def test_bad_arguments_raise_the_same_class(arguments: tuple[Any, Any, Any], error: type[Exception]) -> None:
    """Arguments outside the contract raise the same class from both."""
    with pytest.raises(error):
        _compiled.kafka_fetch_request(*arguments)
    with pytest.raises(error):
        fetch_request_reference(*arguments)


def _read_many() -> None:
    """100,000 requests read (taken, cut short, not UTF-8) and arguments refused."""
    request = _build(
        12,
        "FetchRequest",
        max_wait=dt.timedelta(milliseconds=500),
        min_bytes=1,
        topics=tuple(
            _build(
                12,
                "FetchTopic",
                topic=f"topic-{i}",
                partitions=(_build(12, "FetchPartition", partition=0, fetch_offset=i, partition_max_bytes=1 << 20),),
            )
            for i in range(3)
        ),
        forgotten_topics_data=(_build(12, "ForgottenTopic", topic="gone", partitions=(1, 2)),),
    )
    payload = _encode(request)
    not_utf8 = payload.replace(b"topic-2", b"topic-\xff")
    for _ in range(25_000):
        assert _compiled.kafka_fetch_request(payload, 0, 12) is not None
        assert _compiled.kafka_fetch_request(payload[:-9], 0, 12) is None
        assert _compiled.kafka_fetch_request(not_utf8, 0, 12) is None
        with pytest.raises(ValueError, match="version"):
            _compiled.kafka_fetch_request(payload, 0, 3)


def test_reading_leaves_memory_flat() -> None:
    """A million requests read, refused or cut short grow memory by less than 4 MiB (a leaked topic
    name or partition tuple a call would be far more)."""
    from support.memory import growth_over

    grown = growth_over(_read_many, rounds=10)
    assert grown < 4 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB"
