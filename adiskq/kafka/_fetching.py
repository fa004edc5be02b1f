"""One connection's fetching: a follower per partition it reads, and the long poll.

Each (topic, partition) a client fetches gets a ``PartitionFollower``, the library consumers' own
reader: it reads what the library's readers may see (whole committed records, never a batch still
being written) and registers the waits that wake it — the producer's direct wake-up when the writer
is in this process, inotify on the partition's files when it is another process (a library
producer, Spark). A Fetch that finds fewer than ``min_bytes`` arms the connection's waiter, looks
once more, and sleeps until a wake-up or ``max_wait_ms``: never a timer poll (the library's backup
poll aside, which exists for file systems without inotify).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Final

import anyio
import anyio.lowlevel

from .._async import wakeup
from .._async.follower import PartitionFollower
from .._async.notify import Notifier, get_notifier
from .._sansio.naming import INDEX
from .._storage.log_start import load_log_start
from .._storage.segment_files import segment_path
from ._records import NULLS_HEADER, batch_from_messages
from ._topics import Topics
from ._transactional_fetch import holds_transactions, transactional_batches
from .wire.stored_batch import batch_from_stored

__all__ = ["MAX_FETCH_MESSAGES", "FetchSession", "read_batch"]

# At most this many messages per read, and per record batch of a Fetch answer: bounds the time
# one read, or one batch's encoding, holds the event loop.
MAX_FETCH_MESSAGES: Final = 1000
# The same for records that go straight to a batch (no Message a record, far cheaper: see
# benchmarks/RESULTS.md, section "Figures the code relies on", F13): a client's default
# share of a partition (max.partition.fetch.bytes, 1 MiB) of 100-byte values is one batch, which the
# response then carries without joining batches.
MAX_STORED_RECORDS: Final = 8192


def read_batch(
    follower: PartitionFollower,
    max_bytes: int,
    max_count: int = MAX_STORED_RECORDS,
    *,
    at_least_one: bool = True,
    starts: list[tuple[int, int]] | None = None,
) -> tuple[bytes, int] | None:
    """The partition's next records (up to ``max_count``, and ``max_bytes`` of stored records but
    at least one) as one Kafka record batch, and how many records it holds, the follower moved past
    them; None when caught up.

    ``at_least_one=False``: the batch itself is at most ``max_bytes`` (fewer records, as many as
    fit), and ``(b"", 0)`` (the follower not moved) when not even the next record fits. Kafka lets
    only the first batch of a response exceed the request's limits (KIP-74); a client sizes its
    receive buffer from them, and librdkafka drops a response larger than that.

    The stored records go straight to the batch (``batch_from_stored``: no Message a record); a run
    holding a Kafka transaction's records or markers is served as Kafka serves them, in
    transactional and control batches (``transactional_batches``). A run off those paths (a damaged
    record, a value whose dictionary is not loaded yet, a record that repeats a header name) is read
    as Messages instead (up to MAX_FETCH_MESSAGES), as every reader
    reads it: that read returns the records before a damaged one, and the read that reaches it
    raises the error that names it. ``starts`` gets the (producer id, offset) where each transaction
    among the records returned starts (``transactional_batches``)."""
    while True:
        run = follower.peek_stored(max_count, max_bytes)
        if run is None:
            return None
        found: list[tuple[int, int]] = []  # the transactions starting in the run (``starts``)
        batch = batch_from_stored(
            run.data,
            run.first_offset,
            run.record_count,
            max_record_bytes=run.max_record_bytes,
            dictionaries=run.dictionaries,
            nulls_header=NULLS_HEADER,
        )
        if batch is None and holds_transactions(run.data, run.record_count):
            # A transaction's records or markers: batches of their own (``_transactional_fetch.py``)
            batches = transactional_batches(
                run.data,
                run.first_offset,
                run.record_count,
                max_record_bytes=run.max_record_bytes,
                dictionaries=run.dictionaries,
                starts=found,
            )
            batch = None if batches is None else b"".join(batches)
        if batch is None:
            break
        count = run.record_count
        del run
        if at_least_one or len(batch) <= max_bytes:
            follower.skip(count)
            if starts is not None and found:
                starts.extend(found)
            return batch, count
        if count == 1:
            return _NOTHING_FITS
        max_count = count // 2  # (rare: the stored records are larger than their Kafka records)
    del run  # (a view of a mapped segment: let go of it before the segment may be closed)
    while True:
        position = follower.position
        messages = follower.read(min(max_count, MAX_FETCH_MESSAGES), max_bytes)
        if not messages:
            return None
        batch = batch_from_messages(messages)
        if at_least_one or len(batch) <= max_bytes:
            return batch, len(messages)
        follower.seek(position)
        if len(messages) == 1:
            return _NOTHING_FITS
        max_count = len(messages) // 2


_NOTHING_FITS: Final = (b"", 0)  # ``read_batch`` without at_least_one: not even one record fits


def _no_skip(partition: int, first: int, last_exclusive: int) -> None:
    """Fetch reports data loss as OFFSET_OUT_OF_RANGE (on_data_loss="raise"): nothing is skipped."""


class FetchSession:
    """The followers of one connection, and its waiter."""

    def __init__(self, topics: Topics, waiter: wakeup.Waiter) -> None:
        self._topics = topics
        self.waiter = waiter
        self._followers: dict[tuple[str, int], PartitionFollower] = {}
        self._generation = topics.generation
        self._notifier: Notifier | None = None
        # The log start offset last seen (``log_start``) and its segment's index path, by partition folder
        self._oldest: dict[str, tuple[int, str]] = {}
        self._event_loop: tuple[object, Callable[[], float]] | None = None  # see ``event_loop``
        # The connection's last Fetch waited in the long poll: its next arms before its first look
        # (a consumer that has caught up keeps waiting, Fetch after Fetch).
        self.waits = False

    @property
    def notifier(self) -> Notifier:
        """The process's notifier (inotify), taken on first use."""
        if self._notifier is None:
            self._notifier = get_notifier()
        return self._notifier

    def event_loop(self) -> tuple[object, Callable[[], float]]:
        """The event loop the connection is served in (its native token, which ``Waiter.arm``
        takes) and its clock (``anyio.current_time``'s), looked up on the first long poll: each
        lookup through anyio costs more than the rest of a long poll's own work, and a
        connection stays in one loop."""
        found = self._event_loop
        if found is None:
            token = anyio.lowlevel.current_token().native_token
            clock = token.time if isinstance(token, asyncio.AbstractEventLoop) else anyio.current_time
            found = self._event_loop = (token, clock)
        return found

    def known_event_loop(self) -> tuple[object, Callable[[], float]] | None:
        """``event_loop``'s answer once a long poll has looked it up; None before (the lookup goes
        through anyio, which finds no event loop from a protocol callback, outside a task)."""
        return self._event_loop

    def follower(self, topic: str, partition: int, offset: int) -> PartitionFollower:
        """A follower of the partition positioned at ``offset``.

        Raises StreamNotFoundError (no such topic), InvalidArgumentError (no such partition),
        OffsetOutOfRangeError (``offset`` is past the end).
        """
        if self._topics.generation != self._generation:  # a topic was deleted or grew: start afresh
            self.close()
            self._generation = self._topics.generation
        key = (topic, partition)
        budget = self._topics.budget
        follower = self._followers.get(key)
        if follower is not None:
            # A DeleteRecords may have raised the log start past a follower still reading its old
            # segment: a new one answers OFFSET_OUT_OF_RANGE, as Kafka does.
            if follower.position == offset and offset >= load_log_start(follower.reader.directory):
                return follower
            budget.reader_gone(follower)
            follower.close()
            del self._followers[key]
        follower = PartitionFollower(
            self._topics.reader(topic),
            partition,
            position=offset,
            end=None,
            on_data_loss="raise",
            notifier=self.notifier,
            waiter=self.waiter,
            on_skip=_no_skip,
        )
        self._followers[key] = follower
        return follower

    def reading(self, follower: PartitionFollower) -> None:
        """``follower`` is about to read: it goes last in the gateway's order of readers, and the
        readers used longest ago close their files if more are open than the budget allows."""
        self._topics.budget.reader_used(follower, follower.release_files)

    async def wait(self, followers: list[PartitionFollower], seconds: float) -> bool:
        """Sleep until a wake-up for one of ``followers`` or ``seconds`` pass; the caller armed the
        waiter and looked once more. True when woken, False when the time ran out."""
        notifier = self.notifier
        kernel = any(follower.uses_inotify for follower in followers)
        await notifier.wait(self.waiter, min(seconds, notifier.poll_seconds), kernel=kernel)
        if not self.waiter.fired:
            for follower in followers:
                follower.choose_wakeups()  # a producer may have come or gone meanwhile
            return False
        return True

    def log_start(self, follower: PartitionFollower) -> int:
        """The partition's oldest offset, which a Fetch answer carries.

        That is the base of its first segment, or its log start offset once DeleteRecords raised it
        (``_storage/log_start.py``: one more ``access`` when there is none). Retention deletes
        segments from the oldest on and writers only add segments after the last, so while the first
        segment seen is still there it is still the first: one look for its index file instead of
        listing the partition's folder on every Fetch. The look is ``access``, whose answer is a
        bool: a ``stat`` builds a result object (times as floats) that cost more than the rest of
        the look; the path is kept with the offset."""
        directory = follower.reader.directory
        start = load_log_start(directory)  # raised by DeleteRecords (one look when there is none)
        seen = self._oldest.get(directory)
        if seen is not None and start <= seen[0] and os.access(seen[1], os.F_OK):
            return seen[0]
        bases = follower.reader.segment_bases()
        oldest = follower.reader.bounds()[0]
        if bases:
            self._oldest[directory] = (oldest, segment_path(directory, bases[0], INDEX))
        return oldest

    def close(self) -> None:
        """Close every follower (files, watches, registrations)."""
        self._oldest.clear()
        followers, self._followers = list(self._followers.values()), {}
        for follower in followers:
            self._topics.budget.reader_gone(follower)
            follower.close()
