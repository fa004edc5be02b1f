"""``Consumer``: a stream's partitions (or one of them) as an async iterator that follows the producer.

Reads are two ``pread`` calls (index entries, then the data they cover) served from the page
cache, then decoding with a CRC check per record (measured: see benchmarks/RESULTS.md, section
"Figures the code relies on", F3); they run on the event loop
thread, because a hop to a worker thread costs more than the read (and decoding holds the GIL
anyway). A read is capped in messages and bytes, so it holds the loop for well under a millisecond
with the default batch (benchmarks/RESULTS.md has the figures). When caught up, the consumer waits for a wake-up:
from a producer in its own process (``wakeup.notify``), from inotify, or from a slow poll; all of
that is set up at the first wait, so opening a consumer costs a look at the settings and at each
partition's segments, and a consumer that reads to its end without waiting never touches inotify.

Cancellation: a read either returns messages or consumes nothing — the wait comes before the read,
and nothing awaits between the read and handing its messages over — so a cancelled ``__anext__``
loses no message.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio
import anyio.lowlevel

from .._errors import ClosedError, InvalidArgumentError
from .._extras import needs_extra
from .._sansio.capabilities import is_kafka_url, refuse
from .._sansio.decoding import MessageDecoder
from .._sansio.tags import TagFilter
from .._sansio.values import KeyT, Message, ValueT
from .._storage.stream import StreamReader
from . import wakeup
from .arguments import Start, check_on_data_loss, check_start, positive_seconds
from .follower import OnDataLoss, PartitionFollower, producer_is_in_this_process
from .reader import _Reader
from .settings_watch import SettingsWatch

if TYPE_CHECKING:
    from .notify import Notifier

__all__ = ["Consumer", "End", "OnDataLoss", "Start"]

End = Literal["wait", "close"] | int


class Consumer(_Reader[KeyT, ValueT]):
    """Reads a stream's partitions (every one, or ``partition=N`` alone) as an async iterator of
    ``Message``; follows the producer.

    By default it reads every partition, new ones included, merged as their messages arrive: each
    partition's messages come in offset order, and a busy partition cannot hold the others back
    (each read takes a batch from the next partition that has messages). ``partition=N`` reads
    that partition alone.

    ``start``: ``"oldest"``, ``"newest"`` (only messages pushed after opening), ``"active-oldest"``
    (the start of the active segment), an offset, or a ``datetime`` (the first message at or after
    it), in each partition read. ``end``: ``"wait"`` (follow forever), ``"close"`` (stop at the end
    of what was there when the consumer opened), or an offset (exclusive), in each partition read.
    Partitions a producer adds later are read from their first message when ``end="wait"``.
    ``on_data_loss``: when retention deleted messages not read yet, ``"skip"`` to the oldest offset
    (the range is logged and appended to ``skipped``) or ``"raise"`` ``OffsetOutOfRangeError``.
    ``tags``: deliver only messages whose tag is one of these (RocketMQ's ``TagA || TagB``; None,
    the default: every message). Such a consumer reads the tag hashes kept beside the index and
    only the records that may match, and confirms each one's tag from its record.

    ``value_deserializer`` and ``key_deserializer`` turn the stored bytes into what ``message.value``
    and ``message.key`` hold (``adiskq.serializers`` has ready-made ones); one that raises stops the
    reading at that message with ``DeserializationError`` (nothing is skipped). ``wait_for_stream``:
    if no stream exists at ``path`` yet, reading waits until a producer creates it (woken by
    inotify), instead of raising ``StreamNotFoundError``.

    Use it as ``async with Consumer(...) as consumer: async for msg in consumer``. The constructor
    does no I/O; ``aclose()`` releases everything even when cancelled; closing twice is harmless; a
    closed consumer raises ``ClosedError``. One task reads a consumer at a time.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # A kafka:// URL selects the Kafka backend, here and only here: a read never asks.
        path = args[0] if args else kwargs.get("path")
        if cls is Consumer and is_kafka_url(path):
            with needs_extra("kafka-cluster", "a Consumer of a kafka:// URL"):
                from ..kafka._cluster_consumer import KafkaConsumer
            return super().__new__(KafkaConsumer)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str],
        partition: int | None = None,
        *,
        start: Start = "oldest",
        end: End = "wait",
        on_data_loss: OnDataLoss = "skip",
        poll_interval: float | None = None,
        tags: Iterable[str] | None = None,
        value_deserializer: Callable[[bytes], ValueT] | None = None,
        key_deserializer: Callable[[bytes], KeyT] | None = None,
        wait_for_stream: bool = False,
        kafka: Mapping[str, object] | str | os.PathLike[str] | None = None,
    ) -> None:
        if kafka is not None:
            raise refuse("kafka= (client configuration)")
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int) or partition < 0):
            raise InvalidArgumentError(
                f"partition={partition!r}: partitions are numbered from 0 (None, the default: every partition)"
            )
        check_start(start)
        if isinstance(end, str):
            if end not in ("wait", "close"):
                raise InvalidArgumentError(f"end={end!r}: use 'wait', 'close' or an offset (exclusive)")
        elif isinstance(end, bool) or not isinstance(end, int) or end < 0:
            raise InvalidArgumentError(f"end={end!r}: use 'wait', 'close' or an offset (exclusive)")
        check_on_data_loss(on_data_loss)
        positive_seconds("poll_interval", poll_interval, optional=True)
        self._tag_filter = TagFilter.of(tags)
        # Its hooks have work on every turn only with tags (a long stretch without one yields);
        # else ``_after_wait`` acts after a wait that timed out alone.
        self._hooks_every_turn = self._tag_filter is not None
        self._decoder = MessageDecoder.of(key_deserializer, value_deserializer)
        self.path = os.fspath(path)
        self.partition = partition
        self.start = start
        self.end = end
        self.on_data_loss = on_data_loss
        self.poll_interval = poll_interval
        self.wait_for_stream = bool(wait_for_stream)
        self._stream: StreamReader | None = None
        # The partitions read, in the order they take turns; ``_single`` while there is one: its
        # reads and waits skip the turn-taking (a partition added later ends that).
        self._order: list[PartitionFollower] = []
        self._single: PartitionFollower | None = None
        self._turn = 0
        self._last: PartitionFollower | None = None  # where the buffered messages came from
        self._settings: SettingsWatch | None = None  # every partition, end="wait": partitions added
        self._notifier: Notifier | None = None
        self._waiter = wakeup.Waiter()
        self._skipped: list[tuple[int, int, int]] = []
        self._reading = False
        super().__init__()

    _closed_message = "this consumer was closed; open a new Consumer"
    _not_open_message = (
        "the Consumer is not open: read it inside `async with adiskq.Consumer(path) as consumer:`, "
        "which opens it and releases its files when the block ends"
    )
    _closed_while_reading = "this consumer was closed while it was read; open a new Consumer"

    # -- opening and closing ---------------------------------------------------------------------

    def _open(self) -> None:
        if self.closed:
            raise ClosedError(self._closed_message)
        if self._state == "open":
            return
        stream = StreamReader.open(self.path)
        self._stream = stream
        try:
            if self.partition is not None:
                stream.partition(self.partition)  # InvalidArgumentError for one the stream lacks
                self._follow(stream, self.partition, self.start)
            else:
                if self.end == "wait":
                    # Watched from the first wait on (``_prepare_wait``).
                    self._settings = SettingsWatch(stream, None, self._waiter, on_events=True)
                for partition in range(stream.partition_count):
                    self._follow(stream, partition, self.start)
        except BaseException:
            self._release()
            # Forgotten, so that the next read opens afresh (and fails again, or reads).
            self._order.clear()
            self._single = self._settings = None
            raise
        self._state = "open"

    def _follow(self, stream: StreamReader, partition: int, start: Start) -> None:
        reader = stream.partition(partition)
        oldest, next_offset = reader.bounds()  # one look at the segments serves each use below
        if start == "oldest":
            position = oldest
        elif start == "newest":
            position = next_offset
        else:
            position = reader.offset_of(start)
        end: int | None
        if self.end == "wait":
            end = None
        elif self.end == "close":
            end = max(position, next_offset)
        else:
            end = int(self.end)
        follower = PartitionFollower(
            stream,
            partition,
            position=position,
            end=end,
            on_data_loss=self.on_data_loss,
            notifier=self._notifier,  # None before the first wait: the follower takes it then
            waiter=self._waiter,
            on_skip=self._on_skip,
            tag_filter=self._tag_filter,
            decoder=self._decoder,
            next_offset=next_offset,
        )
        self._order.append(follower)
        self._single = follower if len(self._order) == 1 else None

    def _discover(self, *, force: bool = False) -> bool:
        """Follow partitions a producer added (``settings.json`` was replaced); True if any.

        The file is looked at only after its watch fired, or with ``force`` (after a poll's
        timeout: inotify may be missing, or its queue overflowed), so a wait costs no ``stat``.
        """
        settings = self._settings
        if settings is None or not settings.changed(force=force):
            return False
        count = settings.stream.partition_count
        if count <= len(self._order):
            return False
        for partition in range(len(self._order), count):
            self._follow(settings.stream, partition, "oldest")  # all of it is new
        return True

    async def aclose(self) -> None:
        """Release files and watches; a task waiting in this consumer gets ``ClosedError``."""
        if not self.closed:
            self._mark_closed()
            self._release()
        await anyio.lowlevel.checkpoint()

    def _release(self) -> None:
        self._drop_buffered()
        for follower in self._order:
            follower.close()
        if self._settings is not None:
            self._settings.close()
        self._waiter.wake()

    # -- state -----------------------------------------------------------------------------------

    @property
    def tags(self) -> frozenset[str] | None:
        """The tags this consumer delivers (None: every message)."""
        return None if self._tag_filter is None else frozenset(t for t in self._tag_filter.tags if t is not None)

    @property
    def positions(self) -> dict[int, int]:
        """Partition -> the offset of the next message this consumer returns from it (empty before
        it opens); with ``tags``, where it reads on from once the messages it has read ahead are taken."""
        buffered = 0 if self._tag_filter is not None else self._messages.remaining
        return {
            follower.partition: follower.position - (buffered if follower is self._last else 0)
            for follower in self._order
        }

    @property
    def position(self) -> int | None:
        """The offset of the next message this consumer returns, when it reads one partition (None
        before it opens); with ``tags``, where it reads on from once the messages it has read ahead
        are taken. A consumer of several partitions has ``positions`` instead."""
        if len(self._order) > 1:
            raise InvalidArgumentError(
                "this consumer reads several partitions: its `positions` maps each to its next offset "
                "(or open it with partition=N to read one)"
            )
        positions = self.positions
        return next(iter(positions.values())) if positions else None

    @property
    def assignment(self) -> tuple[int, ...]:
        """The partitions this consumer reads (``()`` before it opens)."""
        return tuple(follower.partition for follower in self._order)

    @property
    def skipped(self) -> list[tuple[int, int, int]]:
        """``(partition, first, last_exclusive)`` ranges retention deleted before they were read."""
        return list(self._skipped)

    def _on_skip(self, partition: int, first: int, last_exclusive: int) -> None:
        self._skipped.append((partition, first, last_exclusive))

    @property
    def uses_inotify(self) -> bool | None:
        """Whether inotify wakes this consumer (False: its producer is in this process and wakes it
        directly, or there is no inotify and it polls); None before it opens."""
        if not self._order:
            return None
        self._wait_notifier()
        return any(follower.uses_inotify for follower in self._order)

    # -- reading ---------------------------------------------------------------------------------

    def _read_some(self, max_messages: int) -> list[Message[KeyT, ValueT]]:
        single = self._single
        if single is not None:
            self._last = single
            return single.read(max_messages)  # type: ignore[return-value]  # decoded by the follower
        order = self._order
        count = len(order)
        for step in range(count):
            index = (self._turn + step) % count
            follower = order[index]
            messages = follower.read(max_messages)
            if messages:
                self._turn = (index + 1) % count
                self._last = follower
                return messages  # type: ignore[return-value]
        return []

    def _all_done(self) -> bool:
        return self._settings is None and all(follower.done for follower in self._order)

    def _prepare_wait(self) -> object:
        if self._settings is not None:
            self._settings.watch_with(self._wait_notifier())
        single = self._single
        if single is not None:
            return single.prepare_wait()
        return [follower.prepare_wait() for follower in self._order]

    def _moved_since(self, mark: object) -> bool:
        if self._discover():
            return True
        single = self._single
        if single is not None:
            return single.moved_since(mark if isinstance(mark, int) else None)
        bases: list[int | None] = mark  # type: ignore[assignment]
        return any(f.moved_since(base) for f, base in zip(self._order, bases, strict=False))

    def _wait_seconds(self) -> float:
        return self.poll_interval or self._wait_notifier().poll_seconds

    def _waits_on_kernel(self) -> bool:
        # Beside a producer of this process, which wakes it directly, the consumer does not read the
        # inotify descriptor (reading it costs a wake-up on Trio): a partition that producer adds is
        # seen at the next look at the settings, after a wake-up or within the poll.
        return any(follower.uses_inotify for follower in self._order)

    async def _before_look(self) -> None:
        if self._tag_filter is not None and any(follower.more_to_scan for follower in self._order):
            await anyio.lowlevel.checkpoint()  # a long stretch without a wanted tag: let others run

    async def _after_wait(self, timed_out: bool) -> None:
        if timed_out and self._stream is not None:
            local = producer_is_in_this_process(self._stream.path)  # a producer may have come or gone
            for follower in self._order:
                follower.choose_wakeups(local)
            self._discover(force=True)
