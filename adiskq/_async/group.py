"""``ConsumerGroup``: every partition of a stream merged into one async iterator, with stored progress.

One task reads the partitions in turn (no task per partition): each refill takes a batch from the
next partition that has messages, so a busy partition cannot starve the others, and order within a
partition is kept. When every partition is caught up, the group sleeps on one waiter that every
partition (and ``settings.json``, for partitions added later) can wake.

With ``name=``, ``commit(msg)`` records progress in memory; it is stored under ``groups/NAME/`` every
``commit_interval`` seconds while the group is read, by ``flush()``, and on close — in a worker
thread, because it fsyncs. After a restart the group resumes after the last stored commit; committed
offsets win over ``start``.

Members of a named group, in any processes of the host, share its partitions: each holds a partition
through a lease the OS drops when the member dies (``_storage/leases.py``), and looks at the other
members between reads (``membership.py``): it gives back what is above its fair share, storing the
commits of those partitions before their leases go, and takes free partitions up to its share,
starting each after its last stored commit. Offsets are stored per partition (``update_offsets``),
so members never undo each other's commits. A member stopped while it stores (it holds the offsets'
lock) never stalls the others: their periodic stores do not wait for it (their commits stay pending
for the next interval, their reading goes on), ``flush()`` waits for it at most 30 s
(``LockTimeoutError``), and closing at most ``CLOSE_STORE_WAIT_SECONDS``.

This module holds the group's opening and closing, its commits and their stores, ``lag``, ``seek``
and the reading loop; which partitions a member reads (taking, following, giving back, discovering)
is ``group_partitions.py``, and what ``retry()`` and ``dead_letter()`` do ``group_retrying.py``:
the group's own files, the only ones that reach its private state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Final, Literal, Self

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._errors import (
    ClosedError,
    DeserializationError,
    InvalidArgumentError,
    LockTimeoutError,
)
from .._extras import needs_extra
from .._sansio.capabilities import is_kafka_url, refuse
from .._sansio.decoding import MessageDecoder
from .._sansio.naming import validate_group_name
from .._sansio.tags import TagFilter
from .._sansio.values import KeyT, Message, ValueT
from .._storage.flocks import SHARED_LOCK_TIMEOUT_SECONDS
from .._storage.lag import group_lag_now
from .._storage.offsets import save_group_tags, update_offsets
from .._storage.stream import StreamReader
from . import group_partitions, group_retrying, wakeup
from .arguments import Start, check_on_data_loss, check_start, positive_seconds
from .commits import CommitLedger
from .follower import OnDataLoss, PartitionFollower, producer_is_in_this_process
from .group_partitions import discover as discover_partitions  # per wake-up: a global, not an attribute
from .membership import GroupMembership
from .metrics import ObservedGroup, telemetry
from .notify import Notifier, get_notifier
from .reader import DEFAULT_BATCH_MESSAGES, _Reader
from .retries import GroupRetries
from .settings_watch import SettingsWatch

__all__ = ["ConsumerGroup", "GroupEnd"]

logger: Final = logging.getLogger("adiskq.group")

GroupEnd = Literal["wait", "close"]
DEFAULT_COMMIT_INTERVAL: Final = 1.0
# How often a member of a named group looks at the others while it is read: the bound on how long a
# dead member's partitions wait for a new holder (joins and leaves ring at once).
DEFAULT_REBALANCE_INTERVAL: Final = 1.0
# How long closing waits for another member's store of the group's offsets (it may be stopped while
# it holds their lock) before it leaves without storing this member's commits (read again, at least once).
CLOSE_STORE_WAIT_SECONDS: Final = 2.0


class ConsumerGroup(_Reader[KeyT, ValueT]):
    """All partitions of a stream as one async iterator; with a ``name``, progress survives restarts.

    ``start`` applies to partitions without a committed offset (see ``Consumer``); partitions added
    after the group opened are read from their first message (all of it is new), or from ``start``
    when that is a ``datetime``. ``end``: ``"wait"`` (follow forever, new partitions included) or
    ``"close"`` (stop at the end of what was there when the group opened; a member of a shared
    group stops once the partitions it holds are read to there).

    ``commit(msg)`` marks ``msg`` and everything before it in its partition as processed. Commits are
    stored every ``commit_interval`` seconds while the group is read, on ``flush()`` and on close;
    a crash loses at most the commits of the last interval (those messages come again: at least once).

    Named groups share: every ``ConsumerGroup`` with the same ``name`` on the stream, in this process
    or another, is a member, and each partition is read by one member at a time. Members take
    free partitions up to a fair share and give back what is above it when others join; a member
    that closes (or is cancelled) stores its commits and gives its partitions back at once; one
    that dies loses its leases with its process, and the others take its partitions from its last
    stored commit — as soon as its process exits where they can watch that (Linux 5.3+, members on
    one host), else within ``rebalance_interval`` seconds. Members look at each other while
    they are read (between batches), so a member busy with a batch gives partitions back when it
    asks for the next one. ``exclusive=True``: while this member lives, it holds every partition
    and the other members (exclusive or not) wait, holding none; the oldest exclusive member wins.

    ``tags``: deliver only messages whose tag is one of these (see ``Consumer``). The messages a
    filtered group skips count as processed once everything delivered before them is committed:
    ``commit(msg)`` of the last message delivered from a partition commits past the skipped ones
    after it, and a caught-up partition whose delivered messages are all committed has its commit
    moved past the skipped ones it read. A named group stores its tags (``groups/NAME/tags.json``;
    the last member opened wins), and its lag (``adiskq groups``, ``adiskq stats``) counts only the
    messages left of those tags, selected from the tag column and confirmed from their records.

    ``value_deserializer``, ``key_deserializer`` and ``wait_for_stream``: as for ``Consumer``.
    Retries (a named group): ``await group.retry(msg, delay=seconds)`` hands ``msg`` back to the
    group after ``delay`` seconds, and ``await group.dead_letter(msg, reason=...)`` sends it to the
    dead-letter stream at once; both count ``msg`` as processed (as ``commit`` does), so the
    messages behind it go on. ``msg.attempt`` counts deliveries (1 the first time); ``retry`` of a
    message delivered ``max_attempts`` times sends it to the dead-letter stream instead.
    ``dead_letter_path``: that stream (default ``STREAM/groups/NAME/dead-letters``; checked when the
    group opens, its folder created then if missing, the stream by the first dead letter). A retry
    is stored (fsynced) in the group's retry stream before ``retry`` returns, and that record also
    commits the message (a member killed right after ``retry`` neither loses the retry nor delivers
    the message again at attempt 1); the members share the retries as they share the partitions.
    Retries finished while an older one still waits are stored as finished with the commits, so
    no member delivers them again. A ``dead_letter``/``retry`` that cannot store the message
    raises ``MessageKeptError`` and keeps the partition's commit below the message until one of
    them succeeds (or the member closes: the next holder delivers it again).

    A named group stores where it starts each partition it has never committed in as it takes
    the partition, so its lag counts that backlog before the first commit, and a later member
    (or a restart) starts there, not at ``start`` again.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # A kafka:// URL selects the Kafka backend, here and only here: a read never asks.
        path = args[0] if args else kwargs.get("path")
        if cls is ConsumerGroup and is_kafka_url(path):
            with needs_extra("kafka-cluster", "a ConsumerGroup of a kafka:// URL"):
                from ..kafka._cluster_group import KafkaConsumerGroup
            return super().__new__(KafkaConsumerGroup)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        *,
        start: Start = "oldest",
        end: GroupEnd = "wait",
        on_data_loss: OnDataLoss = "skip",
        commit_interval: float = DEFAULT_COMMIT_INTERVAL,
        poll_interval: float | None = None,
        exclusive: bool = False,
        rebalance_interval: float = DEFAULT_REBALANCE_INTERVAL,
        tags: Iterable[str] | None = None,
        value_deserializer: Callable[[bytes], ValueT] | None = None,
        key_deserializer: Callable[[bytes], KeyT] | None = None,
        wait_for_stream: bool = False,
        max_attempts: int | None = None,
        dead_letter_path: str | os.PathLike[str] | None = None,
        kafka: Mapping[str, object] | str | os.PathLike[str] | None = None,
    ) -> None:
        if kafka is not None:
            raise refuse("kafka= (client configuration)")
        self._tag_filter = TagFilter.of(tags)
        self._decoder = MessageDecoder.of(key_deserializer, value_deserializer)
        self.wait_for_stream = bool(wait_for_stream)
        if name is not None:
            validate_group_name(name)
        if max_attempts is not None and (
            isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
        ):
            raise InvalidArgumentError(
                f"max_attempts={max_attempts!r}: give the number of deliveries (1 or more) after which retry() "
                "sends a message to the dead-letter stream, or None for no limit"
            )
        if (max_attempts is not None or dead_letter_path is not None) and name is None:
            raise InvalidArgumentError(
                "max_attempts= and dead_letter_path= need a named group, ConsumerGroup(path, name='...'): "
                "retries are stored with the group's commits"
            )
        check_start(start)
        if end not in ("wait", "close"):
            raise InvalidArgumentError(f"end={end!r}: a group takes 'wait' or 'close'")
        check_on_data_loss(on_data_loss)
        positive_seconds("commit_interval", commit_interval)
        positive_seconds("poll_interval", poll_interval, optional=True)
        positive_seconds("rebalance_interval", rebalance_interval)
        if exclusive and name is None:
            raise InvalidArgumentError(
                "exclusive=True needs a named group: members of ConsumerGroup(path, name='...') share or "
                "exclude each other, an unnamed group always reads every partition alone"
            )
        self.path = os.fspath(path)
        self.name = name
        self.start = start
        self.end = end
        self.on_data_loss = on_data_loss
        self.commit_interval = commit_interval
        self.poll_interval = poll_interval
        self.exclusive = exclusive
        self.rebalance_interval = rebalance_interval
        self.max_attempts = max_attempts
        self.dead_letter_path = None if dead_letter_path is None else os.path.abspath(os.fspath(dead_letter_path))
        self._retries: GroupRetries | None = None
        self._retries_went_last = False  # the last batch was due retries: the partitions go next
        self._stream: StreamReader | None = None
        self._observed: ObservedGroup | None = None  # what telemetry reads of this group, while it does
        self._notifier: Notifier | None = None
        self._settings: SettingsWatch | None = None
        self._membership: GroupMembership | None = None
        self._waiter = wakeup.Waiter()
        self._followers: dict[int, PartitionFollower] = {}
        self._order: list[PartitionFollower] = []
        self._turn = 0
        self._known_partitions = 0
        self._partitions_at_open = 0
        self._close_ends: dict[int, int] = {}  # end="close": each partition's next offset at open
        self._ledger = CommitLedger(self.commit_interval)
        self._store_lock = anyio.Lock()
        self._changed: anyio.Event | None = None
        self._skipped: list[tuple[int, int, int]] = []
        # With tags: partition -> [first, end) of the offsets a filtered read passed without a
        # wanted tag since the last message it delivered (what a commit may step over).
        self._passed: dict[int, tuple[int, int]] = {}
        self._reading = False
        self._unstored_starts: dict[int, int] = {}  # partitions without a commit: where this member began them
        super().__init__()

    _closed_message = "this consumer group was closed; open a new ConsumerGroup"
    _not_open_message = (
        "the ConsumerGroup is not open: read it inside `async with adiskq.ConsumerGroup(path, name=...) as "
        "group:`, which opens it and stores its commits when the block ends"
    )
    _closed_while_reading = "this consumer group was closed while it was read; open a new ConsumerGroup"

    # -- opening and closing ---------------------------------------------------------------------

    def _open(self) -> None:
        if self.closed:
            raise ClosedError(self._closed_message)
        if self._state == "open":
            return
        stream = self._stream = StreamReader.open(self.path)
        notifier = self._notifier = get_notifier()
        self._ledger = CommitLedger(self.commit_interval)
        self._settings = SettingsWatch(stream, notifier, self._waiter)
        try:
            count = self._partitions_at_open = self._known_partitions = stream.partition_count
            if self.end == "close":
                self._close_ends = {p: stream.partition(p).bounds()[1] for p in range(count)}
            if self.name is None:
                group_partitions.assign(self, range(count))
            else:
                membership = self._membership = GroupMembership(
                    stream.path,
                    self.name,
                    exclusive=self.exclusive,
                    rebalance_interval=self.rebalance_interval,
                    notifier=notifier,
                    waiter=self._waiter,
                )
                membership.join()
                # What its lag counts (adiskq groups / stats): only the tags it reads.
                wanted = None if self._tag_filter is None else frozenset(self.tags or ())
                save_group_tags(stream.path, self.name, wanted)
                group_retrying.open_retries(self, stream.path, self.name)
                instruments = telemetry()
                if instruments is not None:
                    self._observed = ObservedGroup(self.path, self.name, self._held_lag)
                    instruments.watch_group(self._observed)  # its lag, as adiskq.consumer.lag
                # Take free partitions now: a lone member holds them all once it is open.
                plan = membership.plan(count)
                group_partitions.assign(self, membership.acquire(plan))
        except BaseException:
            self._release()
            raise
        self._state = "open"  # only now: an open that failed is tried again by the next read

    async def aclose(self) -> None:
        """Store pending commits, give back the partitions, release files and watches (even when cancelled)."""
        if self.closed:
            await anyio.lowlevel.checkpoint()
            return
        self._mark_closed()
        try:
            if self._stream is not None and self.name is not None:
                with anyio.CancelScope(shield=True):
                    # A partition going to another member carries where this one started it.
                    partitions = list(self._followers)
                    try:
                        await self._store_partitions(
                            partitions, carry_starts=self._others_alive(), wait_seconds=CLOSE_STORE_WAIT_SECONDS
                        )
                    except LockTimeoutError as error:
                        # Another member keeps the offsets' lock (it is stopped): leave without
                        # storing. The next holder of these partitions reads again from their last
                        # stored commits (at least once), and closing never waits on it for long.
                        logger.warning(
                            "group %r: commits of partitions %s not stored on close: %s", self.name, partitions, error
                        )
        finally:
            instruments = telemetry()
            if instruments is not None:
                instruments.unwatch_group(self._observed)
            try:
                if self._retries is not None:
                    await self._retries.aclose()
            finally:
                self._release()
            self._waiter.wake()
            self._note_assignment_change()
        await anyio.lowlevel.checkpoint()

    def _others_alive(self) -> bool:
        """True if another member lives (or that cannot be told); False alone or unnamed."""
        membership = self._membership
        if membership is None:
            return False
        try:
            return len(membership.members()) > 1
        except OSError:
            return True  # carrying starts to no one costs one small write; losing them may skip messages

    def _release(self) -> None:
        for follower in self._followers.values():
            follower.close()
        self._followers.clear()
        self._order.clear()
        if self._membership is not None:
            self._membership.leave()  # after the followers: no partition is read without its lease
        if self._settings is not None:
            self._settings.close()
        self._drop_buffered()

    # -- partitions ------------------------------------------------------------------------------

    @property
    def assignment(self) -> tuple[int, ...]:
        """The partitions this member reads now (an unnamed group: all of them)."""
        return tuple(sorted(self._followers))

    @property
    def member_id(self) -> str | None:
        """This member's id in ``adiskq.stats(path).members[name]`` (None before opening, or unnamed)."""
        return None if self._membership is None else self._membership.id

    def assignments(self) -> AsyncIterator[tuple[int, ...]]:
        """Iterate the assignment: now, then after every change; ``()`` when the group closes, then the end.

        Changes happen while the group is read (by another task): iterate this one beside it.
        Changes quicker than the iterating task may be merged into the latest.
        """
        return group_partitions.AssignmentChanges(self)

    def _note_assignment_change(self) -> None:
        event, self._changed = self._changed, None
        if event is not None:
            event.set()

    def _assignment_event(self) -> anyio.Event:
        if self._changed is None:
            self._changed = anyio.Event()
        return self._changed

    async def _rebalance(self) -> None:
        """Look at the other members: give back what is above this member's share, or take free partitions."""
        await group_partitions.rebalance(self)

    def _held_lag(self) -> dict[int, int]:
        """Messages after the committed offset of each partition held that has one (for metrics,
        which may ask from another thread: what it reads is copied first)."""
        stream = self._stream
        if stream is None or self.closed:
            return {}
        committed = self._ledger.committed
        lag = {}
        for partition in list(self._followers):
            offset = committed.get(partition)
            if offset is not None:
                lag[partition] = max(0, stream.partition(partition).bounds()[1] - offset)
        return lag

    def _on_skip(self, partition: int, first: int, last_exclusive: int) -> None:
        self._skipped.append((partition, first, last_exclusive))

    @property
    def skipped(self) -> list[tuple[int, int, int]]:
        """``(partition, first, last_exclusive)`` ranges retention deleted before they were read."""
        return list(self._skipped)

    # -- commits ---------------------------------------------------------------------------------

    def commit(self, message: Message[KeyT, ValueT]) -> None:
        """Mark ``message`` (and all before it in its partition) processed; stored on an interval.

        Raises:
            ClosedError: the group was closed.
            InvalidArgumentError: the group has no name, this member no longer holds the partition,
                or ``message`` names an offset past the partition's end (not one the group delivered).
        """
        if self._state != "open":
            if self.closed:
                raise ClosedError("this consumer group was closed; commit before closing it")
            self._refuse_unopened()
        if self.name is None:
            raise InvalidArgumentError("commit() needs a named group: ConsumerGroup(path, name='...')")
        retries = self._retries
        if retries is not None and retries.active and retries.finish(message):
            return  # a retried message: its retry record is done
        partition = message.partition
        follower = self._followers.get(partition)
        if follower is None:
            raise InvalidArgumentError(
                f"partition {partition} is not held by this member of group {self.name!r} (it went to another "
                "member, or never came here): its uncommitted messages are read again by its holder. Commit "
                "each message (or batch) before asking the group for the next one"
            )
        if message.offset >= follower.position:  # not read yet: is it there at all?
            assert self._stream is not None
            end = self._stream.partition(partition).bounds()[1]
            if message.offset >= end:
                raise InvalidArgumentError(
                    f"commit() of offset {message.offset} of partition {partition}, which ends at {end}: commit "
                    "the messages the group delivered (a commit past the end would skip messages not written yet)"
                )
        next_offset = message.offset + 1
        passed = self._passed.get(partition)
        if passed is not None and passed[0] == next_offset:
            next_offset = passed[1]  # the messages after it that the filter skipped go with it
        self._ledger.commit(partition, next_offset)

    async def retry(self, message: Message[KeyT, ValueT], *, delay: float = 0.0, reason: str | None = None) -> None:
        """Hand ``message`` back to the group after ``delay`` seconds (not before), and count it processed.

        The message is stored in the group's retry stream (fsynced: it blocks the calling task
        for one fsync) before this returns, and that record commits the message too, so a member
        that dies afterwards neither loses the retry nor delivers the message again; whichever
        member then holds its partition delivers it again once due, with ``attempt`` one higher
        (the messages behind it are not held back). A message already delivered ``max_attempts``
        times goes to the dead-letter stream instead, with ``reason`` (if given) in its
        ``adiskq-reason`` header.

        Raises:
            ClosedError: the group was closed.
            InvalidArgumentError: the group has no name, ``delay`` is negative, this member no
                longer holds the message's partition, or the message is committed already (by
                ``commit()``, or an earlier ``retry()`` or ``dead_letter()``).
            MessageKeptError: the retry (or the dead letter, at ``max_attempts``) could not be
                stored; the partition's commit stays below the message until a ``retry()`` or
                ``dead_letter()`` of it succeeds, so it is delivered again if the member stops first.
            OffsetOutOfRangeError: a group with deserializers retries a message whose stored bytes
                retention deleted meanwhile.
        """
        await group_retrying.retry(self, message, delay=delay, reason=reason)

    async def dead_letter(self, message: Message[KeyT, ValueT] | DeserializationError, *, reason: str) -> None:
        """Send ``message`` to the dead-letter stream now (fsynced), and count it processed.

        The dead letter keeps the message's value, key, tag and headers, and adds headers naming its
        source stream, partition and offset, the group, the attempts made and ``reason``.

        ``message`` may also be the ``DeserializationError`` the group raised for a message its
        deserializers could not decode: that message's stored bytes go to the dead-letter stream,
        and the group reads on after it.

        Raises:
            ClosedError: the group was closed.
            InvalidArgumentError: the group has no name, this member no longer holds the message's
                partition, or the message is committed already.
            MessageKeptError: the dead letter could not be stored; the partition's commit stays
                below the message until a dead_letter() or retry() of it succeeds.
        """
        await group_retrying.dead_letter(self, message, reason=reason)

    @property
    def tags(self) -> frozenset[str] | None:
        """The tags this group delivers (None: every message)."""
        return None if self._tag_filter is None else frozenset(t for t in self._tag_filter.tags if t is not None)

    @property
    def committed(self) -> dict[int, int]:
        """Partition -> next offset, as committed (stored or still pending), for the partitions held."""
        return self._ledger.committed

    async def flush(self) -> None:
        """Store pending commits now (fsynced) instead of at the next interval.

        Raises:
            ClosedError: the group was closed, or never opened (``async with``).
            OSError: the offsets could not be stored (they stay pending and are stored later).
            LockTimeoutError: another member held the group's offsets for 30 s (it is stopped, or
                frozen); the commits stay pending and are stored later.
        """
        if self.closed:
            raise ClosedError("this consumer group was closed")
        if self._state != "open":
            if self._awaiting_stream:
                await anyio.lowlevel.checkpoint()
                return  # the stream is not there yet: nothing was read, nothing to store
            self._refuse_unopened()
        pending = self._pending_partitions()
        if pending:
            await self._store_partitions(pending, carry_starts=False, wait_seconds=SHARED_LOCK_TIMEOUT_SECONDS)

    def _pending_partitions(self) -> list[int]:
        """The partitions with commits not stored yet: of the stream, or of its retries."""
        pending = self._ledger.pending
        retries = self._retries
        if retries is not None and retries.active:
            return sorted({*pending, *retries.ledger.pending})
        return pending

    async def _store(self) -> None:
        """The periodic store, on the reading task's way: it never waits for another member (one
        stopped while it stores holds the lock); the commits then stay pending for the next interval."""
        pending = self._pending_partitions()
        if pending:
            try:
                await self._store_partitions(pending, carry_starts=False, wait_seconds=0)
            except LockTimeoutError as error:
                self._ledger.postpone()
                if self._retries is not None:
                    self._retries.ledger.postpone()
                logger.info("group %r: commits stored later: %s", self.name, error)

    async def _store_partitions(self, partitions: list[int], *, carry_starts: bool, wait_seconds: float) -> None:
        """Store the pending commits of these partitions; ``carry_starts``: also where uncommitted ones began."""
        async with self._store_lock:
            await self._write_offsets(self._ledger.to_store(partitions, carry_starts=carry_starts), wait_seconds)
            if self._retries is not None:
                # After the source's: a retry is fsynced before the message it retries is committed.
                await self._retries.store(partitions, wait_seconds=wait_seconds)

    async def _write_offsets(self, offsets: dict[int, int], wait_seconds: float) -> None:
        """Store these offsets (the store lock held), waiting for another member's store at most
        ``wait_seconds`` (``LockTimeoutError``), and tell the ledger."""
        if not offsets or self.name is None or self._stream is None:
            return
        stream_path, name = self._stream.path, self.name
        # A cancelled store still finishes in its thread (within wait_seconds); the commits it
        # carries count as stored.
        await anyio.to_thread.run_sync(lambda: update_offsets(stream_path, name, offsets, timeout_seconds=wait_seconds))
        self._ledger.stored(offsets)

    def _store_due_in(self) -> float | None:
        due = self._ledger.store_due_in()
        retries = self._retries
        if retries is not None and retries.active:
            retry_due = retries.ledger.store_due_in()
            if retry_due is not None:
                due = retry_due if due is None else min(due, retry_due)
        return due

    # -- lag and seeking -------------------------------------------------------------------------

    async def lag(self) -> dict[int, int]:
        """Partition -> messages left for this named group past its committed offsets.

        The offsets are those stored for the group, with this member's own commits (stored or not)
        over them. A partition the group never committed in counts from where the group started
        it (stored when a member first took it); partitions no member ever took are left out
        (``adiskq groups`` shows them as ``-``). For a group with ``tags``, only the messages left
        of those tags count. Reads the stream's files in a worker thread (a group with tags reads
        their tag columns).

        Raises:
            ClosedError: the group was closed, or never opened (``async with``).
            InvalidArgumentError: the group has no name (its progress is nowhere to measure from).
            StreamNotFoundError: the stream does not exist (yet).
        """
        if self.closed:
            raise ClosedError("this consumer group was closed; its lag: adiskq.lag(path, name)")
        if self._state != "open" and not self._awaiting_stream:
            self._refuse_unopened()
        name = self.name
        if name is None:
            raise InvalidArgumentError(
                "lag() needs a named group, whose commits say where it is: ConsumerGroup(path, name='...')"
            )
        mine = self._ledger.committed
        for partition in self._followers:
            mine.update(
                {p: o for p, o in self._ledger.to_store([partition], carry_starts=True).items() if p not in mine}
            )
        path = self.path
        return await anyio.to_thread.run_sync(lambda: group_lag_now(path, name, mine))

    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` on from ``offset``: the next message this member gets from it is there.

        Only where this member reads moves (as Kafka's ``seek``): the committed offset moves with
        the next ``commit()``, a commit below one already made changes nothing, and the messages of
        that partition read ahead and not handed out yet are dropped. To move a group's stored
        offsets while no member runs: ``adiskq.reset_offsets``.

        Raises:
            ClosedError: the group was closed.
            InvalidArgumentError: this member does not hold ``partition`` (see ``assignment``).
            OffsetOutOfRangeError: ``offset`` is past the partition's next offset.
        """
        if self.closed:
            raise ClosedError("this consumer group was closed")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError(f"offset={offset!r}: offsets are numbered from 0")
        follower = self._followers.get(partition)
        if follower is None:
            raise InvalidArgumentError(
                f"partition {partition!r} is not held by this member (it holds {list(self.assignment)}): "
                "seek within `assignment`, or move a stopped group's offsets with adiskq.reset_offsets"
            )
        follower.seek(offset)
        self._passed.pop(partition, None)
        remaining = self._messages.remaining
        if remaining:
            # The read-ahead batch came from one partition: keep it unless it is this one.
            buffered = self._messages.take(remaining) or []
            if buffered and buffered[0].partition != partition:
                self._messages.set(buffered, 0)
        self._waiter.wake()  # a task waiting for this partition looks again

    # -- reading ---------------------------------------------------------------------------------

    def batches(self, max_messages: int = DEFAULT_BATCH_MESSAGES) -> AsyncIterator[list[Message[KeyT, ValueT]]]:
        """Iterate lists of up to ``max_messages`` messages, each from one partition."""
        return super().batches(max_messages)

    def _read_some(self, max_messages: int) -> list[Message[KeyT, ValueT]]:
        """A batch from the next partition (in turn) that has messages; ``[]`` if none has."""
        retries = self._retries
        if retries is not None and retries.active:
            # Due retries and the partitions take turns, so neither can hold the other back.
            retries_first = not self._retries_went_last
            self._retries_went_last = False
            if retries_first:
                due = group_retrying.decoded_retries(self._decoder, retries.take_due(max_messages))
                if due:
                    self._retries_went_last = True
                    return due
            messages = self._read_partitions(max_messages)
            if messages or retries_first:
                return messages
            return group_retrying.decoded_retries(self._decoder, retries.take_due(max_messages))
        return self._read_partitions(max_messages)

    def _read_partitions(self, max_messages: int) -> list[Message[KeyT, ValueT]]:
        """A batch from the next partition (in turn) that has messages; ``[]`` if none has."""
        order = self._order
        count = len(order)
        for step in range(count):
            index = (self._turn + step) % count
            follower = order[index]
            before = follower.position
            messages = follower.read(max_messages)
            if self._tag_filter is not None:
                self._note_passed(follower.partition, before, follower.position, messages)
            if messages:
                self._turn = (index + 1) % count
                return messages  # type: ignore[return-value]  # decoded by the follower
        return []

    def _note_passed(self, partition: int, before: int, after: int, messages: list[Message]) -> None:
        """Keep track of the offsets a filtered read passed without delivering them (see ``commit``)."""
        if messages:
            self._passed[partition] = (messages[-1].offset + 1, after)
            return
        if after == before:
            return
        first, end = self._passed.get(partition, (before, before))
        if end != before:
            first = before
        self._passed[partition] = (first, after)
        # Everything delivered from this partition is committed: the skipped stretch is done too.
        if self.name is not None and self._ledger.committed.get(partition) == first:
            self._ledger.commit(partition, after)

    def _all_done(self) -> bool:
        return self.end != "wait" and all(follower.done for follower in self._order)

    # -- what the read-or-wait loop (reader.py) asks of a group -----------------------------------

    async def _before_reading(self) -> None:
        due = self._store_due_in()
        if due is not None and due <= 0:
            await self._store()
        else:
            await anyio.lowlevel.checkpoint()

    async def _before_look(self) -> None:
        if self._tag_filter is not None and any(follower.more_to_scan for follower in self._order):
            await anyio.lowlevel.checkpoint()  # a long stretch without a wanted tag: let others run
        membership = self._membership
        if membership is not None and membership.due_in() <= 0:
            await self._rebalance()

    def _prepare_wait(self) -> object:
        return [follower.prepare_wait() for follower in self._order]

    def _moved_since(self, mark: object) -> bool:
        bases: list[int | None] = mark  # type: ignore[assignment]
        return discover_partitions(self) or any(f.moved_since(base) for f, base in zip(self._order, bases, strict=True))

    def _wait_seconds(self) -> float:
        # The settings watch (partitions added) is the only inotify one when every producer is
        # local; it is rare, but it still needs the descriptor read: a group always waits on it.
        assert self._notifier is not None
        timeout = self.poll_interval or self._notifier.poll_seconds
        due = self._store_due_in()
        if due is not None:
            timeout = max(0.0, min(timeout, due))
        if self._membership is not None:
            timeout = max(0.0, min(timeout, self._membership.due_in()))
        retries = self._retries
        if retries is not None and retries.active:
            retry_due = retries.due_in()
            if retry_due is not None:
                timeout = max(0.0, min(timeout, retry_due))
        return timeout

    async def _after_wait(self, timed_out: bool) -> None:
        if timed_out and self._retries is not None:
            self._retries.refresh()
        if timed_out and self._order:
            assert self._stream is not None
            local = producer_is_in_this_process(self._stream.path)  # one look for all partitions
            for follower in self._order:
                follower.choose_wakeups(local)
        due = self._store_due_in()
        if due is not None and due <= 0:
            await self._store()
