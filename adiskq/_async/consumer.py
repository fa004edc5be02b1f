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

import os
from collections.abc import Iterable
from typing import Literal

import anyio
import anyio.lowlevel

from .._errors import ClosedError, InvalidArgumentError
from .._sansio.tags import TagFilter
from .._sansio.values import Message
from .._storage.stream import StreamReader
from . import wakeup
from .arguments import Start, check_on_data_loss, check_start, positive_seconds
from .follower import OnDataLoss, PartitionFollower
from .notify import Notifier, get_notifier
from .reader import _Reader

__all__ = ["Consumer", "End", "OnDataLoss", "Start"]

End = Literal["wait", "close"] | int


class Consumer(_Reader):
    """Reads one partition in order, as an async iterator of ``Message``; follows the producer.

    ``start``: ``"oldest"``, ``"newest"`` (only messages pushed after opening), ``"active-oldest"``
    (the start of the active segment), an offset, or a ``datetime`` (the first message at or after
    it). ``end``: ``"wait"`` (follow forever), ``"close"`` (stop at the end of what was there when
    the consumer opened), or an offset (exclusive). ``on_data_loss``: when retention deleted
    messages not read yet, ``"skip"`` to the oldest offset (the range is logged and appended to
    ``skipped``) or ``"raise"`` ``OffsetOutOfRangeError``. ``tags``: deliver only messages whose
    tag is one of these (RocketMQ's ``TagA || TagB``; None, the default: every message). Such a
    consumer reads the tag hashes kept beside the index and only the records that may match, and
    confirms each one's tag from its record.

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
        tags: Iterable[str] | None = None,
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
        self._tag_filter = TagFilter.of(tags)
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
    _not_open_message = (
        "the Consumer is not open: read it inside `async with adiskq.Consumer(path) as consumer:`, "
        "which opens it and releases its files when the block ends"
    )
    _closed_while_reading = "this consumer was closed while it was read; open a new Consumer"

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
            tag_filter=self._tag_filter,
        )
        self._follower = follower
        self._state = "open"
        return follower

    async def aclose(self) -> None:
        """Release files and watches; a task waiting in this consumer gets ``ClosedError``."""
        if not self.closed:
            self._mark_closed()
            self._release()
        await anyio.lowlevel.checkpoint()

    def _release(self) -> None:
        self._drop_buffered()
        if self._follower is not None:
            self._follower.close()
        self._waiter.wake()

    # -- state -----------------------------------------------------------------------------------

    @property
    def tags(self) -> frozenset[str] | None:
        """The tags this consumer delivers (None: every message)."""
        return None if self._tag_filter is None else frozenset(t for t in self._tag_filter.tags if t is not None)

    @property
    def position(self) -> int | None:
        """The offset of the next message this consumer returns (None before it opens); with
        ``tags``, where it reads on from once the messages it has read ahead are taken."""
        if self._follower is None:
            return None
        if self._tag_filter is not None:
            return self._follower.position
        return self._follower.position - self._messages.remaining

    @property
    def skipped(self) -> list[tuple[int, int]]:
        """Offset ranges ``(first, last_exclusive)`` that retention deleted before they were read."""
        return list(self._skipped)

    @property
    def uses_inotify(self) -> bool | None:
        """Whether inotify wakes this consumer (False: its producer is in this process and wakes it
        directly, or there is no inotify and it polls); None before it opens."""
        return None if self._follower is None else self._follower.uses_inotify

    # -- reading ---------------------------------------------------------------------------------

    def _read_some(self, max_messages: int) -> list[Message]:
        assert self._follower is not None
        return self._follower.read(max_messages)

    def _all_done(self) -> bool:
        assert self._follower is not None
        return self._follower.done

    def _prepare_wait(self) -> object:
        assert self._follower is not None
        return self._follower.prepare_wait()

    def _moved_since(self, mark: object) -> bool:
        assert self._follower is not None
        return self._follower.moved_since(mark if isinstance(mark, int) else None)

    def _wait_seconds(self) -> float:
        assert self._notifier is not None
        return self.poll_interval or self._notifier.poll_seconds

    def _waits_on_kernel(self) -> bool:
        assert self._follower is not None
        return self._follower.uses_inotify

    async def _before_look(self) -> None:
        if self._follower is not None and self._follower.more_to_scan:
            await anyio.lowlevel.checkpoint()  # a long stretch without a wanted tag: let others run

    async def _after_wait(self, timed_out: bool) -> None:
        if timed_out and self._follower is not None:
            self._follower.choose_wakeups()  # a producer may have come or gone meanwhile
