"""The deadlines of Trio's waits, kept by one system task per run (``trio_deadlines.py``).

Trio only: on asyncio a wait's deadline is a loop timer (``loop.call_later``), which this module
replaces on Trio. The runs use Trio's ``MockClock`` that jumps to the next deadline whenever every
task sleeps: time passes without sleeping, and each expiry is seen at its exact instant.

Local stream only: Trio's deadlines of a local reader's and producer's waits (a Kafka backend
waits in its client: README's capability table, kafka=).
"""

from __future__ import annotations

import math

import anyio
import pytest
import trio
import trio.testing

from adiskq._async.trio_deadlines import TrioDeadlines

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, object]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


class FakeWaiter:
    """Records when its wait expired."""

    def __init__(self) -> None:
        self.expired_at = math.nan
        self.expired = anyio.Event()

    def expire(self) -> None:
        self.expired_at = trio.current_time()
        self.expired.set()


async def test_each_wait_expires_at_its_deadline_and_not_after_it_was_discarded() -> None:
    deadlines = TrioDeadlines.start()
    start = trio.current_time()
    soon, discarded, late = FakeWaiter(), FakeWaiter(), FakeWaiter()
    deadlines.add(late, start + 30)  # type: ignore[arg-type]
    deadlines.add(discarded, start + 5)  # type: ignore[arg-type]
    deadlines.add(soon, start + 2)  # type: ignore[arg-type]
    deadlines.discard(discarded)  # type: ignore[arg-type]
    with anyio.fail_after(1000):  # on the mock clock too: a keeper that missed them fails, not hangs
        await soon.expired.wait()
        assert soon.expired_at == start + 2
        await late.expired.wait()
    assert late.expired_at == start + 30
    assert math.isnan(discarded.expired_at)


async def test_an_earlier_deadline_wakes_the_keeper_sleeping_for_a_later_one() -> None:
    deadlines = TrioDeadlines.start()
    start = trio.current_time()
    far, near = FakeWaiter(), FakeWaiter()
    deadlines.add(far, start + 100)  # type: ignore[arg-type]
    await trio.testing.wait_all_tasks_blocked()  # the keeper sleeps until start + 100
    deadlines.add(near, start + 1)  # type: ignore[arg-type]
    with anyio.fail_after(1000):
        await near.expired.wait()
    assert near.expired_at == start + 1
    assert math.isnan(far.expired_at)
    deadlines.discard(far)  # type: ignore[arg-type]


async def test_a_deadline_added_after_an_expiry_is_kept_too() -> None:
    """The keeper goes back to sleep after each expiry and keeps deadlines added meanwhile."""
    deadlines = TrioDeadlines.start()
    for round_ in range(3):
        waiter = FakeWaiter()
        deadline = trio.current_time() + 1 + round_
        deadlines.add(waiter, deadline)  # type: ignore[arg-type]
        with anyio.fail_after(1000):
            await waiter.expired.wait()
        assert waiter.expired_at == deadline
