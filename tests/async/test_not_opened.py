"""A Consumer or ConsumerGroup read without ``async with`` refuses at once, naming ``async with``.

Opening on the first read (as it once did) left nothing to close it: a group read that way took
``commit()`` and then stored nothing when the loop ended, without a word. As aiokafka's consumer
must be started before it is iterated, an adiskq reader is opened by ``async with`` only.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
Consumer, named ConsumerGroup, commit and lag map); a commit past a partition's end stays local
(a Kafka group does not check it against the partition's end).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio
import pytest
from support.consumer import Writer

import adiskq

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio


async def read_all(reader: adiskq.Consumer | adiskq.ConsumerGroup) -> None:
    """`async for` over the reader, failing if it delivers anything."""
    async for message in reader:
        raise AssertionError(f"delivered {message} without being opened")


async def write(place: str, values: list[bytes]) -> None:
    async with adiskq.Producer(place, partitions=1) as producer:
        await producer.push_many(values)


async def test_a_group_iterated_without_async_with_raises_at_once_and_opens_nothing(where: Where) -> None:
    """`async for` over a ConsumerGroup never entered raises ClosedError naming `async with` before
    delivering anything: no member joins, so there is nothing to commit and lose."""
    stream_path = where.new()
    await write(stream_path, [b"a", b"b"])
    group = adiskq.ConsumerGroup(stream_path, name="g", commit_interval=3600)
    with anyio.fail_after(10), pytest.raises(adiskq.ClosedError, match=r"async with adiskq\.ConsumerGroup") as caught:
        await read_all(group)
    assert "commits" in str(caught.value)
    assert "when the block ends" in str(caught.value)
    if not where.kafka:  # a local member that joined would have made the group's folder
        assert not os.path.exists(os.path.join(stream_path, "groups", "g"))  # noqa: ASYNC240 - a test's look
    with pytest.raises(adiskq.ClosedError, match="async with"):
        await group.batches().__anext__()
    with pytest.raises(adiskq.ClosedError, match="async with"):
        group.commit(adiskq.Message(0, 0, 0, b"", b"a"))
    async with group:  # the same group, entered, reads and stores as any other
        message = await group.__anext__()
        group.commit(message)
    async with adiskq.ConsumerGroup(stream_path, name="g", end="close") as again:
        assert [m.value async for m in again] == [b"b"]


async def test_a_consumer_iterated_without_async_with_raises_at_once(where: Where) -> None:
    """`async for` over a Consumer never entered raises ClosedError naming `async with`, as the
    group does."""
    stream_path = where.new()
    await write(stream_path, [b"a"])
    consumer = adiskq.Consumer(stream_path, end="close")
    with anyio.fail_after(10), pytest.raises(adiskq.ClosedError, match=r"async with adiskq\.Consumer\("):
        await read_all(consumer)
    with pytest.raises(adiskq.ClosedError, match="async with"):
        await consumer.__anext__()
    async with consumer:
        assert [m.value async for m in consumer] == [b"a"]


async def test_lag_and_flush_of_a_group_never_opened_raise_as_iteration_does(where: Where) -> None:
    """lag() and flush() of a ConsumerGroup never entered raise ClosedError naming `async with`,
    as `async for` does, instead of answering quietly."""
    stream_path = where.new()
    await write(stream_path, [b"a"])
    group = adiskq.ConsumerGroup(stream_path, name="g")
    with pytest.raises(adiskq.ClosedError, match="async with"):
        await group.lag()
    with pytest.raises(adiskq.ClosedError, match="async with"):
        await group.flush()


async def test_a_commit_past_the_partitions_end_is_refused(stream_path: str) -> None:
    """commit() of a message the partition does not hold (an offset past its end) raises, and no
    commit past the end is stored (it would skip messages written later)."""
    with Writer(stream_path) as writer:
        writer.append([b"a", b"b"])
    async with adiskq.ConsumerGroup(stream_path, name="g") as group:
        with anyio.fail_after(10):
            first = await group.__anext__()
        with pytest.raises(adiskq.InvalidArgumentError, match=r"ends at 2"):
            group.commit(first._replace(offset=100))
        group.commit(first)
    async with adiskq.ConsumerGroup(stream_path, name="g", end="close") as again:
        assert [m.value async for m in again] == [b"b"]
