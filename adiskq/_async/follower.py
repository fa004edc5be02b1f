"""Following one partition: reading it from a position up to an end, and knowing what to watch.

Shared by ``Consumer`` and ``ConsumerGroup``. A follower never awaits: the reader's wait loop
(``reader.py``) does. When caught up it watches the ``.index`` of the segment it reads and the
partition's folder (for the next segment) with inotify, unless the partition's producer runs in this
process: that producer wakes it directly after every commit (``wakeup.py``).

The wake-ups are set up at the first wait (``prepare_wait``), not when the follower is made: a
reader that reads a backlog to its end never loads inotify's bindings, reads the stream's ``owner``
file or adds and removes a watch (``inotify_rm_watch`` alone is a slow system call: see
benchmarks/RESULTS.md, section "Figures the code relies on", F4). Nothing is missed by
setting up late: the wait loop looks at the partition again after ``prepare_wait`` and before it sleeps.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal

from .._errors import DeserializationError, OffsetOutOfRangeError
from .._sansio.decoding import MessageDecoder
from .._sansio.naming import INDEX
from .._sansio.tags import TagFilter
from .._sansio.values import Message
from .._storage.cursors import PartitionCursor
from .._storage.lock import owner_text
from .._storage.segment_files import segment_path
from .._storage.segment_reader import UndecodedRecords
from .._storage.stream import StreamReader
from . import wakeup

if TYPE_CHECKING:
    from .notify import Notifier, Watch

__all__ = ["MAX_READ_BYTES", "OnDataLoss", "PartitionFollower", "producer_is_in_this_process"]

logger = logging.getLogger("adiskq")

OnDataLoss = Literal["skip", "raise"]

# One read covers at most this much data: bounds the time a read holds the event loop.
MAX_READ_BYTES: Final = 4 * 2**20
# A filtered read looks at most this many offsets' tag hashes (a 4-byte entry and a 24-byte index
# entry each, no record) before it lets other tasks run, whether or not it found a match.
MAX_SCAN_OFFSETS: Final = 65_536
# A filtered read passes at most this many offsets at a time to the segment (one read of the index
# and of the tag column each).
_SCAN_STEP: Final = 8192
_INDEX_SUFFIX: Final = "." + INDEX
_HOST: Final = socket.gethostname()


def process_notifier() -> Notifier:
    """The process's notifier (``notify.py``), imported at the first wait rather than with the
    readers: its inotify bindings (ctypes, a library search) are slow to import (measured: see
    benchmarks/RESULTS.md, section "Figures the code relies on", F5)."""
    from .notify import get_notifier

    return get_notifier()


def producer_is_in_this_process(stream_path: str) -> bool:
    """True when the stream's producer runs in this process (its ``owner`` text names us).

    Such a producer wakes our consumers directly after every commit, so they need no inotify watch
    (whose events would only wake them a second time, each parsed for nothing: see
    benchmarks/RESULTS.md, section "Figures the code relies on", F6). The text is
    emptied when a producer closes; a producer of another process rewrites it when it opens, which
    consumers notice at their next poll.
    """
    info = owner_text(stream_path)
    return info is not None and info.get("pid") == os.getpid() and info.get("host") == _HOST


class PartitionFollower:
    """Reads one partition from a position up to an end, and knows what to watch when caught up.

    Shared by ``Consumer`` and ``ConsumerGroup``; it never awaits: the caller waits.
    """

    def __init__(
        self,
        stream: StreamReader,
        partition: int,
        *,
        position: int,
        end: int | None,
        on_data_loss: OnDataLoss,
        notifier: Notifier | None,
        waiter: wakeup.Waiter,
        on_skip: Callable[[int, int, int], None],
        tag_filter: TagFilter | None = None,
        decoder: MessageDecoder | None = None,
        next_offset: int | None = None,
    ) -> None:
        """``notifier``: the one to watch with (None: the process's, taken at the first wait);
        ``next_offset``: the partition's next offset, when the caller has just looked it up."""
        reader = stream.partition(partition)
        if next_offset is None:
            _, next_offset = reader.bounds()
        if position > next_offset:
            raise OffsetOutOfRangeError(
                f"offset {position} of partition {partition} is not written yet (the next offset is "
                f"{next_offset}); start at an offset up to {next_offset}, or at 'newest'",
                partition=partition,
                offset=position,
                next_offset=next_offset,
            )
        self.partition = partition
        self.reader = reader
        self._stream = stream
        self.position = position
        self.end = end
        self.on_data_loss = on_data_loss
        self._on_skip = on_skip  # (partition, first, last_exclusive) of each range retention took
        self._cursor: PartitionCursor = reader.cursor(position)
        self._notifier = notifier
        self._waiter = waiter
        # The wake-ups (set up at the first wait): the in-process registration under ``key``, and
        # the watches, unless the producer is in this process (``local``).
        self.key: wakeup.PartitionKey | None = None
        self._stream_path = stream.path
        self._folder_watch: Watch | None = None
        self._index_watch: Watch | None = None
        self.local = False  # the producer is in this process: wake-ups come without the kernel
        self.closed = False
        self.tag_filter = tag_filter
        self.decoder = decoder
        # A filtered read stopped at MAX_SCAN_OFFSETS with more to look at: read again before waiting.
        self.more_to_scan = False
        self._scan_step = 0  # offsets a filtered read looks at (see _read_tagged)

    @property
    def uses_inotify(self) -> bool:
        """True when this partition relies on inotify to be woken (its wake-ups are set up to tell)."""
        notifier = self._set_up_wakeups()
        return not self.local and notifier.uses_inotify

    def _set_up_wakeups(self) -> Notifier:
        """Register for in-process wake-ups and choose the watches, the first time; the notifier."""
        notifier = self._notifier
        if notifier is None:
            notifier = self._notifier = process_notifier()
        if self.key is None and not self.closed:
            self.key = (self._stream.real_path, self.partition)
            wakeup.register(self.key, self._waiter)
            self._choose_wakeups(notifier, None)
        return notifier

    def choose_wakeups(self, local: bool | None = None) -> None:
        """Watch the partition with inotify unless its producer is in this process (``local``, when
        the caller has just looked for all the stream's partitions)."""
        self._choose_wakeups(self._set_up_wakeups(), local)

    def _choose_wakeups(self, notifier: Notifier, local: bool | None) -> None:
        self.local = producer_is_in_this_process(self._stream_path) if local is None else local
        if self.local:
            self._drop_watches()
        elif self._folder_watch is None and not self.closed:
            self._folder_watch = notifier.watch(self.reader.directory, self._waiter, folder_suffix=_INDEX_SUFFIX)

    @property
    def done(self) -> bool:
        """True once the end offset is reached."""
        return self.end is not None and self.position >= self.end

    def read(self, max_count: int, max_bytes: int = MAX_READ_BYTES) -> list[Message]:
        """Up to ``max_count`` messages (and about ``max_bytes``, at least one message) from the
        position on; ``[]`` when caught up or done."""
        while True:
            end = self.end
            if end is not None:
                if self.position >= end:
                    return []
                max_count = min(max_count, end - self.position)
            try:
                if self.tag_filter is not None:
                    messages = self._read_tagged(max_count, self.tag_filter)
                else:
                    messages = self._cursor.read(max_count, max_bytes)
                    # The records passed: more than the messages where a Kafka transaction's markers
                    # and aborted records were left out (cursors.PartitionCursor).
                    self.position = self._cursor.position
            except OffsetOutOfRangeError as error:
                if error.oldest_offset is None:
                    raise
                self._data_lost(error.oldest_offset)
                continue
            if self.decoder is not None and messages:
                return self._decoded(messages, self.decoder)
            return messages

    def peek_stored(self, max_count: int, max_bytes: int = MAX_READ_BYTES) -> UndecodedRecords | None:
        """The stored bytes of the records ``read`` would return next, undecoded, without moving the
        position (``skip`` moves it once they are used; ``read`` decodes the same records instead);
        None when caught up or done. For a follower without a tag filter or deserializers, whose
        records are its messages one for one."""
        if self.tag_filter is not None or self.decoder is not None:
            raise ValueError("peek_stored reads a follower without a tag filter or deserializers")
        while True:
            end = self.end
            if end is not None:
                if self.position >= end:
                    return None
                max_count = min(max_count, end - self.position)
            try:
                return self._cursor.peek_stored(max_count, max_bytes)
            except OffsetOutOfRangeError as error:
                if error.oldest_offset is None:
                    raise
                self._data_lost(error.oldest_offset)

    def skip(self, count: int) -> None:
        """Move past ``count`` records that ``peek_stored`` returned."""
        self._cursor.skip(count)
        self.position += count

    def _decoded(self, messages: list[Message], decoder: MessageDecoder) -> list[Message]:
        """The messages through the reader's deserializers; at the first that fails, the ones before
        it, and the position back on it (its next read raises ``DeserializationError``)."""
        decoded, failure = decoder.decode(messages)
        if failure is None:
            return decoded
        failed = messages[len(decoded)]
        self.seek(failed.offset)
        if decoded:
            return decoded
        error = failure.error
        raise DeserializationError(
            f"the {failure.which} failed on message {failed.offset} of partition {self.partition} "
            f"({type(error).__name__}: {error}); it was not delivered and nothing after it was skipped. "
            f"Fix the function, or read on after it (Consumer(partition={self.partition}, "
            f"start={failed.offset + 1}), group.seek({self.partition}, {failed.offset + 1}))",
            partition=self.partition,
            offset=failed.offset,
        ) from error

    def seek(self, offset: int) -> None:
        """Read on from ``offset`` (the partition's next offset at most; an older one than retention
        kept is handled as ``on_data_loss`` says, at the next read)."""
        _, next_offset = self.reader.bounds()
        if offset > next_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} of partition {self.partition} is not written yet (the next offset is "
                f"{next_offset}); seek to an offset up to {next_offset}",
                partition=self.partition,
                offset=offset,
                next_offset=next_offset,
            )
        self._cursor.seek(offset)
        self.position = offset
        self.more_to_scan = False

    def _read_tagged(self, max_count: int, tag_filter: TagFilter) -> list[Message]:
        """The next messages with a wanted tag; ``[]`` when caught up or done, or (with
        ``more_to_scan`` set) after looking at ``MAX_SCAN_OFFSETS`` offsets without a match."""
        self.more_to_scan = False
        scanned = 0
        while True:
            step = self._scan_step = max(self._scan_step, max_count)
            if self.end is not None:
                step = min(step, self.end - self.position)
            if step <= 0:
                return []
            messages, passed = self._cursor.read_tagged(max_count, step, tag_filter, MAX_READ_BYTES)
            self.position += passed
            # The step follows the share of wanted messages: what holds max_count of them, found
            # by doubling (a scan reads its index entries and column whether it uses them or not).
            if len(messages) < max_count:
                self._scan_step = min(_SCAN_STEP, self._scan_step * 2)
            else:
                self._scan_step = max(max_count, self._scan_step // 2)
            if messages or not passed:
                return messages
            scanned += passed
            if scanned >= MAX_SCAN_OFFSETS:
                self.more_to_scan = True
                return []

    def _data_lost(self, oldest: int) -> None:
        first = self.position
        if self.on_data_loss == "raise":
            raise OffsetOutOfRangeError(
                f"offsets {first}..{oldest - 1} of partition {self.partition} were deleted by retention "
                f"before this consumer read them; the oldest offset is now {oldest}. Open the consumer "
                "with on_data_loss='skip' to continue from there, or keep more data (Retention)",
                partition=self.partition,
                offset=first,
                oldest_offset=oldest,
            )
        resume = oldest if self.end is None else min(oldest, self.end)
        logger.warning(
            "adiskq: partition %d: offsets %d..%d were deleted by retention before they were read; skipped",
            self.partition,
            first,
            resume - 1,
        )
        self._on_skip(self.partition, first, resume)
        self._cursor.seek(resume)
        self.position = resume

    def prepare_wait(self) -> int | None:
        """Watch the ``.index`` of the segment being read; returns that segment's base offset."""
        notifier = self._set_up_wakeups()
        base = self._cursor.segment_base
        if self.local:
            return base
        path = None if base is None else segment_path(self.reader.directory, base, INDEX)
        current = self._index_watch
        if current is None or current.path != path:
            if current is not None:
                notifier.unwatch(current, self._waiter)
                self._index_watch = None
            if path is not None:
                watch = notifier.watch(path, self._waiter)
                self._index_watch = watch
        return base

    def moved_since(self, base: int | None) -> bool:
        """True when the cursor went on to another segment since ``prepare_wait`` returned ``base``,
        or a filtered read stopped with more to look at."""
        return self._cursor.segment_base != base or self.more_to_scan

    def release_files(self) -> None:
        """Close the open segment's files now; the next read reopens them at the same position
        (what a server that reads many partitions does to keep within its open-files limit)."""
        self._cursor.close()

    def close(self) -> None:
        """Release files, watches and the waiter's registration; closing twice is harmless."""
        if self.closed:
            return
        self.closed = True
        self._cursor.close()
        if self.key is not None:
            wakeup.unregister(self.key, self._waiter)
        self._drop_watches()

    def _drop_watches(self) -> None:
        for watch in (self._index_watch, self._folder_watch):
            if watch is not None:
                assert self._notifier is not None  # a watch was made with it
                self._notifier.unwatch(watch, self._waiter)
        self._index_watch = self._folder_watch = None
