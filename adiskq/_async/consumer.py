"""``Consumer``: one partition as an async iterator that follows the producer (DESIGN §5).

Reads are two ``pread`` calls (index entries, then the data they cover) served from the page
cache, then decoding with a CRC check per record (~1 µs a message); they run on the event loop
thread, because a hop to a worker thread costs more than the read (and decoding holds the GIL
anyway). A read is capped in messages and bytes, so it holds the loop for well under a millisecond
with the default batch (benchmarks/RESULTS.md has the figures). When caught up, the consumer waits for a wake-up:
from a producer in its own process (``wakeup.notify``), from inotify, or from a slow poll.

Cancellation: a read either returns messages or consumes nothing — the wait comes before the read,
and nothing awaits between the read and handing its messages over — so a cancelled ``__anext__``
loses no message.
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Final, Literal, Self

import anyio
import anyio.lowlevel

from .._errors import ClosedError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.naming import INDEX, SETTINGS_FILE
from .._sansio.values import Message
from .._storage.cursors import PartitionCursor
from .._storage.lock import owner_text
from .._storage.segment import segment_path
from .._storage.stream import StreamReader
from . import wakeup
from .arguments import check_max_messages, check_on_data_loss, check_start, positive_seconds
from .notify import Notifier, Watch, get_notifier

__all__ = ["Consumer", "End", "OnDataLoss", "Start"]

logger = logging.getLogger("adiskq")

Start = Literal["oldest", "newest", "active-oldest"] | int | dt.datetime
End = Literal["wait", "close"] | int
OnDataLoss = Literal["skip", "raise"]

# What one read takes when the caller does not say: 256 messages of 100 bytes are decoded (CRC
# checked) in ~0.3 ms here, the longest the event loop is held by a read.
DEFAULT_BATCH_MESSAGES: Final = 256
# One read covers at most this much data: bounds the time a read holds the event loop.
MAX_READ_BYTES: Final = 4 * 2**20
_INDEX_SUFFIX: Final = "." + INDEX


_HOST: Final = socket.gethostname()


def producer_is_in_this_process(stream_path: str) -> bool:
    """True when the stream's producer runs in this process (its ``owner`` text names us).

    Such a producer wakes our consumers directly after every commit, so they need no inotify watch
    (whose events would only wake them a second time, at some 10 µs of parsing each). The text is
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
        notifier: Notifier,
        waiter: wakeup.Waiter,
        on_skip: Callable[[int, int, int], None],
    ) -> None:
        reader = stream.partition(partition)
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
        self.key: wakeup.PartitionKey = (stream.real_path, partition)
        self.position = position
        self.end = end
        self.on_data_loss = on_data_loss
        self._on_skip = on_skip  # (partition, first, last_exclusive) of each range retention took
        self._cursor: PartitionCursor = reader.cursor(position)
        self._notifier = notifier
        self._waiter = waiter
        wakeup.register(self.key, waiter)
        self._stream_path = stream.path
        self._folder_watch: Watch | None = None
        self._index_watch: Watch | None = None
        self.local = False  # the producer is in this process: wake-ups come without the kernel
        self.closed = False
        self.check_producer()

    @property
    def uses_kernel(self) -> bool:
        """True when this partition relies on inotify to be woken."""
        return not self.local and self._notifier.uses_inotify

    def check_producer(self, local: bool | None = None) -> None:
        """Watch the partition with inotify unless its producer is in this process (``local``, when
        the caller has just looked for all the stream's partitions)."""
        self.local = producer_is_in_this_process(self._stream_path) if local is None else local
        if self.local:
            self._drop_watches()
        elif self._folder_watch is None:
            self._folder_watch = self._notifier.watch(self.reader.directory, self._waiter, folder_suffix=_INDEX_SUFFIX)

    @property
    def done(self) -> bool:
        """True once the end offset is reached."""
        return self.end is not None and self.position >= self.end

    def read(self, max_count: int) -> list[Message]:
        """Up to ``max_count`` messages from the position on; ``[]`` when caught up or done."""
        while True:
            end = self.end
            if end is not None:
                if self.position >= end:
                    return []
                max_count = min(max_count, end - self.position)
            try:
                messages = self._cursor.read(max_count, MAX_READ_BYTES)
            except OffsetOutOfRangeError as error:
                if error.oldest_offset is None:
                    raise
                self._data_lost(error.oldest_offset)
                continue
            if messages:
                self.position += len(messages)
            return messages

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
        base = self._cursor.segment_base
        if self.local:
            return base
        path = None if base is None else segment_path(self.reader.directory, base, INDEX)
        current = self._index_watch
        if current is None or current.path != path:
            notifier = self._notifier
            if current is not None:
                notifier.unwatch(current, self._waiter)
                self._index_watch = None
            if path is not None:
                watch = notifier.watch(path, self._waiter)
                self._index_watch = watch
        return base

    def moved_since(self, base: int | None) -> bool:
        """True when the cursor went on to another segment since ``prepare_wait`` returned ``base``."""
        return self._cursor.segment_base != base

    def close(self) -> None:
        """Release files, watches and the waiter's registration; closing twice is harmless."""
        if self.closed:
            return
        self.closed = True
        self._cursor.close()
        wakeup.unregister(self.key, self._waiter)
        self._drop_watches()

    def _drop_watches(self) -> None:
        for watch in (self._index_watch, self._folder_watch):
            if watch is not None:
                self._notifier.unwatch(watch, self._waiter)
        self._index_watch = self._folder_watch = None


