"""A named group's retries and dead letters in the event loop (RocketMQ's retry and DLQ topics).

``retry(message, delay=)`` appends the message to the group's retry stream (``_storage/retries.py``,
fsynced in a worker thread) before it returns; the group then counts the message as processed, so
the messages behind it go on. The member holding a partition also holds that partition of the retry
stream: it reads the records into a heap ordered by when each falls due, hands out those that are
due between its reads, and commits the retry stream (with the group's commits) up to the lowest
record not yet finished. A message that reaches ``max_attempts`` deliveries, or that
``dead_letter()`` is called on, is pushed to the dead-letter stream through a shared producer that
fsyncs every push.

Reading the retry stream costs nothing while the group has none: its folder is looked for when a
partition is taken, after a retry, and when the group looks at its members.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread

from .._errors import InvalidArgumentError, StreamNotFoundError
from .._sansio import retries as headers
from .._sansio.core import encode_record
from .._sansio.values import Message
from .._storage.flocks import SHARED_LOCK_TIMEOUT_SECONDS
from .._storage.offsets import load_offsets, update_offsets
from .._storage.partition_reader import PartitionReader
from .._storage.retries import RetryAppender, load_finished, retry_stream_path, update_finished
from .._storage.stream import StreamReader
from .commits import CommitLedger

if TYPE_CHECKING:
    from .producer import Producer

__all__ = ["GroupRetries"]

logger: Final = logging.getLogger("adiskq.group")

# Retry records read into memory at a time, per partition (the heap holds every pending one).
_READ_BATCH: Final = 1000


class _PartitionRetries:
    """One held partition of the retry stream: records read but not yet delivered (by due time),
    the offsets of every record read and not finished, and how far it has been read."""

    __slots__ = ("cursor", "done", "finished_before", "source_next", "unfinished", "waiting")

    def __init__(self, reader: PartitionReader, position: int, finished_before: set[int]) -> None:
        self.cursor = reader.cursor(position)
        self.waiting: list[tuple[int, int, Message]] = []  # (due ns, retry offset, record), a heap
        # Offsets read and not finished, a heap; finished ones leave it lazily, through ``done``
        # (a flood of retries makes thousands pending: each finish stays O(log n)).
        self.unfinished: list[int] = []
        self.done: set[int] = set()
        # Records a member finished (and stored so) above the stored retry commit: not delivered again.
        self.finished_before = finished_before
        # Past the source offset of every retry read: retry() counted each one's message processed,
        # so the source partition is committed at least this far (stored or not when it returned).
        self.source_next = 0

    def read_new(self) -> None:
        """Take the records appended since the last look into the heaps."""
        while batch := self.cursor.read(_READ_BATCH):
            for record in batch:
                heapq.heappush(self.unfinished, record.offset)
                self.source_next = max(self.source_next, headers.source_of(record).offset + 1)
                if record.offset in self.finished_before:
                    self.finished_before.discard(record.offset)
                    self.done.add(record.offset)
                else:
                    heapq.heappush(self.waiting, (headers.due_ns(record), record.offset, record))
        self._drop_finished()

    def finish(self, offset: int) -> int:
        """Mark a delivered record done; returns the lowest offset not finished (all before it are done)."""
        if self.unfinished and offset >= self.unfinished[0]:  # below it, the offset was finished and dropped already
            self.done.add(offset)
        return self._drop_finished()

    def _drop_finished(self) -> int:
        """Drop the finished records off the low end; returns the lowest offset not finished."""
        unfinished, done = self.unfinished, self.done
        while unfinished and unfinished[0] in done:
            done.discard(heapq.heappop(unfinished))
        return unfinished[0] if unfinished else self.cursor.position

    def is_finished(self, offset: int) -> bool:
        """True if the record at ``offset`` (one read) is done."""
        if offset in self.done:
            return True
        return offset < (self.unfinished[0] if self.unfinished else self.cursor.position)

    def finished_above(self) -> list[int]:
        """The records done above the lowest one not done (what a commit cannot say)."""
        return sorted(self.done)

    def close(self) -> None:
        self.cursor.close()


class GroupRetries:
    """The retries of one member of a named group: the partitions it holds, their due retries, the
    commits of its retry stream, and its writers (the retry stream's, the dead-letter stream's)."""

    def __init__(
        self,
        stream_path: str,
        name: str,
        *,
        max_attempts: int | None,
        dead_letter_path: str,
        commit_interval: float,
    ) -> None:
        self.stream_path = stream_path
        self.name = name
        self.max_attempts = max_attempts
        self.dead_letter_path = dead_letter_path
        self._source = os.path.abspath(stream_path)  # what dead letters name as their source stream
        self.path = retry_stream_path(stream_path, name)
        self.ledger = CommitLedger(commit_interval)
        self.active = False  # True once this member has a retry stream to read (skips the work until then)
        self._held: set[int] = set()
        self._partitions: dict[int, _PartitionRetries] = {}
        self._reader: StreamReader | None = None
        self._appender = RetryAppender(stream_path, name)
        self._dead_letters: Producer | None = None  # opened on the first dead letter
        self._stored_finished: dict[int, list[int]] = {}  # partition -> finished.json's list, as last stored
        self._next_due_ns: int | None = None
        self._write_lock = anyio.Lock()

    # -- partitions held ---------------------------------------------------------------------------

    def hold(self, partitions: list[int]) -> dict[int, int]:
        """This member reads these partitions now: read their retries, after the stored retry
        commits. Returns, per partition with retries, the source offset its commit is at least
        (past every message a retry was stored for: ``retry()`` counts its message processed, and a
        member may have died before that commit was stored)."""
        self._held.update(partitions)
        self.refresh()
        return {p: self._partitions[p].source_next for p in partitions if p in self._partitions}

    def release(self, partition: int) -> None:
        """The partition went to another member (its retry commits were stored first)."""
        self._held.discard(partition)
        held = self._partitions.pop(partition, None)
        if held is not None:
            held.close()
        self.ledger.forget(partition)
        self._stored_finished.pop(partition, None)
        self._note_due()

    def refresh(self) -> None:
        """Open the retry stream if it exists now, start the held partitions it has, and read new records."""
        if not self._held:
            return
        if self._reader is None:
            if not os.path.exists(os.path.join(self.path, "settings.json")):
                return
            try:
                self._reader = StreamReader.open(self.path)
            except StreamNotFoundError:
                return
        reader = self._reader
        missing = [p for p in self._held if p not in self._partitions]
        if missing:
            if max(missing) >= reader.partition_count:
                reader.refresh()
            stored = load_offsets(self.path, self.name)
            finished = load_finished(self.stream_path, self.name)
            for partition in missing:
                if partition >= reader.partition_count:
                    continue
                partition_reader = reader.partition(partition)
                oldest, _ = partition_reader.bounds()
                position = max(oldest, stored.get(partition, 0))
                done = {offset for offset in finished.get(partition, ()) if offset >= position}
                self._partitions[partition] = _PartitionRetries(partition_reader, position, done)
                self._stored_finished[partition] = sorted(done)
                self.ledger.began(partition, position, stored.get(partition))
        for partition, held in self._partitions.items():
            held.read_new()
            if held.unfinished or held.done:
                continue
            self.ledger.commit(partition, held.cursor.position)  # finished before: the commit moves past
        self.active = bool(self._partitions)
        self._note_due()

    def _note_due(self) -> None:
        heads = [held.waiting[0][0] for held in self._partitions.values() if held.waiting]
        self._next_due_ns = min(heads) if heads else None

    # -- delivering --------------------------------------------------------------------------------

    def due_in(self) -> float | None:
        """Seconds until the next retry falls due (<= 0: one is due now), or None if none waits."""
        if self._next_due_ns is None:
            return None
        return (self._next_due_ns - time.time_ns()) / 1e9

    def take_due(self, max_messages: int) -> list[Message]:
        """Up to ``max_messages`` due retries of one partition (the first with any), as delivered; [] if none."""
        due = self._next_due_ns
        if due is None:
            return []
        now = time.time_ns()
        if due > now:
            return []
        for held in self._partitions.values():
            if held.waiting and held.waiting[0][0] <= now:
                taken: list[Message] = []
                while held.waiting and held.waiting[0][0] <= now and len(taken) < max_messages:
                    record = heapq.heappop(held.waiting)[2]
                    taken.append(headers.delivered(record))
                self._note_due()
                return taken
        self._note_due()
        return []

    def finish(self, message: Message[Any, Any]) -> bool:
        """Mark a delivered retry done (committed, retried again or dead-lettered); False if ``message``
        was not delivered from the retry stream."""
        offset = headers.retry_offset(message)
        if offset is None:
            return False
        held = self._partitions.get(message.partition)
        if held is None:
            raise InvalidArgumentError(
                f"partition {message.partition} is not held by this member of group {self.name!r} any more: "
                "its holder delivers this retry again"
            )
        self.ledger.commit(message.partition, held.finish(offset))
        self.ledger.touch(message.partition)  # its finished records are stored even if the commit stays
        return True

    def finished(self, message: Message[Any, Any]) -> bool:
        """True if ``message`` was delivered from the retry stream and its record is done already."""
        offset = headers.retry_offset(message)
        held = self._partitions.get(message.partition)
        if offset is None or held is None:
            return False
        return held.is_finished(offset)

    # -- retrying and dead letters -----------------------------------------------------------------

    async def retry(self, message: Message, *, delay: float, reason: str | None, partitions: int) -> None:
        """Store ``message`` in the retry stream for delivery ``message.attempt + 1`` after ``delay``
        seconds (fsynced before this returns); the caller then marks ``message`` processed."""
        due_ns = time.time_ns() + int(delay * 1e9)
        attempt = message.attempt + 1
        now = time.time_ns()
        record = encode_record(
            message.value,
            message.key,
            now,
            headers.retry_headers(message, attempt=attempt, due_ns=due_ns, reason=reason),
            0,
            message.tag,
        )
        source = headers.source_of(message)
        async with self._write_lock:
            await anyio.to_thread.run_sync(self._appender.append, source.partition, partitions, record, now)
        self.refresh()

    async def dead_letter(self, message: Message, *, reason: str) -> None:
        """Push ``message`` to the dead-letter stream (fsynced) with headers naming where it came from."""
        # Loaded with the first dead letter, not with every group.
        from .partition_writes import opened
        from .producer import Producer

        async with self._write_lock:
            producer = self._dead_letters
            if producer is None:  # kept open across calls, closed by aclose()
                producer = await opened(Producer(self.dead_letter_path, shared=True, flush="sync", lock_timeout=10.0))
                self._dead_letters = producer
        await producer.push(
            message.value,
            key=message.key,
            tag=message.tag,
            headers=headers.dead_letter_headers(message, stream=self._source, group=self.name, reason=reason),
        )

    async def aclose(self) -> None:
        """Close the readers and writers (shielded: the writers fsync)."""
        for held in self._partitions.values():
            held.close()
        self._partitions.clear()
        self._held.clear()
        self._next_due_ns = None
        with anyio.CancelScope(shield=True):
            producer, self._dead_letters = self._dead_letters, None
            try:
                if producer is not None:
                    await producer.aclose()
            finally:
                await anyio.to_thread.run_sync(self._appender.close)

    # -- storing the retry stream's commits --------------------------------------------------------

    async def store(self, partitions: list[int], *, wait_seconds: float = SHARED_LOCK_TIMEOUT_SECONDS) -> None:
        """Store the retry commits pending for these partitions, and the records finished above
        them (the caller holds the group's store lock); ``LockTimeoutError`` after waiting
        ``wait_seconds`` for another member's store."""
        offsets = self.ledger.to_store(partitions, carry_starts=False)
        if not offsets:
            return
        finished = {}
        for partition in offsets:
            held = self._partitions.get(partition)
            done = held.finished_above() if held is not None else []
            if done != self._stored_finished.get(partition, []):
                finished[partition] = done
        stream_path, path, name = self.stream_path, self.path, self.name
        if finished:
            # Before the commits: a crash between the two leaves finished records listed that the
            # old commit still covers (delivered again: at least once), never the other way round.
            await anyio.to_thread.run_sync(
                lambda: update_finished(stream_path, name, finished, timeout_seconds=wait_seconds)
            )
            self._stored_finished.update(finished)
        await anyio.to_thread.run_sync(lambda: update_offsets(path, name, offsets, timeout_seconds=wait_seconds))
        self.ledger.stored(offsets)
        try:  # what is done for good need not stay on disk
            await anyio.to_thread.run_sync(self._appender.trim, offsets)
        except OSError as error:
            logger.warning("group %r: deleting its finished retries failed (they are kept): %s", name, error)
