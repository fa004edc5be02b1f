"""A Produce's usual answer (one topic, one partition, no error) written into a template: the very
bytes ``produce_response`` writes (which are kio's), in every version the gateway serves."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from adiskq.kafka._registry import API_TABLE
from adiskq.kafka.apis import produce as produce_module
from adiskq.kafka.apis.produce import one_partition_response
from adiskq.kafka.wire.fast_responses import ProducedPartition, produce_response


@pytest.mark.parametrize("version", range(API_TABLE[0].min_version, API_TABLE[0].max_version + 1))
@given(
    topic=st.text(max_size=300),  # past 127 bytes: a varint length of two bytes
    partition=st.integers(-(2**31), 2**31 - 1),
    base_offset=st.integers(-(2**63), 2**63 - 1),
)
def test_the_templated_answer_is_produce_responses_bytes(
    version: int, topic: str, partition: int, base_offset: int
) -> None:
    """Every version, topic name, partition and offset: the same bytes as the full writer's."""
    expected = produce_response(version, [(topic, [ProducedPartition(partition, ErrorCode.none, base_offset)])])
    assert one_partition_response(version, topic, partition, base_offset) == expected
    assert one_partition_response(version, topic, partition, base_offset) == expected  # from the kept template


def test_templates_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the number of templates kept, answers are still right, and no more are kept."""
    monkeypatch.setattr(produce_module, "_TEMPLATES", {})
    monkeypatch.setattr(produce_module, "_TEMPLATES_KEPT", 3)
    for number in range(6):
        topic = f"topic-{number}"
        expected = produce_response(9, [(topic, [ProducedPartition(0, ErrorCode.none, number)])])
        assert one_partition_response(9, topic, 0, number) == expected
    assert len(produce_module._TEMPLATES) == 3