class SettingsWatch:
    """Notices when ``settings.json`` is replaced (a producer added partitions)."""

    def __init__(self, stream: StreamReader, notifier: Notifier, waiter: wakeup.Waiter) -> None:
        self.stream = stream
        self._path = os.path.join(stream.path, SETTINGS_FILE)
        self._signature = self._stat()
        self._notifier = notifier
        self._waiter = waiter
        self._watch: Watch | None = notifier.watch(stream.path, waiter, folder_suffix=SETTINGS_FILE)

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def changed(self) -> bool:
        """True (once) when the settings file was replaced since the last look; reloads it then."""
        signature = self._stat()
        if signature == self._signature:
            return False
        self._signature = signature
        self.stream.refresh()
        return True

    def close(self) -> None:
        """Drop the watch; closing twice is harmless."""
        if self._watch is not None:
            self._notifier.unwatch(self._watch, self._waiter)
            self._watch = None


class _Batches:
    """``async for batch in source.batches(...)``: lists of messages, the same reading as ``async for msg``."""

    __slots__ = ("_max_messages", "_next_batch")

    def __init__(self, next_batch: Callable[[int], collections.abc.Awaitable[list[Message]]], max_messages: int):
        self._next_batch = next_batch
        self._max_messages = max_messages

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> list[Message]:
        batch = await self._next_batch(self._max_messages)
        if not batch:
            raise StopAsyncIteration
        return batch


class _Reader:
    """What ``Consumer`` and ``ConsumerGroup`` share: ``async with`` (opening at once), and the
    last batch read, which ``async for`` hands out a message at a time and ``batches()`` in lists."""

    _closed_message = "closed"  # what reading a closed reader says
    closed: bool

    def __init__(self) -> None:
        self._buffer: list[Message] = []
        self._buffer_index = 0  # the next message of _buffer that __anext__ returns
        self.closed = False

    def _open(self) -> object:
        raise NotImplementedError

    def _release(self) -> None:
        """Let go of files, watches and partitions (called once, as the reader closes)."""
        raise NotImplementedError

    async def _next_batch(self, max_messages: int) -> list[Message]:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._open()
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException:
            if not self.closed:  # cancelled on the way in: __aexit__ will not run
                self.closed = True
                self._release()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Message:
        buffer = self._buffer
        index = self._buffer_index
        if index < len(buffer):
            if self.closed:
                raise ClosedError(self._closed_message)
            self._buffer_index = index + 1
            return buffer[index]
        batch = await self._next_batch(DEFAULT_BATCH_MESSAGES)
        if not batch:
            raise StopAsyncIteration
        self._buffer = batch
        self._buffer_index = 1
        return batch[0]

    def batches(self, max_messages: int = DEFAULT_BATCH_MESSAGES) -> AsyncIterator[list[Message]]:
        """Iterate lists of up to ``max_messages`` messages: the fast way to read."""
        return _Batches(self._next_batch, check_max_messages(max_messages))

    def _take_buffered(self, max_messages: int) -> list[Message] | None:
        """Up to ``max_messages`` messages left over from ``async for``'s last batch, or None."""
        buffer, index = self._buffer, self._buffer_index
        if index >= len(buffer):
            return None
        batch = buffer[index : index + max_messages]
        self._buffer_index = index + len(batch)
        return batch

    def _drop_buffered(self) -> None:
        self._buffer = []
        self._buffer_index = 0


