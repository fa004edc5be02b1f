"""What ``Consumer`` and ``ConsumerGroup`` share: ``async with``, ``async for`` over the last batch,
``batches()``, and the one loop that reads or waits for a wake-up (the arm, look again, wait, disarm
protocol that loses none).
"""

from __future__ import annotations

import collections.abc
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, Literal, Self

import anyio
import anyio.lowlevel

from .._errors import ClosedError, StreamNotFoundError
from .._sansio.values import KeyT, Message, ValueT
from .._storage.stream import StreamReader
from . import wakeup
from .arguments import check_max_messages
from .buffered import new_buffer
from .follower import process_notifier
from .metrics import telemetry

if TYPE_CHECKING:
    from .notify import Notifier

__all__ = ["DEFAULT_BATCH_MESSAGES", "_Reader"]

# What one read takes when the caller does not say: 256 messages of 100 bytes are decoded (CRC
# checked) in well under a millisecond, the longest the event loop is held by a read (measured: see
# benchmarks/RESULTS.md, section "Figures the code relies on", F3).
DEFAULT_BATCH_MESSAGES: Final = 256


class _Batches(Generic[KeyT, ValueT]):
    """``async for batch in source.batches(...)``: lists of messages, the same reading as ``async for msg``."""

    __slots__ = ("_max_messages", "_next_batch")

    def __init__(
        self, next_batch: Callable[[int], collections.abc.Awaitable[list[Message[KeyT, ValueT]]]], max_messages: int
    ):
        self._next_batch = next_batch
        self._max_messages = max_messages

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> list[Message[KeyT, ValueT]]:
        batch = await self._next_batch(self._max_messages)
        if not batch:
            raise StopAsyncIteration
        return batch


