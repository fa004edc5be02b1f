"""The hand-written Produce and Fetch responses are the very bytes kio writes for the same fields, in
every version the gateway serves (random fields: names, offsets, error codes, messages, records)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from adiskq.kafka._registry import API_TABLE, _class_of
from adiskq.kafka.wire.fast_responses import (
    FETCH_TOPIC_IDS,
    FetchedPartition,
    ProducedPartition,
    fetch_response,
    produce_response,
)
from adiskq.kafka.wire.protocol import encode_response, frame_payload

_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_CODES = st.sampled_from(list(ErrorCode))
_NAMES = st.text(min_size=0, max_size=300)  # past 127 bytes: varint lengths of two bytes
_MESSAGES = st.none() | st.text(max_size=200)
_RECORDS = st.binary(max_size=300)


def _kio(api_key: int, version: int, class_name: str, **fields: Any) -> Any:
    cls = _class_of(api_key, version, class_name)
    names = set(cls.__dataclass_fields__)
    return cls(**{name: value for name, value in fields.items() if name in names})


_PRODUCED = st.builds(
    ProducedPartition,
    partition=_I32,
    error_code=_CODES,
    base_offset=_I64,
    record_error=st.none() | st.tuples(_I32, _MESSAGES),
    error_message=_MESSAGES,
)
_FETCHED = st.builds(
    FetchedPartition, partition=_I32, error_code=_CODES, high_watermark=_I64, log_start_offset=_I64, records=_RECORDS
)


@pytest.mark.parametrize("version", range(API_TABLE[0].min_version, API_TABLE[0].max_version + 1))
@given(topics=st.lists(st.tuples(_NAMES, st.lists(_PRODUCED, max_size=3)), max_size=3), correlation_id=_I32)
def test_produce_response_is_kios_bytes(
    version: int, topics: list[tuple[str, list[ProducedPartition]]], correlation_id: int
) -> None:
    """Every Produce version: the written response frame equals kio's for the same fields."""
    expected = _kio(
        0,
        version,
        "ProduceResponse",
        throttle_time=dt.timedelta(0),
        responses=tuple(
            _kio(
                0,
                version,
                "TopicProduceResponse",
                name=name,
                partition_responses=tuple(
                    _kio(
                        0,
                        version,
                        "PartitionProduceResponse",
                        index=part.partition,
                        error_code=part.error_code,
                        base_offset=part.base_offset,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=()
                        if part.record_error is None or version < 8  # record errors came in v8
                        else (
                            _kio(
                                0,
                                version,
                                "BatchIndexAndErrorMessage",
                                batch_index=part.record_error[0],
                                batch_index_error_message=part.record_error[1],
                            ),
                        ),
                        error_message=part.error_message,
                    )
                    for part in partitions
                ),
            )
            for name, partitions in topics
        ),
    )
    got = frame_payload(correlation_id, 0, version, produce_response(version, topics))
    assert got == encode_response(correlation_id, expected)


@pytest.mark.parametrize("version", range(API_TABLE[1].min_version, API_TABLE[1].max_version + 1))
@given(topics=st.lists(st.tuples(_NAMES, st.uuids(), st.lists(_FETCHED, max_size=3)), max_size=3), correlation_id=_I32)
def test_fetch_response_is_kios_bytes(
    version: int, topics: list[tuple[str, uuid.UUID, list[FetchedPartition]]], correlation_id: int
) -> None:
    """Every Fetch version: the written response frame equals kio's for the same fields (topics by
    name up to v12, by id from v13)."""
    expected = _kio(
        1,
        version,
        "FetchResponse",
        throttle_time=dt.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            _kio(
                1,
                version,
                "FetchableTopicResponse",
                topic=name,
                topic_id=topic_id,
                partitions=tuple(
                    _kio(
                        1,
                        version,
                        "PartitionData",
                        partition_index=part.partition,
                        error_code=part.error_code,
                        high_watermark=part.high_watermark,
                        last_stable_offset=part.high_watermark,
                        log_start_offset=part.log_start_offset,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=part.records,
                    )
                    for part in partitions
                ),
            )
            for name, topic_id, partitions in topics
        ),
    )
    named = [(topic_id if version >= FETCH_TOPIC_IDS else name, partitions) for name, topic_id, partitions in topics]
    got = frame_payload(correlation_id, 1, version, fetch_response(version, named))
    assert got == encode_response(correlation_id, expected)


@pytest.mark.parametrize("version", [12, 13])
def test_fetch_response_refuses_a_topic_named_the_other_way(version: int) -> None:
    """A topic given by id to Fetch v12, or by name to v13, is a TypeError, not a malformed answer."""
    topic: str | uuid.UUID = uuid.uuid4() if version < FETCH_TOPIC_IDS else "t"
    with pytest.raises(TypeError, match=f"Fetch v{version} names a topic by"):
        fetch_response(version, [(topic, [])])
