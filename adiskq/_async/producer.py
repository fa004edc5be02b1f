"""``adiskq.Producer``: a writer of a stream (the only one, or with ``shared=True`` one of several),
with batching lanes, flush policies and vacuum.

Pushes are written by the pushing tasks themselves through per-partition lanes (``lane.py``). The
periodic fsync (``flush="async"``) and the periodic vacuum are blocking file work, so each runs in a
small background thread of its own rather than in a task group: a producer then never holds a task
group open around its caller's code (which would let a background failure cancel that code, and
would tie ``aclose()`` to the scope that opened it). fsync and other slow file operations never run
on the event loop; small page-cache writes do, where they cost less than a hand-off.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Final, Generic, Literal, Self, TypeAlias

import anyio
import anyio.lowlevel
import anyio.to_thread
from typing_extensions import TypeVar

from .._errors import (
    ClosedError,
    InvalidArgumentError,
    LockTimeoutError,
    MessageTooLargeError,
    StreamLockedError,
    UnsupportedFeatureError,
)
from .._extras import needs_extra
from .._sansio import keyindex
from .._sansio.capabilities import is_kafka_url, refuse
from .._sansio.codec import KEYLESS
from .._sansio.core import (
    raw_encode_push,
    receipt,
)
from .._sansio.entries import RecordRun
from .._sansio.producer_options import check_producer_options
from .._sansio.tags import ENTRIES as _TAG_ENTRIES
from .._sansio.tags import NO_TAG_ENTRY, tag_entry
from .._sansio.values import Headers, Receipt, Record, RecoveryReport, Retention, VacuumReport
from .._storage.disk_guard import DEFAULT_REFUSE_WRITES_ABOVE, DiskGuard, check_refuse_level
from .._storage.files import DEFAULT_FILE_MODE
from .._storage.flocks import turn_lock
from .._storage.settings import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_SEGMENT_SIZE_BYTES,
    StreamSettings,
    require_kafka_headers,
    require_tags,
)
from .._storage.stream import StreamWriter
from . import shares
from .arguments import positive_seconds
from .batch_encoding import BatchEncoder, Timestamp
from .batch_encoding import timestamp_ns as _timestamp_ns
from .compressing import ValueCompression, check_dictionary
from .event_loop import running_loop
from .lane import Lane, LockNotHeld, explain_disk_error
from .metrics import ObservedProducer, telemetry
from .periodic import Periodic
from .turns import Turns
from .wakeup import anyone_waiting, notify, waiters_of

__all__ = ["FlushMode", "Producer"]

logger: Final = logging.getLogger("adiskq.producer")
# A single push looks its tag's .tagindex entry up here first (no tag, and the tags seen lately).
_cached_tag_entry: Final = _TAG_ENTRIES.get

FlushMode: TypeAlias = Literal["async", "sync"]
Key: TypeAlias = str | bytes | None
# What push takes as a message's value and key: bytes (and str keys) as stored, or what the
# producer's value_serializer and key_serializer take.
PushValueT = TypeVar("PushValueT", default=bytes)
PushKeyT = TypeVar("PushKeyT", default=str | bytes)

# An inline push yields to the event loop once in this many pushes, so a tight push loop cannot
# starve other tasks (consumers in this process, the flusher) while staying cheap (measured: see
# benchmarks/RESULTS.md, section "Figures the code relies on", F19).
_YIELD_EVERY: Final = 32
_LOCK_RETRY_SECONDS: Final = 0.05
_time_ns: Final = time.time_ns  # a push's default timestamp: a global's lookup less than time.time_ns
# The key index's hash, which the compiled core computes itself (zlib's CRC-32); where a test has
# replaced keyindex.key_hash, the producer calls the replacement instead.
_CRC32: Final = zlib.crc32


def _never_cancelled() -> bool:
    """The cancellation check of a producer that is not open: its push raises ``ClosedError``."""
    return False


def _observed(producer: Producer[Any, Any]) -> ObservedProducer:
    """What telemetry may read of ``producer`` (weakly: a producer dropped unclosed is collected)."""
    found = weakref.ref(producer)

    def is_open() -> bool:
        alive = found()
        return alive is not None and alive._state == "open"

    def refuse_level() -> float | None:
        alive = found()
        return None if alive is None else alive.refuse_writes_above

    return ObservedProducer(producer.path, is_open, refuse_level)


class Producer(Generic[PushKeyT, PushValueT]):
    """A writer of a stream: ``async with adiskq.Producer(path) as producer: await producer.push(b"..")``.

    Opening creates the stream if it is missing (or the folder is empty), takes the ``owner`` lock
    (``StreamLockedError`` at once while another producer holds it, or after ``lock_timeout``
    seconds), and recovers every partition's active segment.

    ``shared=True`` lets any number of producers, in this process and others, write the stream at
    once (a service under ``uvicorn --workers 4``): each appends to a partition under that
    partition's ``flock``, so offsets stay contiguous, each producer's messages keep their order per
    key, and order across producers is the order they took the lock in. Shared and exclusive
    producers exclude each other (``StreamLockedError`` names the holders). A shared producer waits
    for the locks shared producers take in turns (its turn, a partition's, opening's, vacuum's) at
    most ``lock_timeout`` seconds (30 when it is 0, the default): one that is stopped while it holds
    one (SIGSTOP, Ctrl-Z, a debugger, a frozen container) makes the others fail with
    ``LockTimeoutError``, naming it (pid, host, stopped), never hang. A cancel scope ends such a wait
    at once (a push cancelled while it waits is not written), and closing waits on no other process
    for more than a second. Settings given here are stored in the
    stream; ``partitions`` may grow but never shrink. ``key_index`` (on for a new stream) keeps the
    per-segment key index ``adiskq.find`` looks keys up in; ``False`` saves its small cost, and
    ``find`` then searches the data.

    ``refuse_writes_above`` (RocketMQ's disk warning level; 0.95 by default) is a fraction of the
    stream's file system, counted as ``df`` counts it: while the file system is fuller, pushes fail at
    once with ``DiskUsageRefusedError`` (an ``OSError`` with ``ENOSPC``) and write nothing, a little
    before the disk is really full, so one stream cannot starve the machine. Writing resumes by
    itself once usage is below the level (after a vacuum, for example). None or 1.0 turns it off.

    ``flush="async"`` (the default, RocketMQ's ASYNC_FLUSH): ``push`` returns once the record is
    handed to the OS, which keeps it if the process crashes; a background flusher fsyncs every
    ``flush_interval`` seconds and on close. ``flush="sync"`` (SYNC_FLUSH): ``push`` returns once the
    record is on stable storage; concurrent pushes share one fsync.

    ``value_serializer`` and ``key_serializer`` (named as aiokafka names them) turn what ``push`` is
    given into the bytes stored: ``push(order, key=customer)`` stores ``value_serializer(order)``
    under ``key_serializer(customer)`` (``adiskq.serializers`` has ready-made ones; a serializer that
    raises fails the push before anything is written). Without them, values are ``bytes`` and keys
    ``str`` or ``bytes``.

    ``compression="zstd"`` creates the stream compressed (format ``adiskq/5`` with compression; refused for a stream
    made without it): each value is stored as a zstd frame made with the stream's dictionary, trained
    from the first 2,000 values pushed (stored as they are) or given as ``zstd_dictionary`` (bytes of
    a zstd dictionary; a new one becomes the stream's next version). Every producer of a compressed
    stream compresses, and every reader decompresses (``adiskq/_async/compressing.py``).

    Leaving ``async with`` (or ``aclose()``) writes every pending push, fsyncs, releases the lock and
    stops the producer's flusher and vacuum threads, also when the surrounding scope is cancelled. A
    closed producer cannot be reopened; using one raises ``ClosedError``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # A kafka:// URL selects the Kafka backend, here and only here: a push never asks.
        path = args[0] if args else kwargs.get("path")
        if cls is Producer and is_kafka_url(path):
            with needs_extra("kafka-cluster", "a Producer of a kafka:// URL"):
                from ..kafka._cluster_producer import KafkaProducer
            return super().__new__(KafkaProducer)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        partitions: int | None = None,
        segment_size_bytes: int | None = None,
        retention: Retention | None = None,
        flush: FlushMode = "async",
        flush_interval: float = 0.5,
        vacuum_interval: float = 5.0,
        max_message_bytes: int | None = None,
        key_index: bool | None = None,
        mode: int = DEFAULT_FILE_MODE,
        lock_timeout: float = 0.0,
        refuse_writes_above: float | None = DEFAULT_REFUSE_WRITES_ABOVE,
        shared: bool = False,
        value_serializer: Callable[[PushValueT], bytes] | None = None,
        key_serializer: Callable[[PushKeyT], bytes | str] | None = None,
        compression: Literal["zstd"] | None = None,
        zstd_dictionary: bytes | None = None,
        partitioner: Literal["fnv1", "murmur2"] | None = None,
        kafka: Mapping[str, object] | str | os.PathLike[str] | None = None,
    ) -> None:
        if kafka is not None:
            raise refuse("kafka= (client configuration)")
        if partitioner not in (None, "fnv1"):
            raise UnsupportedFeatureError(
                f"partitioner={partitioner!r}",
                "local",
                'a stream places keys by FNV-1 (partitioner="fnv1", the default); murmur2 is for kafka:// URLs',
            )
        check_producer_options(
            flush=flush,
            shared=shared,
            compression=compression,
            retention=retention,
            value_serializer=value_serializer,
            key_serializer=key_serializer,
        )
        if zstd_dictionary is not None and compression is None:
            raise InvalidArgumentError('zstd_dictionary= is the dictionary of compression="zstd": give both')
        self._zstd_dictionary = check_dictionary(zstd_dictionary)
        positive_seconds("flush_interval", flush_interval)
        positive_seconds("vacuum_interval", vacuum_interval)
        if isinstance(lock_timeout, bool) or not isinstance(lock_timeout, int | float) or lock_timeout < 0:
            raise InvalidArgumentError(f"lock_timeout={lock_timeout!r}: give 0 (fail at once) or more seconds")
        self.refuse_writes_above = check_refuse_level(refuse_writes_above)
        # Settings are checked now, before any I/O, so a mistake fails at construction.
        StreamSettings(
            partition_count=1 if partitions is None else partitions,
            segment_size_bytes=DEFAULT_SEGMENT_SIZE_BYTES if segment_size_bytes is None else segment_size_bytes,
            max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES if max_message_bytes is None else max_message_bytes,
        )
        self.path = os.fspath(path)
        self.flush_mode: FlushMode = flush
        self.flush_interval = float(flush_interval)
        self.vacuum_interval = float(vacuum_interval)
        # What opening the stream takes, bound now (typed) and called in a worker thread at open.
        self._open_writer = functools.partial(
            StreamWriter.open,
            self.path,
            partitions=partitions,
            segment_size_bytes=segment_size_bytes,
            retention=retention,
            max_message_bytes=max_message_bytes,
            key_index=key_index,
            mode=mode,
            shared=shared,
            shared_lock_timeout=float(lock_timeout),
            compression=compression,
        )
        self.shared = shared
        self._lock_timeout = float(lock_timeout)
        self._state: Literal["new", "open", "closing", "closed"] = "new"
        self._stream: StreamWriter | None = None
        self._disk_guard: DiskGuard | None = None
        self._lanes: list[Lane] = []
        self._partition_count = 0
        self._max_message_bytes = 0
        self._holds_tags = True  # False on a stream whose format has no tags (adiskq/1)
        self._holds_kafka_headers = True  # False before format 5: no null header values, no repeated names
        # The attributes of a record pushed without a key: codec.KEYLESS, 0 before format 5.
        self._keyless = KEYLESS
        self._compression: ValueCompression | None = None  # on a stream created with compression="zstd"
        # key -> (its bytes, its partition, its key index hash), for keys pushed recently.
        self._placement: dict[str | bytes, tuple[bytes, int, int]] = {}
        self._encoder = self._new_encoder()  # made again when the stream is open (its settings)
        # Held (in worker threads only) by whatever changes a partition's segments or syncs them:
        # a roll, a vacuum, the flusher. It keeps an fsync from meeting a descriptor a roll closed.
        self._structure_lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(4)
        self._background: list[Periodic] = []
        self._inline_pushes = 0
        self._sync_error: OSError | None = None
        # push_many calls that let other tasks run between the writes of their partitions' shares;
        # closing waits for them, so no share is written to a closed file.
        self._splitting = 0
        self._splits_done: anyio.Event | None = None
        # Whether the pushing task's cancel scope is cancelled; made for the event loop on opening.
        self._cancel_pending: Callable[[], bool] = _never_cancelled
        self._loop_turn: Callable[[], Awaitable[None]] = anyio.lowlevel.cancel_shielded_checkpoint
        self._shielded_turn: Callable[[], Awaitable[None]] = anyio.lowlevel.cancel_shielded_checkpoint
        self._turns: Turns | None = None
        self._observed: ObservedProducer | None = None  # what telemetry reads of it, when telemetry is on
        self.value_serializer = value_serializer
        self.key_serializer = key_serializer
        self._wrap()

    def _wrap(self) -> None:
        """The one place ``push``, ``push_many`` and ``flush`` are wrapped, innermost first:

        1. the class's own methods: what a producer without serializers or telemetry runs, with no
           wrapper in front (so neither costs anything while it is off);
        2. the serializers (``value_serializer``, ``key_serializer``): what the user gave, made
           into the bytes stored, before anything is written;
        3. telemetry (OpenTelemetry set up when the producer is made; decided once, here): each call
           timed, counted and traced whole, serializing included, through ``metrics.ObservedProducer``.

        Each wrapper is an instance attribute, found before the class's method."""
        if self.value_serializer is not None or self.key_serializer is not None:
            self.push = self._push_serialized  # type: ignore[method-assign]
            self.push_many = self._push_many_serialized  # type: ignore[method-assign]
        instruments = telemetry()
        if instruments is not None:
            self._observed = _observed(self)
            push, push_many, flush = instruments.wrap_producer(self._observed, self.push, self.push_many, self.flush)
            self.push = push  # type: ignore[method-assign,assignment]
            self.push_many = push_many  # type: ignore[method-assign,assignment]
            self.flush = flush  # type: ignore[method-assign,assignment]

    # -- opening and closing ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise ClosedError("a Producer is opened once; create a new one to write again")
        loop = running_loop()  # the event loop's differences, chosen once
        self._cancel_pending = loop.cancel_pending
        self._loop_turn = loop.loop_turn
        self._shielded_turn = loop.shielded_turn
        self._state = "open"
        # The opener thread leaves the stream here, so a cancellation that lands as the thread
        # returns (anyio delivers it at that checkpoint, dropping the result) can still close it:
        # otherwise its owner lock would be held until the process exits.
        opened: list[tuple[StreamWriter, str]] = []
        try:
            await self._open_stream(opened)
        except BaseException:
            self._state = "closed"
            if opened:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(opened[0][0].close)
            raise
        stream, real = opened[0]
        self._stream = stream
        turns = (
            Turns(
                turn_lock(stream.path, stream.mode), loop.call_soon, loop.call_soon_threadsafe, stream.lock_wait_seconds
            )
            if self.shared
            else None
        )
        settings = stream.settings
        self._partition_count = settings.partition_count
        self._max_message_bytes = settings.max_message_bytes
        self._holds_tags = settings.holds_tags
        self._holds_kafka_headers = settings.holds_kafka_headers
        self._keyless = KEYLESS if settings.holds_transactions else 0
        self._encoder = self._new_encoder()
        if self.refuse_writes_above is not None:
            self._disk_guard = DiskGuard(real, self.refuse_writes_above)
            if turns is not None:
                turns.on_taken = self._disk_guard.forget  # others wrote since: measure again
            vacuum_level = settings.retention.max_disk_usage
            if vacuum_level is not None and vacuum_level >= self.refuse_writes_above:
                logger.warning(
                    "adiskq: %s deletes old data above max_disk_usage=%g, but this producer refuses writes "
                    "above refuse_writes_above=%g already, so vacuum will not free space before writes stop: "
                    "set max_disk_usage below refuse_writes_above",
                    self.path,
                    vacuum_level,
                    self.refuse_writes_above,
                )
        self._lanes = [
            Lane(
                partition,
                (real, partition.partition),
                sync_flush=self.flush_mode == "sync",
                structure_lock=self._structure_lock,
                limiter=self._limiter,
                loop=loop,
                turns=turns,
            )
            for partition in stream.partitions
        ]
        if turns is not None:
            turns.lanes = self._lanes
        self._turns = turns
        if self.flush_mode == "async":
            self._background.append(Periodic("adiskq flusher", self.flush_interval, self._flush_dirty))
        if not settings.retention.is_unbounded:
            self._background.append(Periodic("adiskq vacuum", self.vacuum_interval, self._vacuum_quietly))
        for periodic in self._background:
            periodic.start()
        return self

    async def _open_stream(self, opened: list[tuple[StreamWriter, str]]) -> None:
        """Open the stream in a worker thread, retrying a held lock until ``lock_timeout``; the
        stream and its real path are appended to ``opened`` by the thread itself.

        A cancellation interrupts the thread's wait for a lock of ``locks/`` (another shared
        producer may be stopped while it holds one), and then waits for the thread, which ends at
        once: a thread that opened the stream all the same closes it (``given_up``, under
        ``handing``), unless it left it in ``opened`` first (the caller closes it then)."""

        def open_stream(given_up: threading.Event, handing: threading.Lock, ended: threading.Event) -> None:
            try:
                stream = self._open_writer(interrupt=given_up)
                try:
                    real = os.path.realpath(stream.path)
                    if stream.settings.compression is not None:
                        self._compression = ValueCompression.open(stream.path, stream.mode, self._zstd_dictionary)
                except BaseException:
                    stream.close()
                    raise
                with handing:
                    if not given_up.is_set():
                        opened.append((stream, real))
                        return
                stream.close()  # nobody waits for it any more
            finally:
                ended.set()

        deadline = time.monotonic() + self._lock_timeout
        while True:
            given_up, handing, ended = threading.Event(), threading.Lock(), threading.Event()
            try:
                try:
                    await anyio.to_thread.run_sync(open_stream, given_up, handing, ended, abandon_on_cancel=True)
                except BaseException:
                    with handing:
                        given_up.set()
                    with anyio.CancelScope(shield=True):  # interrupted, the thread ends in moments
                        await anyio.to_thread.run_sync(ended.wait)
                    raise
                return
            except LockTimeoutError:
                raise  # waited lock_timeout already
            except StreamLockedError:
                # Wait here, not in the thread, so the wait stays cancellable.
                if time.monotonic() >= deadline:
                    raise
                await anyio.sleep(min(_LOCK_RETRY_SECONDS, max(0.0, deadline - time.monotonic())))

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self._close(exc_type, exc, tb)
        return None

    async def aclose(self) -> None:
        """Write pending pushes, fsync, release the lock and stop the background threads; closing twice is harmless."""
        await self._close(None, None, None)

    async def _close(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._state in ("closing", "closed"):
            return
        if self._state == "new":
            self._state = "closed"
            return
        self._state = "closing"
        stream = self._stream
        assert stream is not None
        with anyio.CancelScope(shield=True):
            try:
                while self._splitting:
                    self._splits_done = anyio.Event()
                    await self._splits_done.wait()
                for lane in self._lanes:
                    await lane.drain()
            finally:
                # Every lock goes, whatever fails on the way: a lock left held stops every other writer.
                for lane in self._lanes:
                    lane.release_quietly()
                if self._turns is not None:
                    self._turns.release()
                    self._turns.lock.close()
                await anyio.to_thread.run_sync(self._shut_down, stream)
                self._state = "closed"

    def _shut_down(self, stream: StreamWriter) -> None:
        """Stop the background threads, then fsync, close the files and release the lock."""
        for periodic in self._background:
            periodic.stop()
        with self._structure_lock:
            stream.close()

    def _check_open(self) -> None:
        if self._state != "open":
            if self._state == "new":
                raise ClosedError("the Producer is not open yet: use `async with adiskq.Producer(path) as producer:`")
            raise ClosedError("the Producer is closed; open a new one to write again")

    # -- pushing ---------------------------------------------------------------------------------

    def _new_encoder(self) -> BatchEncoder:
        """The encoding of push_many's batches, with this producer's settings as they are now."""
        return BatchEncoder(
            partition_count=self._partition_count,
            placement=self._placement,
            compression=self._compression,
            max_message_bytes=self._max_message_bytes,
            check_size=self._check_size,
            keyless=self._keyless,
        )

    def _refuse_tags(self) -> None:
        """SettingsMismatchError: this stream's format has no tags, and how to move it to one that has."""
        assert self._stream is not None
        require_tags(self._stream.settings, self._stream.path)

    def _check_headers(self, records: Iterable[object]) -> None:
        """SettingsMismatchError when a record's ``Headers`` hold a null value or a repeated name and
        this stream's format cannot store either (before format 5)."""
        if not self._holds_kafka_headers and any(
            isinstance(record, Record) and type(record.headers) is Headers and record.headers.kafka_only
            for record in records
        ):
            assert self._stream is not None
            require_kafka_headers(self._stream.settings, self._stream.path)

    def _check_size(self, size: int) -> None:
        if size > self._max_message_bytes:
            raise MessageTooLargeError(
                f"a message of {size} bytes is over this stream's max_message_bytes={self._max_message_bytes}; "
                "split it, or open the Producer with a larger max_message_bytes="
            )

    @property
    def closed(self) -> bool:
        """True once ``aclose()`` (or leaving ``async with``) began; a closed producer stays closed."""
        return self._state in ("closing", "closed")

    def _serialize(self, value: PushValueT, key: PushKeyT | None) -> tuple[object, object]:
        """The value and key as stored: each through its serializer, if one is set (a None key stays None)."""
        stored = value if self.value_serializer is None else self.value_serializer(value)
        stored_key = key if key is None or self.key_serializer is None else self.key_serializer(key)
        return stored, stored_key

    async def _push_serialized(
        self,
        value: PushValueT,
        *,
        key: PushKeyT | None = None,
        tag: str | None = None,
        headers: Mapping[str, bytes] | None = None,
        timestamp: Timestamp = None,
    ) -> Receipt:
        """``push`` of a producer with serializers: the value and key serialized first."""
        stored, stored_key = self._serialize(value, key)
        # The class's own push (this instance's push is this method), given the stored bytes.
        push: Callable[..., Awaitable[Receipt]] = Producer.push
        return await push(self, stored, key=stored_key, tag=tag, headers=headers, timestamp=timestamp)

    async def _push_many_serialized(
        self, records: Iterable[Record[PushKeyT, PushValueT] | PushValueT]
    ) -> list[Receipt]:
        """``push_many`` of a producer with serializers: each value (a ``Record``'s, or the item)
        and key serialized first, all of them before anything is written."""
        stored: list[Record[object, object]] = []
        for item in records:
            record: Record[PushKeyT, PushValueT] = item if isinstance(item, Record) else Record(item)
            value, key = self._serialize(record.value, record.key)
            stored.append(Record(value, key, record.headers, record.timestamp, record.tag))
        push_many: Callable[..., Awaitable[list[Receipt]]] = Producer.push_many
        return await push_many(self, stored)

    async def push(
        self,
        value: PushValueT,
        *,
        key: PushKeyT | None = None,
        tag: str | None = None,
        headers: Mapping[str, bytes] | None = None,
        timestamp: Timestamp = None,
    ) -> Receipt:
        """Append one message; returns its ``Receipt(partition, offset)``.

        ``key`` picks the partition (a random key when None); ``tag`` (1 to 255 bytes of UTF-8, or
        None) is what filtering consumers select by; ``headers`` maps names to bytes, or is a
        ``Headers`` for Kafka's null values and repeated names; ``timestamp`` defaults to now. Returns
        once the message is handed to the OS (``flush="async"``) or on stable storage (``"sync"``).
        Cancellation is atomic: a cancelled push was either written with its offset or not at all.
        (asyncio's own ``task.cancel()`` — ``asyncio.timeout``, ``wait_for`` — cannot be delivered
        later, as an anyio scope's is: a push it reaches while its batch commits raises
        ``CancelledError`` once the batch is finished, and its message may have been written.)

        Raises:
            MessageTooLargeError: the message is over the stream's ``max_message_bytes``.
            ClosedError: the producer is not open.
            TypeError: the key is not ``str``, ``bytes`` or None, or the tag not ``str`` or None.
            InvalidArgumentError: the tag is empty or over 255 bytes of UTF-8, or the key or a header
                name holds a lone surrogate.
            SettingsMismatchError: a tag on a stream whose format has none (``adiskq/1``), or a
                ``Headers`` with a null value or a repeated name before ``adiskq/5``: the message
                says how to move it (``adiskq upgrade PATH``).
            DiskUsageRefusedError: the file system is fuller than ``refuse_writes_above``; nothing was
                written, and pushes succeed again once usage is below the level.
            OSError: the disk failed the write (ENOSPC, EIO, EFBIG): nothing was written, and the next
                push succeeds once the cause is gone.
        """
        if self._cancel_pending():  # push is a checkpoint; its inline path never yields, so it asks
            await anyio.lowlevel.checkpoint_if_cancelled()
        if self._inline_pushes >= _YIELD_EVERY:
            # Other tasks get their turn before this push writes anything, so no shield is needed
            # (entering and leaving anyio's cost more than the turn of the loop itself): a
            # cancellation the turn delivers (asyncio's) leaves nothing written.
            self._inline_pushes = 0
            await self._loop_turn()
        if self._state != "open":
            self._check_open()
        if tag is not None and not self._holds_tags:
            self._refuse_tags()
        if type(headers) is Headers and not self._holds_kafka_headers and headers.kafka_only:
            assert self._stream is not None
            require_kafka_headers(self._stream.settings, self._stream.path)
        timestamp_ns = _time_ns() if timestamp is None else _timestamp_ns(timestamp)
        compression = self._compression
        if (
            raw_encode_push is None
            or compression is not None  # compressing is the step by step path's
            or keyindex.key_hash is not _CRC32
            or (
                encoded := raw_encode_push(
                    value,
                    key,
                    timestamp_ns,
                    headers,
                    tag,
                    self._partition_count,
                    self._max_message_bytes,
                    self._keyless,
                )
            )
            is NotImplemented
        ):
            encoded = self._encoder.encode_one(value, key, timestamp_ns, headers, tag)
        record, partition, key_hash = encoded
        guard = self._disk_guard
        if guard is not None:  # guard.admit(len(record)), spelled out
            guard.budget_bytes -= len(record)
            if guard.budget_bytes < 0:
                guard.over_budget(len(record))
        lane = self._lanes[partition]
        # its .tagindex entry, from the tag at hand (no tag: a constant, without a lookup)
        entry = NO_TAG_ENTRY if tag is None else _cached_tag_entry(tag) or tag_entry(tag)
        if lane.inline:  # lane.try_write_one spelled out, for a lane that needs none of its other tests
            writer = lane.partition.active
            if writer.data_size < lane.partition.segment_size_bytes or writer.next_offset <= writer.base_offset:
                try:
                    offset = writer.append_one(record, timestamp_ns, key_hash, entry)
                except OSError as error:  # the segment cut its files back: nothing was written
                    raise explain_disk_error(error) from None
                lane.dirty = True
                if anyone_waiting and waiters_of(lane.wake_key):
                    notify(lane.wake_key)
            else:
                offset = -1  # a roll is due: it fsyncs, so it happens in a batch, off the loop thread
        else:
            offset = lane.try_write_one(record, timestamp_ns, key_hash, entry)
        if compression is not None and compression.wants_training:
            await compression.train()
        if offset >= 0:
            self._inline_pushes += 1  # the push after the _YIELD_EVERY-th yields first
            return receipt(partition, offset)
        while True:
            if lane.needs_lock:  # a shared producer waits for the partition's lock before joining a batch
                await self._take_lock(lane)
            batch, slot = lane.enqueue(RecordRun([record], [timestamp_ns], [key_hash], entry, len(record)))
            try:
                first = await lane.complete(batch, slot)
            except LockNotHeld:
                continue  # nothing was written: wait for the lock, and push again
            return receipt(partition, first + slot)

    async def _take_lock(self, lane: Lane) -> None:
        """Wait for a lane's partition lock (``LockTimeoutError`` after ``lock_timeout``,
        cancellable); ``ClosedError`` if the producer was closed meanwhile."""
        await lane.take_lock()
        if self._state != "open":
            lane.release_quietly()
            self._check_open()

    async def push_many(self, records: Iterable[Record[PushKeyT, PushValueT] | PushValueT]) -> list[Receipt]:
        """Append many messages as one batch; receipts come back in the order given.

        Each partition's share gets contiguous offsets, in order; records without a timestamp share
        one taken at the call. Every record is checked before any is written, so a bad one (wrong
        type, too large) writes nothing. A batch of more than 256 records lets other tasks run
        between its steps (encoding, each partition's writes, the receipts); cancelled, it is still
        written whole or not at all.

        Raises:
            MessageTooLargeError: a record is over ``max_message_bytes`` (nothing was written).
            ClosedError: the producer is not open.
            SettingsMismatchError: a tagged record on a stream whose format has no tags (nothing was
                written; see ``push``).
            DiskUsageRefusedError: the file system is fuller than ``refuse_writes_above`` (nothing
                was written).
            PartialWriteError: the records go to several partitions and one partition's share
                failed after another's was committed; ``.receipts`` says which records were written.
            OSError: the disk failed the write (ENOSPC, EIO, EFBIG) and nothing was written.
        """
        turns = self._turns
        if turns is None:
            return await shares.push_many(self, records)  # type: ignore[arg-type]
        # A large batch lets other tasks run while it encodes, before it writes: those turns of the
        # loop must not count as the lanes being idle, or they let go of their locks in between.
        turns.pushing += 1
        try:
            return await shares.push_many(self, records)  # type: ignore[arg-type]
        finally:
            turns.pushing -= 1

    def _check_partition(self, partition: int) -> None:
        """Raises unless the producer is open and ``partition`` is one of the stream's."""
        self._check_open()
        if not 0 <= partition < self._partition_count:
            raise InvalidArgumentError(
                f"stream {self.path!r} has partitions 0..{self._partition_count - 1}; there is no partition {partition}"
            )

    @property
    def _takes_encoded(self) -> bool:
        """Whether records encoded elsewhere (``codec.encode_record``'s bytes, keys hashed by
        ``keyindex.key_hash``) are stored as they are: not on a stream that compresses its values."""
        return self._compression is None and keyindex.key_hash is _CRC32

    # -- durability and retention ----------------------------------------------------------------

    async def flush(self) -> None:
        """fsync every partition now (pushes made before the call are then on stable storage).

        Raises:
            ClosedError: the producer is not open.
            OSError: an fsync failed (this one, or a background one since the last ``flush``).
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        for lane in self._lanes:
            await lane.drain()
        await anyio.to_thread.run_sync(self._sync_lanes, self._lanes, limiter=self._limiter)
        error, self._sync_error = self._sync_error, None
        if error is not None:
            raise error

    def _sync_lanes(self, lanes: list[Lane], *, data_only: bool = False) -> None:
        """fsync these lanes' active segments (in a worker or the flusher thread); ``data_only``:
        their ``.data`` alone, which makes what was written durable (recovery rebuilds the index
        files from it) but leaves the lanes for the flusher to sync whole."""
        with self._structure_lock:
            for lane in lanes:
                if not data_only:
                    lane.dirty = False  # a write during the fsync marks it dirty again
            try:
                for lane in lanes:
                    lane.partition.sync(data_only=data_only)
            except OSError as error:
                for lane in lanes:
                    lane.dirty = True
                self._sync_error = error
                logger.error("adiskq: fsync of %s failed: %s", self.path, error)

    def _flush_dirty(self) -> None:
        self._sync_lanes([lane for lane in self._lanes if lane.dirty])

    async def vacuum(self, retention: Retention | None = None) -> VacuumReport:
        """Delete the sealed segments the retention (the stream's, unless given) no longer keeps.

        Raises:
            ClosedError: the producer is not open.
            OSError: a file could not be deleted; what was deleted stays deleted, the rest is kept.
        """
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._check_open()
        return await anyio.to_thread.run_sync(self._vacuum, retention, limiter=self._limiter)

    def _vacuum(self, retention: Retention | None) -> VacuumReport:
        stream = self._stream
        assert stream is not None
        with self._structure_lock:
            report = stream.vacuum(retention)
        if report:
            logger.info(
                "adiskq: vacuum of %s removed %d segments (%d messages, %d bytes)",
                self.path,
                len(report.removed_segments),
                report.removed_messages,
                report.removed_bytes,
            )
        return report

    def _vacuum_quietly(self) -> None:
        try:
            self._vacuum(None)
        except OSError as error:
            logger.error("adiskq: vacuum of %s failed: %s", self.path, error)

    # -- state -----------------------------------------------------------------------------------

    @property
    def partitions(self) -> int:
        """The stream's partition count (0 until opened)."""
        return self._partition_count

    @property
    def recovery(self) -> RecoveryReport | None:
        """What opening the stream repaired (None until opened)."""
        return None if self._stream is None else self._stream.recovery

    @property
    def settings(self) -> StreamSettings | None:
        """The stream's settings as stored (None until opened)."""
        return None if self._stream is None else self._stream.settings
