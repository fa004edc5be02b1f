"""``ConsumerGroup``: every partition of a stream merged into one async iterator, with stored progress.

One task reads the partitions in turn (no task per partition): each refill takes a batch from the
next partition that has messages, so a busy partition cannot starve the others, and order within a
partition is kept. When every partition is caught up, the group sleeps on one waiter that every
partition (and ``settings.json``, for partitions added later) can wake.

With ``name=``, ``commit(msg)`` records progress in memory; it is stored under ``groups/NAME/`` every
``commit_interval`` seconds while the group is read, by ``flush()``, and on close — in a worker
thread, because it fsyncs. After a restart the group resumes after the last stored commit; committed
offsets win over ``start``.

Issue 5 (members in several processes sharing the partitions) changes only who holds which
partition: ``assignment`` is the set of partitions read here, ``_assign`` changes it, and offsets
are stored per partition (``update_offsets``), so members never undo each other's commits.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Final, Literal, Self

import anyio
import anyio.lowlevel
import anyio.to_thread

from .._errors import ClosedError
from .._sansio.naming import validate_group_name
from .._sansio.values import Message
from .._storage.offsets import load_offsets, update_offsets
from .._storage.stream import StreamReader
from . import wakeup
from .consumer import (
    DEFAULT_BATCH_MESSAGES,
    OnDataLoss,
    PartitionFollower,
    SettingsWatch,
    Start,
    _Batches,
    check_max_messages,
    check_on_data_loss,
    check_start,
    resolve_start,
)
from .notify import Notifier, get_notifier

__all__ = ["ConsumerGroup", "GroupEnd"]

GroupEnd = Literal["wait", "close"]
DEFAULT_COMMIT_INTERVAL: Final = 1.0


class ConsumerGroup:
    """All partitions of a stream as one async iterator; with a ``name``, progress survives restarts.

    ``start`` applies to partitions without a committed offset (see ``Consumer``); partitions added
    after the group opened are read from their first message (all of it is new), or from ``start``
    when that is a ``datetime``. ``end``: ``"wait"`` (follow forever, new partitions included) or
    ``"close"`` (stop at the end of what was there when the group opened).

    ``commit(msg)`` marks ``msg`` and everything before it in its partition as processed. Commits are
    stored every ``commit_interval`` seconds while the group is read, on ``flush()`` and on close;
    a crash loses at most the commits of the last interval (those messages come again: at least once).
    """

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
    ) -> None:
        if name is not None:
            validate_group_name(name)
        check_start(start)
        if end not in ("wait", "close"):
            raise ValueError(f"end={end!r}: a group takes 'wait' or 'close'")
        check_on_data_loss(on_data_loss)
        if not commit_interval > 0:
            raise ValueError(f"commit_interval={commit_interval!r}: give a positive number of seconds")
        if poll_interval is not None and not poll_interval > 0:
            raise ValueError(f"poll_interval={poll_interval!r}: give a positive number of seconds")
        self.path = os.fspath(path)
        self.name = name
        self.start = start
        self.end = end
        self.on_data_loss = on_data_loss
        self.commit_interval = commit_interval
        self.poll_interval = poll_interval
        self._stream: StreamReader | None = None
        self._notifier: Notifier | None = None
        self._settings: SettingsWatch | None = None
        self._waiter = wakeup.Waiter()
        self._followers: dict[int, PartitionFollower] = {}
        self._order: list[PartitionFollower] = []
        self._turn = 0
        self._known_partitions = 0
        self._committed: dict[int, int] = {}  # stored on disk (as far as this member knows)
        self._pending: dict[int, int] = {}  # committed in memory, not stored yet
        self._last_store = 0.0
        self._skipped: list[tuple[int, int, int]] = []
        self._buffer: list[Message] = []
        self._buffer_index = 0
        self._reading = False
        self._opened = False
        self.closed = False

    # -- opening and closing ---------------------------------------------------------------------

    def _open(self) -> None:
        if self.closed:
            raise ClosedError("this consumer group was closed; open a new ConsumerGroup")
        if self._opened:
            return
        stream = self._stream = StreamReader.open(self.path)
        notifier = self._notifier = get_notifier()
        if self.name is not None:
            self._committed = load_offsets(stream.path, self.name)
        self._last_store = time.monotonic()
        self._settings = SettingsWatch(stream, notifier, self._waiter)
        self._opened = True
        try:
            self._assign(range(stream.partition_count), at_open=True)
        except BaseException:
            self._release()
            raise

    async def __aenter__(self) -> Self:
        self._open()
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException:
            self.closed = True  # cancelled on the way in: __aexit__ will not run
            self._release()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Store pending commits, then release files and watches (even when cancelled)."""
        if self.closed:
            await anyio.lowlevel.checkpoint()
            return
        self.closed = True
        try:
            if self._pending and self._stream is not None:
                with anyio.CancelScope(shield=True):
                    await self._store()
        finally:
            self._release()
            self._waiter.wake()
        await anyio.lowlevel.checkpoint()

    def _release(self) -> None:
        for follower in self._followers.values():
            follower.close()
        self._followers.clear()
        self._order.clear()
        if self._settings is not None:
            self._settings.close()
        self._buffer = []

    # -- partitions ------------------------------------------------------------------------------

    @property
    def assignment(self) -> tuple[int, ...]:
        """The partitions this member reads (all of them, until groups span processes)."""
        return tuple(sorted(self._followers))

    def _assign(self, partitions: range | list[int], *, at_open: bool = False) -> None:
        """Start reading the given partitions (those not read yet)."""
        stream = self._stream
        notifier = self._notifier
        assert stream is not None
        assert notifier is not None
        for partition in partitions:
            if partition in self._followers:
                continue
            reader = stream.partition(partition)
            committed = self._pending.get(partition, self._committed.get(partition))
            if committed is not None:
                position = min(committed, reader.bounds()[1])
            elif at_open or not isinstance(self.start, str | int):
                position = resolve_start(reader, self.start)
            else:
                position = reader.bounds()[0]  # a partition born after we opened: all of it is new
            end = None if self.end == "wait" else max(position, reader.bounds()[1])
            follower = PartitionFollower(
                stream,
                partition,
                position=position,
                end=end,
                on_data_loss=self.on_data_loss,
                notifier=notifier,
                waiter=self._waiter,
                on_skip=self._on_skip,
            )
            self._followers[partition] = follower
            self._order.append(follower)
        self._known_partitions = max(self._known_partitions, stream.partition_count)

    def _discover(self) -> bool:
        """Pick up partitions a producer added (``settings.json`` was replaced); True if any."""
        settings = self._settings
        if self.end != "wait" or settings is None or not settings.changed():
            return False
        count = settings.stream.partition_count
        if count <= self._known_partitions:
            return False
        self._assign(list(range(self._known_partitions, count)))
        return True

    def _on_skip(self, partition: int, first: int, last_exclusive: int) -> None:
        self._skipped.append((partition, first, last_exclusive))

    @property
    def skipped(self) -> list[tuple[int, int, int]]:
        """``(partition, first, last_exclusive)`` ranges retention deleted before they were read."""
        return list(self._skipped)

    # -- commits ---------------------------------------------------------------------------------

    def commit(self, message: Message) -> None:
        """Mark ``message`` (and all before it in its partition) processed; stored on an interval."""
        if self.closed:
            raise ClosedError("this consumer group was closed; commit before closing it")
        if self.name is None:
            raise ValueError("commit() needs a named group: ConsumerGroup(path, name='...')")
        partition = message.partition
        if partition not in self._followers:
            raise ValueError(f"partition {partition} is not assigned to this group member")
        offset = message.offset + 1
        if offset > self._pending.get(partition, self._committed.get(partition, -1)):
            self._pending[partition] = offset

    @property
    def committed(self) -> dict[int, int]:
        """Partition -> next offset, as committed (stored or still pending)."""
        return {**self._committed, **self._pending}

    async def flush(self) -> None:
        """Store pending commits now (fsynced) instead of at the next interval."""
        if self.closed:
            raise ClosedError("this consumer group was closed")
        await self._store()

    async def _store(self) -> None:
        if not self._pending or self.name is None or self._stream is None:
            return
        pending = dict(self._pending)
        stream_path, name = self._stream.path, self.name
        # A cancelled store still finishes in its thread; the commits it carries count as stored.
        await anyio.to_thread.run_sync(lambda: update_offsets(stream_path, name, pending))
        self._committed.update(pending)
        for partition, offset in pending.items():
            if self._pending.get(partition) == offset:
                del self._pending[partition]
        self._last_store = time.monotonic()

    def _store_due_in(self) -> float | None:
        if not self._pending:
            return None
        return self._last_store + self.commit_interval - time.monotonic()

    # -- reading ---------------------------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Message:
        buffer = self._buffer
        index = self._buffer_index
        if index < len(buffer):
            if self.closed:
                raise ClosedError("this consumer group was closed; open a new ConsumerGroup")
            self._buffer_index = index + 1
            return buffer[index]
        batch = await self._next_batch(DEFAULT_BATCH_MESSAGES)
        if not batch:
            raise StopAsyncIteration
        self._buffer = batch
        self._buffer_index = 1
        return batch[0]

    def batches(self, max_messages: int = DEFAULT_BATCH_MESSAGES) -> AsyncIterator[list[Message]]:
        """Iterate lists of up to ``max_messages`` messages, each from one partition."""
        return _Batches(self._next_batch, check_max_messages(max_messages))

    def _read_some(self, max_messages: int) -> list[Message]:
        """A batch from the next partition (in turn) that has messages; ``[]`` if none has."""
        order = self._order
        count = len(order)
        for step in range(count):
            index = (self._turn + step) % count
            messages = order[index].read(max_messages)
            if messages:
                self._turn = (index + 1) % count
                return messages
        return []

    def _all_done(self) -> bool:
        return self.end != "wait" and all(follower.done for follower in self._order)

    async def _next_batch(self, max_messages: int) -> list[Message]:
        self._open()
        buffer, index = self._buffer, self._buffer_index
        if index < len(buffer):
            batch = buffer[index : index + max_messages]
            self._buffer_index = index + len(batch)
            return batch
        if self._reading:
            raise anyio.BusyResourceError("reading from")
        self._reading = True
        try:
            due = self._store_due_in()
            if due is not None and due <= 0:
                await self._store()
            else:
                await anyio.lowlevel.checkpoint()
            return await self._read_or_wait(max_messages)
        finally:
            self._reading = False

    async def _read_or_wait(self, max_messages: int) -> list[Message]:
        waiter = self._waiter
        notifier = self._notifier
        assert notifier is not None
        poll = self.poll_interval or notifier.poll_seconds
        while True:
            if self.closed:
                raise ClosedError("this consumer group was closed while it was read; open a new ConsumerGroup")
            messages = self._read_some(max_messages)
            if messages or self._all_done():
                return messages
            bases = [follower.prepare_wait() for follower in self._order]
            waiter.arm()
            try:
                messages = self._read_some(max_messages)
                if messages or self._all_done():
                    return messages
                if self._discover() or any(f.moved_since(base) for f, base in zip(self._order, bases, strict=True)):
                    continue
                timeout = poll
                due = self._store_due_in()
                if due is not None:
                    timeout = max(0.0, min(timeout, due))
                # The settings watch (partitions added) is the only inotify one when every producer
                # is local; it is rare, but it still needs the descriptor read.
                await notifier.wait(waiter, timeout)
                timed_out = not waiter.fired
            finally:
                waiter.disarm()
            if timed_out:
                for follower in self._order:
                    follower.check_producer()
            due = self._store_due_in()
            if due is not None and due <= 0:
                await self._store()
