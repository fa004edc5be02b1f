"""The compiled ``kafka_fetch_answer`` against its pure-Python reference: the same Fetch response
frame for any fields, and the same exception class for any argument that does not fit; the
reference's frames are the very bytes kio writes for the same response."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adiskq import _compiled
from adiskq.kafka.wire.fast_responses import FetchedPartition, fetch_response
from adiskq.kafka.wire.fetch_answer import FETCH_ANSWER_VERSIONS, fetch_answer, fetch_answer_reference
from adiskq.kafka.wire.protocol import frame_payload

_I16 = st.integers(-(2**15), 2**15 - 1)
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_BATCHES = st.lists(st.binary(max_size=200), max_size=3)
_PARTITIONS = st.lists(st.tuples(_I32, _I16, _I64, _I64, _BATCHES), max_size=3)
_NAMES = st.text(max_size=150)  # past 127 bytes: two-byte varint lengths
_IDS = st.binary(min_size=16, max_size=16)


def _topics(version: int) -> st.SearchStrategy[list[tuple[Any, list[Any]]]]:
    return st.lists(st.tuples(_IDS if version >= 13 else _NAMES, _PARTITIONS), max_size=3)


@pytest.mark.parametrize("version", FETCH_ANSWER_VERSIONS)
@given(data=st.data(), correlation_id=_I32)
def test_compiled_and_reference_frames_are_kios_bytes(version: int, data: st.DataObject, correlation_id: int) -> None:
    """Every Fetch version: the compiled frame, the reference's, and kio's (through the hand-written
    payload kio's bytes are checked against) are the same bytes."""
    topics = data.draw(_topics(version))
    frame = _compiled.kafka_fetch_answer(correlation_id, version, topics)
    assert frame == fetch_answer_reference(correlation_id, version, topics)
    assert frame == fetch_answer(correlation_id, version, topics)
    expected = frame_payload(
        correlation_id,
        1,
        version,
        fetch_response(
            version,
            [
                (
                    uuid.UUID(bytes=topic) if version >= 13 else topic,
                    [FetchedPartition(p[0], p[1], p[2], p[3], b"".join(p[4])) for p in partitions],
                )
                for topic, partitions in topics
            ],
        ),
    )
    assert frame == expected


_ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.binary(max_size=20),
    st.text(max_size=5),
    st.just("\ud800"),  # not encodable as UTF-8
    st.just("x" * 32768),  # a name over Kafka's 32767 bytes
    st.just(b"\0" * 16),
    st.lists(st.binary(max_size=4), max_size=2),
    st.tuples(st.integers(), st.integers()),
    st.floats(allow_nan=False),
)


def _hostile(draw: st.DrawFn, valid: Any, *, top: bool = False) -> Any:
    """``valid`` with one part (at any depth) replaced by anything (``top``: the argument list,
    whose parts are replaced but which stays a list of three)."""
    if not top and (draw(st.booleans()) or not isinstance(valid, list | tuple) or not valid):
        return draw(_ANYTHING) if draw(st.integers(0, 3)) else valid
    at = draw(st.integers(0, len(valid) - 1))
    parts = list(valid)
    parts[at] = _hostile(draw, parts[at])
    if not top and draw(st.integers(0, 5)) == 0:
        parts.append(draw(_ANYTHING))  # one too many
    return type(valid)(parts) if isinstance(valid, tuple) else parts


@st.composite
def _hostile_arguments(draw: st.DrawFn) -> tuple[Any, Any, Any]:
    version = draw(st.sampled_from([*FETCH_ANSWER_VERSIONS, 3, 17, -1]))
    valid_version = min(max(version, 4), 16)
    arguments = (draw(_I32), version, draw(_topics(valid_version)))
    return tuple(_hostile(draw, list(arguments), top=True))  # type: ignore[return-value]


def _outcome(function: Any, arguments: tuple[Any, ...]) -> bytes | type[BaseException]:
    try:
        frame: bytes = function(*arguments)
    except (TypeError, ValueError) as error:
        return type(error)
    return frame


@given(arguments=_hostile_arguments())
def test_hostile_arguments_fail_alike(arguments: tuple[Any, Any, Any]) -> None:
    """Any argument at any depth replaced by anything (wrong types, out-of-range ints, a topic id not
    16 bytes, a name over 32767 bytes or not encodable, a partition tuple too long): the compiled
    call answers the reference's frame or raises the reference's exception class."""
    assert _outcome(_compiled.kafka_fetch_answer, arguments) == _outcome(fetch_answer_reference, arguments)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((0, 16, [(b"short", [])]), ValueError),
        ((0, 12, [(b"0123456789abcdef", [])]), TypeError),
        ((0, 16, [("name", [])]), TypeError),
        ((0, 12, [("x" * 32768, [])]), ValueError),
        ((0, 12, [("name", [(0, 0, 0, 0, [b"ok", bytearray(b"no")])])]), TypeError),
        ((0, 12, [("name", [(0, 2**15, 0, 0, [])])]), ValueError),
        ((0, 12, [("name", [(0, 0, 0, 0)])]), TypeError),
        ((2**31, 12, []), ValueError),
        ((0, 17, []), ValueError),
        ((0, 12, {"name": []}), TypeError),
    ],
)
def test_named_faults_raise_the_same_class(arguments: tuple[Any, Any, Any], error: type[Exception]) -> None:
    """Each kind of bad argument raises its class from both (the compiled call and the reference)."""
    with pytest.raises(error):
        _compiled.kafka_fetch_answer(*arguments)
    with pytest.raises(error):
        fetch_answer_reference(*arguments)


def test_wrong_argument_count_is_a_type_error() -> None:
    """The compiled call takes exactly three arguments."""
    with pytest.raises(TypeError):
        _compiled.kafka_fetch_answer(0, 12)


def _answer_many() -> None:
    """100,000 frames written and arguments refused."""
    topics = [(b"0123456789abcdef", [(0, 0, 110, 0, [b"x" * 1000, b"y" * 100]), (1, 3, -1, -1, [])])]
    bad = [(b"0123456789abcdef", [(0, 0, 110, 0, [b"x", "not bytes"])])]
    for _ in range(50_000):
        assert len(_compiled.kafka_fetch_answer(7, 16, topics)) > 1100
        with pytest.raises(TypeError):
            _compiled.kafka_fetch_answer(7, 16, bad)


def test_answering_leaves_memory_flat() -> None:
    """A million frames written or refused grow memory by less than 4 MiB."""
    from support.memory import growth_over

    grown = growth_over(_answer_many, rounds=10)
    assert grown < 4 * 2**20, f"memory grew by {grown / 2**20:.1f} MiB"
