"""Group commits after a power cut: a stored commit past the partition's end is moved back.

Local stream only: a power cut's effect on a stream's offsets file (README's capability table: a
Kafka group's commits are Kafka's committed offsets)."""

from __future__ import annotations

import pytest

import adiskq
from adiskq._storage.offsets import load_offsets, save_offsets

pytestmark = pytest.mark.anyio


async def test_a_commit_past_the_end_is_moved_back_so_new_messages_are_not_skipped(stream_path: str) -> None:
    """After a power cut took back messages a group had committed, the group stores the partition's
    end, and a restarted group reads the new messages that take those offsets."""
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([b"kept %d" % i for i in range(5)])
    save_offsets(stream_path, "billing", {0: 10})  # committed 0..9; the power cut kept only 0..4
    async with adiskq.ConsumerGroup(stream_path, name="billing", end="close") as group:
        assert [message async for message in group] == []
    assert load_offsets(stream_path, "billing") == {0: 5}
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([b"new %d" % i for i in range(10)])  # offsets 5..14
    async with adiskq.ConsumerGroup(stream_path, name="billing", end="close") as group:
        values = [message.value async for message in group]
    assert values == [b"new %d" % i for i in range(10)]
