"""Which partitions a member of a ``ConsumerGroup`` reads: taking them, following each, giving them back.

A partition is taken (``assign``) after its last stored commit, or past the last message a stored
retry counts processed, else from the group's ``start``; where the member starts one the group never
committed in is stored at once, so the group's lag counts that backlog and a later holder starts
there too. ``rebalance`` looks at the other members (``membership.py``) between reads: it gives
back what is above this member's share — storing those partitions' commits before their leases go
— or takes free partitions. ``discover`` picks up partitions a producer added. ``AssignmentChanges``
is ``group.assignments()``.

This module is one of the group's own: with ``group.py`` and ``group_retrying.py`` it alone reaches
the group's private state.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, Self

import anyio.lowlevel

from .._errors import LockTimeoutError
from .._storage.offsets import load_offsets, update_offsets
from .._storage.stream import StreamReader
from .follower import PartitionFollower
from .notify import Notifier

if TYPE_CHECKING:
    from .group import ConsumerGroup

__all__ = ["AssignmentChanges", "assign", "discover", "rebalance"]

logger: Final = logging.getLogger("adiskq.group")


def assign(group: ConsumerGroup[Any, Any], partitions: Iterable[int]) -> None:
    """Start reading the given partitions (those not read yet), after their last stored commit."""
    stream = group._stream
    notifier = group._notifier
    assert stream is not None
    assert notifier is not None
    wanted = [partition for partition in partitions if partition not in group._followers]
    if not wanted:
        return
    # Read now, not at open: the previous holder stored its commits before giving the lease back.
    stored = {} if group.name is None else load_offsets(stream.path, group.name)
    # Their retries first: each stored retry commits its message, stored yet or not.
    retried_past = {} if group._retries is None else group._retries.hold(wanted)
    for partition in wanted:
        try:
            _follow(group, stream, notifier, partition, stored.get(partition), retried_past.get(partition))
        except BaseException:
            for unread in wanted:
                if unread not in group._followers:
                    if group._membership is not None:
                        group._membership.release(unread)
                    if group._retries is not None:
                        group._retries.release(unread)
            raise
    group._known_partitions = max(group._known_partitions, stream.partition_count)
    _store_starts(group)


def _store_starts(group: ConsumerGroup[Any, Any]) -> None:
    """Store where this member starts the partitions the group never committed in, at once: so
    the group's lag counts their backlog (from Python, the CLI and Prometheus alike) even if
    no commit ever comes, and a member taking them over starts there too. (Blocking I/O on the
    loop, once per partition in a group's life.)"""
    starts, group._unstored_starts = group._unstored_starts, {}
    if not starts or group.name is None or group._stream is None:
        return
    try:
        update_offsets(group._stream.path, group.name, starts, timeout_seconds=0)
    except (LockTimeoutError, OSError) as error:  # another member stores now: with the next store
        logger.info("group %r: where it starts partitions %s is stored later: %s", group.name, list(starts), error)
        for partition, position in starts.items():
            group._ledger.commit(partition, position)
        return
    group._ledger.stored(starts)


def _follow(
    group: ConsumerGroup[Any, Any],
    stream: StreamReader,
    notifier: Notifier,
    partition: int,
    committed: int | None,
    retried_past: int | None = None,
) -> None:
    """Read ``partition`` from its stored commit (``committed``), or from past the last message
    a stored retry counts processed (``retried_past``) if that is further, else from ``start``."""
    reader = stream.partition(partition)
    commit_retried = retried_past is not None and (committed is None or retried_past > committed)
    if commit_retried:
        assert retried_past is not None
        position = min(retried_past, reader.bounds()[1])
    elif committed is not None:
        position = min(committed, reader.bounds()[1])
    elif partition < group._partitions_at_open or not isinstance(group.start, str | int):
        position = reader.offset_of(group.start)
    else:
        position = reader.bounds()[0]  # a partition born after we opened: all of it is new
    end = None
    if group.end != "wait":
        end = max(position, group._close_ends.get(partition, reader.bounds()[1]))
    follower = PartitionFollower(
        stream,
        partition,
        position=position,
        end=end,
        on_data_loss=group.on_data_loss,
        notifier=notifier,
        waiter=group._waiter,
        on_skip=group._on_skip,
        tag_filter=group._tag_filter,
        decoder=group._decoder,
    )
    group._followers[partition] = follower
    group._order.append(follower)
    if committed is not None and position < committed:
        # The stored commit lies past the partition's end: a power cut took back messages an
        # async-flush producer had written after the group committed them. Store the end now,
        # or once new messages take those offsets a restarted group would skip them. (Blocking
        # I/O on the loop, on this rare path only.)
        logger.warning(
            "group %r: partition %d's stored commit %d is past its end %d (messages lost in a power cut); "
            "the commit is moved back to %d",
            group.name,
            partition,
            committed,
            position,
            position,
        )
        if group.name is not None:
            try:
                update_offsets(stream.path, group.name, {partition: position}, timeout_seconds=0)
            except LockTimeoutError:  # another member stores now (or is stopped): store it later
                group._ledger.began(partition, position, None)
                group._ledger.commit(partition, position)
                return
        committed = position
    group._ledger.began(partition, position, committed)
    if commit_retried:
        # The member that retried died before storing this commit: store it with the next ones.
        group._ledger.commit(partition, position)
    elif committed is None and group.name is not None:
        group._unstored_starts[partition] = position


def discover(group: ConsumerGroup[Any, Any]) -> bool:
    """Pick up partitions a producer added (``settings.json`` was replaced); True if any."""
    settings = group._settings
    if group.end != "wait" or settings is None or not settings.changed():
        return False
    count = settings.stream.partition_count
    if count <= group._known_partitions:
        return False
    if group._membership is not None:
        group._known_partitions = count
        group._membership.look_soon()  # the new partitions are free leases: shares change
    else:
        assign(group, range(group._known_partitions, count))
    return True


async def rebalance(group: ConsumerGroup[Any, Any]) -> None:
    """Look at the other members: give back what is above this member's share, or take free partitions."""
    membership = group._membership
    stream = group._stream
    assert membership is not None
    assert stream is not None
    plan = membership.plan(stream.partition_count)
    if group._retries is not None:
        group._retries.refresh()  # retries another member stored, or a retry stream it created
    if plan.give_back:
        await _revoke(group, plan.give_back)
    elif plan.wanted:
        taken = membership.acquire(plan)
        if taken:
            assign(group, taken)
            group._note_assignment_change()


async def _revoke(group: ConsumerGroup[Any, Any], partitions: list[int]) -> None:
    """Store the partitions' commits, stop reading them, then give their leases back."""
    membership = group._membership
    assert membership is not None
    async with group._store_lock:
        try:
            # Not waiting: a member stopped while it stores holds the lock; this one then keeps
            # the partitions (and reads them) until a later look gives them back.
            await group._write_offsets(group._ledger.to_store(partitions, carry_starts=True), wait_seconds=0)
        except LockTimeoutError as error:
            logger.info("group %r: partitions %s given back later: %s", group.name, partitions, error)
            return
        if group._retries is not None:
            await group._retries.store(partitions)
        for partition in partitions:
            follower = group._followers.pop(partition, None)
            if follower is not None:
                follower.close()
                group._order.remove(follower)
            group._ledger.forget(partition)
            if group._retries is not None:
                group._retries.release(partition)
            group._passed.pop(partition, None)
            membership.release(partition)
    group._turn = 0
    membership.ring()  # the member waiting for these partitions need not wait for its next look
    group._note_assignment_change()


class AssignmentChanges:
    """``async for assignment in group.assignments()``: the assignment now, then each new one."""

    __slots__ = ("_group", "_last")

    def __init__(self, group: ConsumerGroup[Any, Any]) -> None:
        self._group = group
        self._last: tuple[int, ...] | None = None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> tuple[int, ...]:
        group = self._group
        await anyio.lowlevel.checkpoint()
        while True:
            current = group.assignment
            if current != self._last and not (group.closed and not self._last):
                self._last = current
                return current
            if group.closed:
                raise StopAsyncIteration
            await group._assignment_event().wait()