class _Reader(Generic[KeyT, ValueT]):
    """What ``Consumer`` and ``ConsumerGroup`` share: ``async with`` (opening at once), and the
    last batch read, which ``async for`` hands out a message at a time and ``batches()`` in lists."""

    _closed_message = "closed"  # what reading a closed reader says
    _not_open_message = "not open"  # what reading one before ``async with`` opened it says
    _closed_while_reading = "closed while it was read"
    # "new" until the first open succeeds, "open" while reading is possible, "closed" for good.
    _state: Literal["new", "open", "closed"]
    _waiter: wakeup.Waiter
    _notifier: Notifier | None  # taken at the first wait (or by the subclass as it opens)
    _reading: bool  # a task is in _next_batch (one reads at a time)
    path: str
    wait_for_stream: bool = False  # reading waits for a missing stream instead of raising
    # Whether ``_before_look`` and ``_after_wait`` may have work on every turn of the read-or-wait
    # loop (``_after_wait`` is called after every wait that timed out regardless). A reader whose
    # hooks have none goes from a wake-up to its read without two coroutine calls.
    _hooks_every_turn: bool = True

    def __init__(self) -> None:
        # The last batch read, which ``async for`` hands out a message at a time.
        self._messages = new_buffer(self._refill)
        self._state = "new"
        # Entered by ``async with`` before its stream existed (``wait_for_stream``): the first read opens it.
        self._awaiting_stream = False
        instruments = telemetry()
        if instruments is not None:  # decided once: without OpenTelemetry, reads are not wrapped
            group: str | None = getattr(self, "name", None)
            self._read_some = instruments.counting_reads(self._read_some, self.path, group)  # type: ignore[method-assign,assignment]

    @property
    def closed(self) -> bool:
        """True once ``aclose()`` (or leaving ``async with``) began; a closed reader stays closed."""
        return self._state == "closed"

    def _mark_closed(self) -> None:
        """The reader is closed for good: nothing more is handed out, buffered or not."""
        self._state = "closed"
        self._messages.close()

    def _open(self) -> object:
        raise NotImplementedError

    def _release(self) -> None:
        """Let go of files, watches and partitions (called once, as the reader closes)."""
        raise NotImplementedError

    def _refuse_unopened(self) -> None:
        """Raise ``ClosedError`` for a reader used while it is not open: closed, or never opened.

        A reader is opened by ``async with`` only, never by its first read: nothing would then close
        it, and a group's commits, stored as it closes, would be lost without a word.
        """
        raise ClosedError(self._closed_message if self.closed else self._not_open_message)

    # -- what each reader supplies to the one read-or-wait loop -----------------------------------

    def _read_some(self, max_messages: int) -> list[Message[KeyT, ValueT]]:
        """Up to ``max_messages`` messages if any are there now (never waits)."""
        raise NotImplementedError

    def _all_done(self) -> bool:
        """True once every end offset is reached: reading returns ``[]`` from then on."""
        raise NotImplementedError

    def _prepare_wait(self) -> object:
        """Watch what is being read; returns a mark for ``_moved_since``."""
        raise NotImplementedError

    def _moved_since(self, mark: object) -> bool:
        """True when there is something new to watch since ``_prepare_wait`` returned ``mark``
        (a new segment, new partitions): look again before sleeping."""
        raise NotImplementedError

    def _wait_seconds(self) -> float:
        """How long to sleep at most (the poll that backs inotify up, or sooner work)."""
        raise NotImplementedError

    def _wait_notifier(self) -> Notifier:
        """The notifier this reader waits with: the process's, taken the first time it is needed."""
        notifier = self._notifier
        if notifier is None:
            notifier = self._notifier = process_notifier()
        return notifier

    def _waits_on_kernel(self) -> bool:
        """Whether an inotify event may be what wakes this reader."""
        return True

    async def _before_reading(self) -> None:
        """Work due before a read (a checkpoint at least: reading is a step of its own)."""
        await anyio.lowlevel.checkpoint()

    async def _before_look(self) -> None:
        """Work due before each look at the partitions (none by default)."""

    async def _after_wait(self, timed_out: bool) -> None:
        """Work due after each sleep (``timed_out``: no wake-up came)."""

    # -- the read-or-wait loop -----------------------------------------------------------------

    async def _next_batch(self, max_messages: int) -> list[Message[KeyT, ValueT]]:
        """The next messages (those buffered by ``__anext__`` first); ``[]`` once the end is reached."""
        if self._state != "open":
            if self.closed or not self._awaiting_stream:
                self._refuse_unopened()
            await self._open_when_there()
        buffered = self._take_buffered(max_messages)
        if buffered is not None:
            return buffered
        if self._reading:
            raise anyio.BusyResourceError("reading from")
        self._reading = True
        try:
            await self._before_reading()
            return await self._read_or_wait(max_messages)
        finally:
            self._reading = False

    async def _read_or_wait(self, max_messages: int) -> list[Message[KeyT, ValueT]]:
        """Read; when caught up, arm the waiter, look again, sleep, disarm, and go round.

        The protocol that loses no wake-up: a commit after the arm wakes the waiter (also if it lands
        before the sleep starts), and a commit before the arm is found by the second look.
        """
        waiter = self._waiter
        while True:
            if self._state == "closed":
                raise ClosedError(self._closed_while_reading)
            if self._hooks_every_turn:
                await self._before_look()
            messages = self._read_some(max_messages)
            if messages or self._all_done():
                return messages
            notifier = self._wait_notifier()  # first needed here: a reader that never waits never loads it
            mark = self._prepare_wait()
            notifier.read_unread()  # events a wake-up left queued: none is for this waiter any more
            waiter.arm()
            try:
                messages = self._read_some(max_messages)
                if messages or self._all_done():
                    return messages
                if self._moved_since(mark):
                    continue  # something new to watch before sleeping
                await notifier.wait(waiter, self._wait_seconds(), kernel=self._waits_on_kernel())
                timed_out = not waiter.fired
            finally:
                waiter.disarm()
            if timed_out or self._hooks_every_turn:
                await self._after_wait(timed_out)

    async def aclose(self) -> None:
        raise NotImplementedError

    async def _open_when_there(self) -> None:
        """Open; with ``wait_for_stream``, first wait until a producer created the stream."""
        if not self.wait_for_stream:
            self._open()
            return
        if self._reading:
            raise anyio.BusyResourceError("reading from")
        self._reading = True  # one task waits, as one reads
        try:
            while True:
                try:
                    self._open()
                    return
                except StreamNotFoundError:
                    if self.closed:
                        raise
                from .stream_wait import wait_for_stream  # imports the notifier: not needed otherwise

                await wait_for_stream(
                    self.path,
                    notifier=self._wait_notifier(),
                    waiter=self._waiter,
                    exists=self._stream_exists,
                    closed=lambda: self.closed,
                    closed_message=self._closed_while_reading,
                )
        finally:
            self._reading = False

    def _stream_exists(self) -> bool:
        try:
            StreamReader.open(self.path)
        except StreamNotFoundError:
            return False
        return True

    async def __aenter__(self) -> Self:
        try:
            self._open()
        except StreamNotFoundError:
            if not self.wait_for_stream:
                raise
            # Not there yet: the first read waits for it (``_open_when_there``).
            self._awaiting_stream = True
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException:
            if not self.closed:  # cancelled on the way in: __aexit__ will not run
                self._mark_closed()
                self._release()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[Message[KeyT, ValueT]]:
        # The buffer itself: ``async for`` then calls its __anext__, which hands out buffered
        # messages without a coroutine each (in C with the compiled core).
        return self._messages

    async def __anext__(self) -> Message[KeyT, ValueT]:
        # A coroutine, so that a call can become a task (``asyncio.create_task(anext(consumer))``,
        # ``tg.start_soon(consumer.__anext__)``) whichever core runs: the compiled buffer's
        # __anext__ gives a buffered message as an awaitable that is not one. ``async for`` does
        # not come here (``__aiter__`` gives it the buffer itself).
        return await self._messages.__anext__()

    async def _refill(self) -> Message[KeyT, ValueT]:
        """``async for``'s step when nothing is buffered: read (or wait for) the next batch."""
        batch = await self._next_batch(DEFAULT_BATCH_MESSAGES)
        if not batch:
            raise StopAsyncIteration
        self._messages.set(batch, 1)
        return batch[0]

    def batches(self, max_messages: int = DEFAULT_BATCH_MESSAGES) -> AsyncIterator[list[Message[KeyT, ValueT]]]:
        """Iterate lists of up to ``max_messages`` messages: the fast way to read."""
        return _Batches(self._next_batch, check_max_messages(max_messages))

    def _take_buffered(self, max_messages: int) -> list[Message[KeyT, ValueT]] | None:
        """Up to ``max_messages`` messages left over from ``async for``'s last batch, or None."""
        return self._messages.take(max_messages)

    def _drop_buffered(self) -> None:
        self._messages.clear()