class Consumer(_Reader):
    """Reads one partition in order, as an async iterator of ``Message``; follows the producer.

    ``start``: ``"oldest"``, ``"newest"`` (only messages pushed after opening), ``"active-oldest"``
    (the start of the active segment), an offset, or a ``datetime`` (the first message at or after
    it). ``end``: ``"wait"`` (follow forever), ``"close"`` (stop at the end of what was there when
    the consumer opened), or an offset (exclusive). ``on_data_loss``: when retention deleted
    messages not read yet, ``"skip"`` to the oldest offset (the range is logged and appended to
    ``skipped``) or ``"raise"`` ``OffsetOutOfRangeError``.

    Use it as ``async with Consumer(...) as consumer: async for msg in consumer``. The constructor
    does no I/O; ``aclose()`` releases everything even when cancelled; closing twice is harmless; a
    closed consumer raises ``ClosedError``. One task reads a consumer at a time.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        partition: int = 0,
        *,
        start: Start = "oldest",
        end: End = "wait",
        on_data_loss: OnDataLoss = "skip",
        poll_interval: float | None = None,
    ) -> None:
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise InvalidArgumentError(f"partition={partition!r}: partitions are numbered from 0")
        check_start(start)
        if isinstance(end, str):
            if end not in ("wait", "close"):
                raise InvalidArgumentError(f"end={end!r}: use 'wait', 'close' or an offset (exclusive)")
        elif isinstance(end, bool) or not isinstance(end, int) or end < 0:
            raise InvalidArgumentError(f"end={end!r}: use 'wait', 'close' or an offset (exclusive)")
        check_on_data_loss(on_data_loss)
        positive_seconds("poll_interval", poll_interval, optional=True)
        self.path = os.fspath(path)
        self.partition = partition
        self.start = start
        self.end = end
        self.on_data_loss = on_data_loss
        self.poll_interval = poll_interval
        self._follower: PartitionFollower | None = None
        self._notifier: Notifier | None = None
        self._waiter = wakeup.Waiter()
        self._skipped: list[tuple[int, int]] = []
        self._reading = False
        super().__init__()

    _closed_message = "this consumer was closed; open a new Consumer"

    # -- opening and closing ---------------------------------------------------------------------

    def _open(self) -> PartitionFollower:
        if self.closed:
            raise ClosedError(self._closed_message)
        follower = self._follower
        if follower is not None:
            return follower
        stream = StreamReader.open(self.path)
        reader = stream.partition(self.partition)
        position = reader.offset_of(self.start)
        end: int | None
        if self.end == "wait":
            end = None
        elif self.end == "close":
            end = max(position, reader.bounds()[1])
        else:
            end = int(self.end)
        notifier = self._notifier = get_notifier()
        follower = PartitionFollower(
            stream,
            self.partition,
            position=position,
            end=end,
            on_data_loss=self.on_data_loss,
            notifier=notifier,
            waiter=self._waiter,
            on_skip=lambda _partition, first, last_exclusive: self._skipped.append((first, last_exclusive)),
        )
        self._follower = follower
        return follower

    async def aclose(self) -> None:
        """Release files and watches; a task waiting in this consumer gets ``ClosedError``."""
        if not self.closed:
            self.closed = True
            self._release()
        await anyio.lowlevel.checkpoint()

    def _release(self) -> None:
        self._drop_buffered()
        if self._follower is not None:
            self._follower.close()
        self._waiter.wake()

    # -- state -----------------------------------------------------------------------------------

    @property
    def position(self) -> int | None:
        """The offset of the next message this consumer returns (None before it opens)."""
        if self._follower is None:
            return None
        return self._follower.position - (len(self._buffer) - self._buffer_index)

    @property
    def skipped(self) -> list[tuple[int, int]]:
        """Offset ranges ``(first, last_exclusive)`` that retention deleted before they were read."""
        return list(self._skipped)

    @property
    def uses_inotify(self) -> bool | None:
        """Whether inotify wakes this consumer (False: its producer is in this process and wakes it
        directly, or there is no inotify and it polls); None before it opens."""
        return None if self._follower is None else self._follower.uses_kernel

    # -- reading ---------------------------------------------------------------------------------

    async def _next_batch(self, max_messages: int) -> list[Message]:
        """The next messages (those buffered by ``__anext__`` first); ``[]`` once the end is reached."""
        follower = self._open()
        buffered = self._take_buffered(max_messages)
        if buffered is not None:
            return buffered
        if self._reading:
            raise anyio.BusyResourceError("reading from")
        self._reading = True
        try:
            await anyio.lowlevel.checkpoint()
            return await self._read_or_wait(follower, max_messages)
        finally:
            self._reading = False

    async def _read_or_wait(self, follower: PartitionFollower, max_messages: int) -> list[Message]:
        waiter = self._waiter
        notifier = self._notifier
        assert notifier is not None
        poll = self.poll_interval or notifier.poll_seconds
        while True:
            if self.closed:
                raise ClosedError("this consumer was closed while it was read; open a new Consumer")
            messages = follower.read(max_messages)
            if messages or follower.done:
                return messages
            # Caught up. Watch the segment being read, arm the waiter, then look once more: a
            # commit after the arm wakes it, a commit before it is found by this last look.
            base = follower.prepare_wait()
            waiter.arm()
            try:
                messages = follower.read(max_messages)
                if messages or follower.done:
                    return messages
                if follower.moved_since(base):
                    continue  # a new segment: watch its index before sleeping
                await notifier.wait(waiter, poll, kernel=follower.uses_kernel)
                timed_out = not waiter.fired
            finally:
                waiter.disarm()
            if timed_out:
                follower.check_producer()
