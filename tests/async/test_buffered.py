"""``async for``'s buffer: the compiled ``Buffer`` and its pure-Python form behave alike.

The tests of a consumer reading through its buffer take ``where`` and run on a local stream and on
a Kafka topic (README's capability table: ``Consumer`` maps; both backends' readers hand out
batches through this buffer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import pytest

import adiskq
from adiskq._async.buffered import MessageBuffer
from adiskq._sansio import core
from adiskq._sansio.values import Message

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio

KINDS = ["python", "compiled"]


def make(kind: str, refill: Callable[[], Awaitable[Message]]) -> MessageBuffer:
    if kind == "python":
        return MessageBuffer(refill)
    assert core.Buffer is not None, "the compiled core is not built"
    return core.Buffer(refill)  # type: ignore[no-any-return]


def messages(count: int, first: int = 0) -> list[Message]:
    return [Message(0, offset, offset, b"k", b"v") for offset in range(first, first + count)]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "compiled" and not core.COMPILED:
        pytest.fail("the compiled core is not in use: install with the README's command")
    return str(request.param)


async def test_buffered_messages_come_first_then_refill_is_asked(kind: str) -> None:
    refills = 0

    async def refill() -> Message:
        nonlocal refills
        refills += 1
        if refills > 1:
            raise StopAsyncIteration
        buffer.set(messages(3, 10), 1)
        return messages(1, 10)[0]

    buffer = make(kind, refill)
    buffer.set(messages(2))
    got = [message.offset async for message in buffer]
    assert got == [0, 1, 10, 11, 12]
    assert refills == 2
    assert buffer.remaining == 0


async def test_take_clear_and_remaining(kind: str) -> None:
    async def refill() -> Message:
        raise StopAsyncIteration

    buffer = make(kind, refill)
    assert buffer.take(5) is None
    buffer.set(messages(5), 1)
    assert buffer.remaining == 4
    assert [m.offset for m in buffer.take(2) or []] == [1, 2]
    assert buffer.remaining == 2
    assert (await buffer.__anext__()).offset == 3
    buffer.clear()
    assert buffer.remaining == 0
    assert buffer.take(1) is None


async def test_a_closed_buffer_hands_out_nothing_it_held(kind: str) -> None:
    async def refill() -> Message:
        raise adiskq.ClosedError("closed")

    buffer = make(kind, refill)
    buffer.set(messages(3))
    buffer.close()
    with pytest.raises(adiskq.ClosedError):
        await buffer.__anext__()
    buffer.set(messages(3))  # even set again: closed is for good
    with pytest.raises(adiskq.ClosedError):
        await buffer.__anext__()


def test_the_awaitable_gives_a_message_through_the_iterator_protocol_too(kind: str) -> None:
    """Awaited by hand (``__await__().__next__()``), a buffered message comes back whole, not as
    StopIteration's arguments (a Message is a tuple)."""

    async def refill() -> Message:
        raise StopAsyncIteration

    buffer = make(kind, refill)
    buffer.set(messages(1, 7))
    awaitable = buffer.__anext__()
    with pytest.raises(StopIteration) as stopped:
        awaitable.__await__().__next__()  # type: ignore[attr-defined]
    assert stopped.value.value == messages(1, 7)[0]


async def test_a_consumer_reads_through_its_buffer_after_a_seek(where: Where) -> None:
    """Messages taken one at a time, then the rest with ``async for``: each once, in order, and
    ``position`` counts what was handed out, not what was buffered."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([adiskq.Record(b"%d" % i, key="k") for i in range(600)])
    async with adiskq.Consumer(stream_path, start="oldest", end="close") as consumer:
        first = [await consumer.__anext__() for _ in range(3)]
        assert [m.offset for m in first] == [0, 1, 2]
        assert consumer.position == 3
        rest = [m.offset async for m in consumer]
    assert rest == list(range(3, 600))


async def test_the_next_message_can_be_read_in_a_task_while_messages_are_buffered(where: Where) -> None:
    """``tg.start_soon(consumer.__anext__)`` works whichever core runs, also for a buffered message."""
    stream_path = where.new()
    async with adiskq.Producer(stream_path) as producer:
        await producer.push_many([b"a", b"b", b"c"])
    async with adiskq.Consumer(stream_path) as consumer:
        assert (await anext(consumer)).value == b"a"  # b and c are buffered now
        async with anyio.create_task_group() as tg:
            tg.start_soon(consumer.__anext__)
        assert consumer.position == 2
        assert (await anext(consumer)).value == b"c"


async def test_a_step_awaited_while_another_is_outstanding_gives_its_own_message(kind: str) -> None:
    """``__anext__`` awaitables held at once (tasks made of them) each give their own message, in
    the order they are awaited, also where a step's awaitable object is reused once dropped."""

    async def refill() -> Message:
        raise StopAsyncIteration

    buffer = make(kind, refill)
    buffer.set(messages(4))
    first = buffer.__anext__()
    assert (await first).offset == 0
    del first  # dropped: the next step may reuse it
    second, third = buffer.__anext__(), buffer.__anext__()
    assert (await second).offset == 1
    assert (await third).offset == 2
    assert [m.offset async for m in buffer] == [3]
