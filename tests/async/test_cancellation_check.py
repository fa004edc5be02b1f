"""push's fast cancellation check agrees with anyio's public answer, and push stays a checkpoint.

The check reads anyio's and Trio's private state (see adiskq/_async/cancellation.py): these tests
hold it to ``current_effective_deadline() == -inf`` in every arrangement of scopes a task meets, so an
anyio or Trio that changes what the state means fails here rather than letting pushes through.

Local stream only: this is the local producer's own write path (a Kafka push hands its record to
the client: README's capability table, push_many).
"""

# The scopes here are cancelled and asked about without awaiting inside them, on purpose.
# ruff: noqa: ASYNC100

from __future__ import annotations

import math
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest

import adiskq
from adiskq._async.cancellation import cancel_check, scope_cancelled

pytestmark = pytest.mark.anyio


def _agrees(check: Callable[[], bool]) -> bool:
    answer = check()
    assert answer == (anyio.current_effective_deadline() == -math.inf)
    return answer


async def test_the_fast_check_is_the_one_in_use_and_agrees_in_every_arrangement_of_scopes() -> None:
    check = cancel_check()
    assert check is not scope_cancelled  # the installed anyio and Trio are read directly
    assert not _agrees(check)
    with anyio.CancelScope() as outer:
        assert not _agrees(check)
        with anyio.CancelScope(shield=True) as shielded:
            outer.cancel()
            assert not _agrees(check)  # a shield hides the cancelled scope outside it
            with anyio.CancelScope() as inner:
                assert not _agrees(check)
                inner.cancel()
                assert _agrees(check)  # a cancelled scope inside the shield
            assert not _agrees(check)
            shielded.shield = False
            assert _agrees(check)  # the shield lifted: the outer scope's cancellation shows
        assert _agrees(check)
    assert not _agrees(check)
    with anyio.move_on_after(0):
        await anyio.lowlevel.cancel_shielded_checkpoint()  # the deadline's cancellation lands
        assert _agrees(check)
    assert not _agrees(check)


async def test_the_check_answers_for_the_task_that_calls_it() -> None:
    """The asyncio check keeps the last task's state: the next task must get its own answer."""
    check = cancel_check()
    answers: dict[str, bool] = {}
    calm_has_asked = anyio.Event()

    async def calm_task() -> None:
        answers["calm"] = _agrees(check)
        calm_has_asked.set()

    async def cancelled_task() -> None:
        await calm_has_asked.wait()
        with anyio.CancelScope() as scope:
            scope.cancel()
            answers["cancelled"] = _agrees(check)

    async with anyio.create_task_group() as group:
        group.start_soon(cancelled_task)
        group.start_soon(calm_task)
    assert answers == {"calm": False, "cancelled": True}
    assert not _agrees(check)  # and the host task, after both


async def test_a_push_in_a_cancelled_scope_raises_and_writes_nothing(stream_path: str) -> None:
    async with adiskq.Producer(stream_path, partitions=1) as producer:
        await producer.push(b"before")
        with anyio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(anyio.get_cancelled_exc_class()):
                await producer.push(b"never", key=b"k")
            with pytest.raises(anyio.get_cancelled_exc_class()):
                await producer.push_many([b"never either"])
        assert (await producer.push(b"after")).offset == 1
    assert [adiskq.read(stream_path, 0, offset).value for offset in (0, 1)] == [b"before", b"after"]
    assert adiskq.stats(stream_path).message_count == 2


async def test_an_endless_push_loop_ends_when_its_scope_is_cancelled(stream_path: str) -> None:
    """Pushes that all go inline never wait, so only the check lets a cancellation in."""
    pushed = 0
    async with adiskq.Producer(stream_path, partitions=1) as producer:
        with anyio.CancelScope() as scope:
            for _ in range(100_000):  # bounded, so a check that never answers fails instead of hanging
                await producer.push(b"x")
                pushed += 1
                if pushed == 1_000:
                    scope.cancel()
        assert pushed == 1_000  # the next push raised, before writing
    assert adiskq.stats(stream_path).message_count == 1_000
