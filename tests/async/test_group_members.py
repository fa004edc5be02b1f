"""Members of one named group: shares, hand-overs, exclusive mode, assignment changes, and stats.

Members here live in this process (each its own ``ConsumerGroup``); across processes, see
test_group_members_processes.py. Members look at each other while they are read, so each test keeps
its members reading in tasks.

The tests taking ``where`` run on a local stream and on a Kafka topic (README's capability table:
named groups, commits and assignment map; Kafka's coordinator assigns the partitions, so those
tests wait for a share rather than name it). The others stay local, each saying why: they time a
local group's looks (``rebalance_interval``, the ring on leaving), read its files (the offsets file,
``stats``), use ``exclusive=True`` or an unnamed group (not on Kafka), or count on what the table's
rows say differs (an eager rebalance, partitions added while members read).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import anyio
import anyio.abc
import pytest
from asyncinotify import Inotify, Mask
from support.backends import fill as fill_partitions
from support.consumer import Writer

import adiskq
from adiskq._sansio.capabilities import is_kafka_url
from adiskq._storage.leases import Membership
from adiskq._storage.offsets import load_offsets

if TYPE_CHECKING:
    from support.backends import Where

pytestmark = pytest.mark.anyio

FAST = 0.05  # rebalance_interval where a test waits for looks, not for a doorbell
NEVER = 3600.0  # rebalance_interval where only the doorbell (a ring) may start a look


_members: list[adiskq.ConsumerGroup] = []  # every member the running test made
_progress: list[anyio.Event] = []  # set when a member here reads a message (until waits on it)


@pytest.fixture(autouse=True)
def _forget_members() -> Iterator[None]:
    yield
    _members.clear()
    _progress.clear()


def _note_progress() -> None:
    for event in _progress:
        event.set()


async def _follow_assignments(group: adiskq.ConsumerGroup) -> None:
    async for _ in group.assignments():
        _note_progress()


def _group_folder(stream_path: str) -> str:
    return os.path.join(os.path.realpath(stream_path), "groups", "g")


async def _follow_stored_offsets(stream_path: str) -> None:
    """Note every write under the group's folder (a member storing its commits)."""
    with Inotify() as inotify:
        inotify.add_watch(_group_folder(stream_path), Mask.MOVED_TO | Mask.CLOSE_WRITE)
        while True:
            await anyio.wait_readable(inotify.fd)
            os.read(inotify.fd, 65536)
            _note_progress()


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait (10 s at most) until ``condition`` holds. It is looked at again, once every task has had
    its turn, whenever a member changes its assignment, reads a message or stores commits."""
    with anyio.fail_after(10, reason=f"waiting for {what}"):
        async with anyio.create_task_group() as followers:
            for group in _members:
                # A Kafka member has its id once it joined, which it does while it polls.
                if (group.member_id is not None or is_kafka_url(group.path)) and not group.closed:
                    followers.start_soon(_follow_assignments, group)
            if _members and _members[0].member_id is not None and not is_kafka_url(_members[0].path):
                followers.start_soon(_follow_stored_offsets, _members[0].path)
            while True:
                changed = anyio.Event()
                _progress[:] = [changed]
                await anyio.wait_all_tasks_blocked()
                if condition():
                    break
                await changed.wait()
            followers.cancel_scope.cancel()


async def read(group: adiskq.ConsumerGroup, seen: list[adiskq.Message]) -> None:
    """Read the group forever, keeping and committing every message."""
    async for message in group:
        seen.append(message)
        group.commit(message)
        _note_progress()


async def read_until_closed(group: adiskq.ConsumerGroup, seen: list[adiskq.Message]) -> None:
    """``read``, until another task closes the group."""
    with contextlib.suppress(adiskq.ClosedError):
        await read(group, seen)


async def read_without_commits(group: adiskq.ConsumerGroup, seen: list[adiskq.Message]) -> None:
    """Read the group forever, keeping every message, committing none."""
    async for message in group:
        seen.append(message)
        _note_progress()


def fill(writer: Writer, per_partition: int, partitions: int) -> None:
    for partition in range(partitions):
        writer.append([b"p%d" % partition] * per_partition, partition=partition)


async def fill_each(place: str, per_partition: int, partitions: int) -> None:
    """``per_partition`` messages in each partition of a stream or topic (made with ``partitions``)."""
    await fill_partitions(place, {p: [b"p%d" % p] * per_partition for p in range(partitions)}, partitions)


# A Kafka member hears of a rebalance at its next heartbeat (every 3 s by default): members here
# beat often, so a hand-over takes a fraction of a second.
KAFKA_MEMBER = {"heartbeat.interval.ms": 100}


def member(path: str, **options: object) -> adiskq.ConsumerGroup:
    if is_kafka_url(path):
        options.setdefault("kafka", KAFKA_MEMBER)
    group = adiskq.ConsumerGroup(path, name="g", **options)  # type: ignore[arg-type]
    _members.append(group)
    return group


def stored(path: str) -> dict[int, int]:
    return load_offsets(os.path.realpath(path), "g")


def disjoint_and_complete(groups: list[adiskq.ConsumerGroup], partitions: int) -> bool:
    held = sorted(p for group in groups for p in group.assignment)
    return held == list(range(partitions))


# -- sharing ---------------------------------------------------------------------------------------


async def test_a_lone_member_holds_every_partition_once_open(stream_path: str) -> None:
    """A named group's only member holds every partition as soon as it is open.

    Local only: a Kafka member is given its share while it polls, after it opened (the table's
    commit/assignment row: Kafka's coordinator assigns the partitions)."""
    with Writer(stream_path, partitions=3):
        pass
    async with member(stream_path) as group:
        assert group.assignment == (0, 1, 2)


async def test_two_members_split_the_partitions(stream_path: str) -> None:
    """Two members of a group over four partitions end up with two each.

    Local only here: how a group of Kafka shares them is held in
    tests/kafka_backend/test_api_both_backends.py, and members that hand partitions over above."""
    with Writer(stream_path, partitions=4):
        pass
    async with (
        member(stream_path, rebalance_interval=FAST) as one,
        member(stream_path, rebalance_interval=FAST) as two,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, one, [])
        tg.start_soon(read, two, [])
        await until(lambda: len(one.assignment) == len(two.assignment) == 2, "two partitions each")
        assert disjoint_and_complete([one, two], 4)
        tg.cancel_scope.cancel()


async def test_members_that_commit_as_they_go_read_each_message_once(where: Where) -> None:
    """Partitions handed over between members that commit each message are read once in all, not twice."""
    stream_path = where.new()
    await fill_each(stream_path, 50, 4)
    seen_one: list[adiskq.Message] = []
    seen_two: list[adiskq.Message] = []
    async with (
        member(stream_path, rebalance_interval=FAST) as one,
        member(stream_path, rebalance_interval=FAST) as two,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, one, seen_one)
        tg.start_soon(read, two, seen_two)
        await until(lambda: len(one.assignment) == len(two.assignment) == 2, "two partitions each")
        await fill_each(stream_path, 50, 4)
        await until(lambda: len(seen_one) + len(seen_two) >= 400, "every message read")
        tg.cancel_scope.cancel()
    read_by = sorted((m.partition, m.offset) for m in seen_one + seen_two)
    assert read_by == [(p, o) for p in range(4) for o in range(100)]


async def test_members_keep_each_others_commits(stream_path: str) -> None:
    """Members storing commits of different partitions keep each other's, in one offsets file.

    Local only: it reads the stream's offsets file (the table's commit row: Kafka keeps its own)."""
    with Writer(stream_path, partitions=2) as writer:
        async with (
            member(stream_path, rebalance_interval=FAST, commit_interval=0.01) as one,
            member(stream_path, rebalance_interval=FAST, commit_interval=0.01) as two,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(read, one, [])
            tg.start_soon(read, two, [])
            await until(lambda: len(one.assignment) == len(two.assignment) == 1, "one partition each")
            fill(writer, 3, 2)
            await until(lambda: stored(stream_path) == {0: 3, 1: 3}, "both members' commits stored")
            tg.cancel_scope.cancel()


async def test_a_closing_member_hands_over_at_once_after_its_last_commit(stream_path: str) -> None:
    """A closing member's partitions go to the other at once (a ring, not a timer), which goes on after its commits.

    Local only: it times a local group's looks (``rebalance_interval``); a Kafka member leaving
    says so to the coordinator, as the hand-over tests above show."""
    with Writer(stream_path, partitions=2) as writer:
        seen: dict[str, list[adiskq.Message]] = {"stays": [], "goes": []}
        # Only rings wake this member to look: its timer is an hour.
        async with member(stream_path, rebalance_interval=NEVER) as stays, anyio.create_task_group() as tg:
            tg.start_soon(read, stays, seen["stays"])
            async with member(stream_path, rebalance_interval=FAST) as goes, anyio.create_task_group() as reading:
                reading.start_soon(read, goes, seen["goes"])
                await until(lambda: len(goes.assignment) == len(stays.assignment) == 1, "a partition each")
                (handed,) = goes.assignment
                fill(writer, 5, 2)
                await until(lambda: len(seen["goes"]) == 5, "the leaving member's messages read")
                reading.cancel_scope.cancel()
            await until(lambda: stays.assignment == (0, 1), "the partition handed over")
            writer.append([b"after"], partition=handed)
            await until(lambda: any(m.value == b"after" for m in seen["stays"]), "the new message read")
            tg.cancel_scope.cancel()
    assert [m.offset for m in seen["goes"]] == [0, 1, 2, 3, 4]
    assert [m.offset for m in seen["stays"] if m.partition == handed] == [5]


async def test_a_member_closed_in_a_cancelled_scope_stores_its_commits_and_leaves(where: Where) -> None:
    """Closing a member inside a cancelled scope stores its commits and frees its partitions (the
    next member holds them without waiting for the first to time out)."""
    stream_path = where.new()
    await fill_each(stream_path, 3, 2)
    group = member(stream_path, commit_interval=NEVER)
    await group.__aenter__()
    with anyio.fail_after(10):
        for _ in range(6):
            group.commit(await group.__anext__())
    with anyio.CancelScope() as scope:
        scope.cancel()
        await group.aclose()
    assert adiskq.lag(stream_path, "g") == {0: 0, 1: 0}
    if not where.kafka:  # stats() reads a stream's member files
        assert adiskq.stats(stream_path).members["g"] == ()
    async with member(stream_path) as again, anyio.create_task_group() as tg:
        tg.start_soon(read, again, [])  # a Kafka member is given its share while it polls
        await until(lambda: again.assignment == (0, 1), "both partitions held again")
        tg.cancel_scope.cancel()


async def test_a_partition_handed_over_without_commits_keeps_where_it_started(stream_path: str) -> None:
    """A partition given back before any commit carries its start: the next holder does not resolve "newest" again.

    Local only: Kafka keeps nothing for a partition without commits, so its next holder starts it at
    ``start=`` again (the table's commit/assignment row)."""
    with Writer(stream_path, partitions=2) as writer:
        fill(writer, 5, 2)
        async with member(stream_path, start="newest", rebalance_interval=FAST) as first:
            assert first.assignment == (0, 1)
            fill(writer, 1, 2)  # offset 5 in both: pushed after the first member opened
            async with (
                member(stream_path, start="newest", rebalance_interval=FAST) as second,
                anyio.create_task_group() as tg,
            ):
                seen: list[adiskq.Message] = []
                tg.start_soon(read_without_commits, first, [])
                tg.start_soon(read, second, seen)
                await until(lambda: len(second.assignment) == 1, "a partition for the second member")
                await until(lambda: len(seen) == 1, "the second member's first message")
                tg.cancel_scope.cancel()
    assert (seen[0].partition, seen[0].offset) == (1, 5)


async def test_extra_members_wait_and_take_over_when_a_holder_leaves(where: Where) -> None:
    """With more members than partitions, the extra member holds none until the holder leaves."""
    stream_path = where.new()
    await fill_each(stream_path, 0, 1)
    async with (
        member(stream_path, rebalance_interval=FAST) as one,
        member(stream_path, rebalance_interval=FAST) as two,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read_until_closed, one, [])
        tg.start_soon(read_until_closed, two, [])
        await until(lambda: sorted([one.assignment, two.assignment]) == [(), (0,)], "one member holding it")
        holder, spare = (one, two) if one.assignment else (two, one)
        await holder.aclose()
        await until(lambda: spare.assignment == (0,), "the spare member taking the partition")
        tg.cancel_scope.cancel()


async def test_partitions_added_later_are_shared_out(stream_path: str) -> None:
    """When a producer adds partitions, the members share the new ones too.

    Local only: Kafka members see partitions added at the client's next metadata refresh (the
    table's commit/assignment row), minutes later by default."""
    with Writer(stream_path, partitions=2):
        pass
    async with (
        member(stream_path, rebalance_interval=FAST) as one,
        member(stream_path, rebalance_interval=FAST) as two,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, one, [])
        tg.start_soon(read, two, [])
        await until(lambda: len(one.assignment) == len(two.assignment) == 1, "one partition each")
        async with adiskq.Producer(stream_path, partitions=4):
            pass
        await until(lambda: len(one.assignment) == len(two.assignment) == 2, "two partitions each")
        assert disjoint_and_complete([one, two], 4)
        tg.cancel_scope.cancel()


async def test_a_commit_for_a_partition_handed_away_is_refused(where: Where) -> None:
    """Committing a message of a partition that went to another member raises ValueError saying so."""
    stream_path = where.new()
    await fill_each(stream_path, 1, 2)
    seen: list[adiskq.Message] = []
    async with member(stream_path, rebalance_interval=FAST) as first:
        with anyio.fail_after(10):
            seen.extend([await first.__anext__(), await first.__anext__()])
        async with member(stream_path, rebalance_interval=FAST) as second, anyio.create_task_group() as tg:
            tg.start_soon(read_without_commits, first, seen)
            tg.start_soon(read, second, [])
            await until(lambda: len(first.assignment) == len(second.assignment) == 1, "a partition given away")
            tg.cancel_scope.cancel()
            (gone,) = [m for m in seen if m.partition == second.assignment[0]]
            with pytest.raises(ValueError, match="not held by this member"):
                first.commit(gone)


# -- exclusive -------------------------------------------------------------------------------------


async def test_an_exclusive_member_keeps_every_partition_while_others_wait(stream_path: str) -> None:
    """An exclusive member holds every partition and keeps them after looking; a shared member holds none meanwhile.

    Local only, as the other exclusive tests: the table's exclusive=True row."""
    with Writer(stream_path, partitions=3):
        pass
    async with (
        member(stream_path, exclusive=True) as alone,
        member(stream_path, rebalance_interval=FAST) as waiting,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, waiting, [])
        await alone._rebalance()  # a look, with the other member in view
        assert (alone.assignment, waiting.assignment) == ((0, 1, 2), ())
        tg.cancel_scope.cancel()


async def test_a_waiting_member_takes_over_when_the_exclusive_one_leaves(stream_path: str) -> None:
    """When the exclusive member closes, the waiting members take the partitions."""
    with Writer(stream_path, partitions=2):
        pass
    async with member(stream_path, rebalance_interval=FAST) as waiting, anyio.create_task_group() as tg:
        tg.start_soon(read, waiting, [])
        async with (
            member(stream_path, exclusive=True, rebalance_interval=FAST) as alone,
            anyio.create_task_group() as reading,
        ):
            reading.start_soon(read, alone, [])
            await until(lambda: alone.assignment == (0, 1), "the exclusive member holding everything")
            assert waiting.assignment == ()
            reading.cancel_scope.cancel()
        await until(lambda: waiting.assignment == (0, 1), "the waiting member taking over")
        tg.cancel_scope.cancel()


async def test_an_exclusive_member_joining_takes_everything(stream_path: str) -> None:
    """An exclusive member joining shared members gets every partition as they give theirs back."""
    with Writer(stream_path, partitions=4):
        pass
    async with (
        member(stream_path, rebalance_interval=FAST) as shared,
        member(stream_path, exclusive=True, rebalance_interval=FAST) as alone,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, shared, [])
        tg.start_soon(read, alone, [])
        await until(lambda: alone.assignment == (0, 1, 2, 3), "the exclusive member holding everything")
        assert shared.assignment == ()
        tg.cancel_scope.cancel()


async def test_the_oldest_exclusive_member_wins_and_the_next_takes_over(stream_path: str) -> None:
    """Of two exclusive members, the older holds everything; when it leaves, the younger takes it all."""
    with Writer(stream_path, partitions=2):
        pass
    async with (
        member(stream_path, exclusive=True, rebalance_interval=FAST) as first,
        member(stream_path, exclusive=True, rebalance_interval=FAST) as second,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, second, [])
        assert (first.assignment, second.assignment) == ((0, 1), ())
        await first.aclose()
        await until(lambda: second.assignment == (0, 1), "the second exclusive member taking over")
        tg.cancel_scope.cancel()


def test_exclusive_needs_a_name(stream_path: str) -> None:
    """exclusive=True on an unnamed group raises InvalidArgumentError at construction.

    Local only: Kafka refuses both (the table's exclusive=True and unnamed ConsumerGroup rows;
    tests/kafka_backend/test_differences.py)."""
    with pytest.raises(adiskq.InvalidArgumentError, match="named group"):
        adiskq.ConsumerGroup(stream_path, exclusive=True)


@pytest.mark.parametrize("place", ["local", "kafka://127.0.0.1:9/orders"])
@pytest.mark.parametrize("interval", [0, -1.0])
def test_rebalance_interval_must_be_positive(stream_path: str, place: str, interval: float) -> None:
    """A rebalance_interval that is not a positive number of seconds raises ValueError (on a stream
    and on a topic, at construction: no broker listens at that URL)."""
    with pytest.raises(ValueError, match="rebalance_interval"):
        member(stream_path if place == "local" else place, rebalance_interval=interval)


# -- visibility ------------------------------------------------------------------------------------


async def test_assignments_yields_the_assignment_then_each_change(stream_path: str) -> None:
    """group.assignments() yields the partitions held now, then after each change, then () and ends on close.

    Local only: Kafka's eager rebalance takes every partition back before it shares them out, so
    a Kafka member may say () between two shares (the table's commit/assignment row)."""
    with Writer(stream_path, partitions=2):
        pass
    changes: list[tuple[int, ...]] = []
    async with member(stream_path, rebalance_interval=FAST) as first, anyio.create_task_group() as tg:

        async def watch() -> None:
            async for assignment in first.assignments():
                changes.append(assignment)  # noqa: PERF401 (the test looks at each change as it comes)

        tg.start_soon(watch)
        async with anyio.create_task_group() as reading:
            reading.start_soon(read, first, [])
            await until(lambda: changes == [(0, 1)], "the first assignment")
            async with member(stream_path, rebalance_interval=FAST) as second, anyio.create_task_group() as also:
                also.start_soon(read, second, [])
                await until(lambda: changes == [(0, 1), (0,)], "the change after a member joined")
                also.cancel_scope.cancel()
            await until(lambda: changes == [(0, 1), (0,), (0, 1)], "the change after it left")
            reading.cancel_scope.cancel()
        await first.aclose()
    assert changes == [(0, 1), (0,), (0, 1), ()]


async def test_stats_show_each_member_and_what_it_holds(stream_path: str) -> None:
    """adiskq.stats lists a group's live members, oldest first, with pid, host and partitions.

    Local only: the table's stats row."""
    with Writer(stream_path, partitions=3):
        pass
    async with (
        member(stream_path, rebalance_interval=FAST) as one,
        member(stream_path, rebalance_interval=FAST) as two,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(read, one, [])
        tg.start_soon(read, two, [])
        await until(lambda: (len(one.assignment), len(two.assignment)) == (2, 1), "the shares")
        members = adiskq.stats(stream_path).members["g"]
        held = [one.assignment, two.assignment]
        tg.cancel_scope.cancel()
    assert [m.id for m in members] == [one.member_id, two.member_id]
    assert [m.partitions for m in members] == held
    assert {(m.pid, m.host, m.exclusive) for m in members} == {(os.getpid(), os.uname().nodename, False)}
    assert members[0].joined_ns <= members[1].joined_ns


async def test_stats_of_an_unnamed_group_or_none_show_no_members(stream_path: str) -> None:
    """An unnamed group has no members on disk; a named group no one reads shows none.

    Local only: the table's stats and unnamed ConsumerGroup rows."""
    with Writer(stream_path, partitions=1):
        pass
    async with adiskq.ConsumerGroup(stream_path) as group:
        assert group.member_id is None
        assert adiskq.stats(stream_path).members == {}
    async with member(stream_path):
        pass
    assert adiskq.stats(stream_path).members == {"g": ()}


# -- members dying ---------------------------------------------------------------------------------

HOLD_AND_FORK = """
import os, sys, time
from adiskq._storage.leases import Membership
membership = Membership(sys.argv[1], "g")
membership.join()
assert membership.try_acquire(0)
if os.fork() == 0:
    os.write(1, b"child %d %d\\n" % (os.getpid(), len(membership.held)))  # one write: lines never mix
    time.sleep(60)
    os._exit(0)
os.write(1, b"parent\\n")
time.sleep(60)
"""


async def test_a_dead_members_leases_are_free_even_if_its_forked_child_lives(stream_path: str) -> None:
    """A member killed while a child it forked lives on leaves its partition free and its member file dead.

    Local only: a local member's leases are flocks on the stream's files (the table's commit/assignment row)."""
    with Writer(stream_path, partitions=1):
        pass
    realpath = os.path.realpath(stream_path)  # noqa: ASYNC240 (a test's setup)
    probe = Membership(realpath, "g")
    child = None
    try:
        async with await anyio.open_process([sys.executable, "-c", HOLD_AND_FORK, realpath]) as process:
            assert process.stdout is not None
            words: list[str] = []
            with anyio.fail_after(20):
                async for chunk in process.stdout:
                    words.extend(chunk.decode().split())
                    if "parent" in words and "child" in words and len(words) >= 4:
                        break
            child = int(words[words.index("child") + 1])
            assert words[words.index("child") + 2] == "0"  # the child let go of the lease it inherited
            assert not probe.try_acquire(0)  # the parent holds it
            process.send_signal(signal.SIGKILL)
            await process.wait()
        assert probe.try_acquire(0)  # the kernel let go of the flock as the process exited
        assert probe.members() == []
        assert os.listdir(probe.members_dir) == []
    finally:
        probe.leave()
        if child is not None:
            os.kill(child, signal.SIGKILL)
