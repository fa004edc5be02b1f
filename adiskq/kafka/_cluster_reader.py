"""What the Kafka backend's ``Consumer`` and ``ConsumerGroup`` share: a librdkafka consumer read
from AnyIO worker threads, its records handed out as ``Message`` through the readers' buffer.

A read asks librdkafka for one record for at most ``_POLL_SECONDS`` (so a cancelled read ends
within that), then takes whatever else it has fetched without waiting, up to ``_LOOKAHEAD`` records.
librdkafka queues a fetch's records partition after partition, so the partitions take turns from
what was taken (one partition's run per batch, each partition after the one before), as a local
reader's partitions take turns: a busy partition does not hold the others back. Deserializers run as a local
reader runs them: a message one fails on raises ``DeserializationError`` and stays next.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.lowlevel
import anyio.to_thread
import confluent_kafka

from .._async.arguments import check_on_data_loss, check_start, positive_seconds
from .._async.reader import _Reader
from .._errors import ClosedError, DeserializationError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.capabilities import refuse
from .._sansio.decoding import MessageDecoder
from .._sansio.values import Message
from ._cluster_client import KafkaTarget, target
from ._cluster_mapping import message_of
from ._mirror_kafka import TIMEOUT

__all__ = ["KafkaReadLoop", "KafkaReading", "check_reader_options"]

logger = logging.getLogger("adiskq")

_POLL_SECONDS: Final = 0.1
# Records taken from librdkafka's queue at once: enough to reach past one partition's share of a
# fetch of small records to the next partition's, few enough to bound what sits decoded in memory.
_LOOKAHEAD: Final = 10_000
_IGNORED: Final = (confluent_kafka.KafkaError._PARTITION_EOF,)


def check_reader_options(options: dict[str, Any], *, group: bool) -> None:
    """Check what both backends' readers take as a local reader checks it, and refuse what a Kafka
    reader lacks (the capability table's rows), before anything is opened."""
    if options.get("tags") is not None:
        raise refuse("tags= (tag filters)")
    if options.get("wait_for_stream"):
        raise refuse("wait_for_stream=True")
    check_start(options.get("start", "oldest"))
    end = options.get("end", "wait")
    if group and end not in ("wait", "close"):
        raise InvalidArgumentError(f"end={end!r}: a group takes 'wait' or 'close'")
    if not group and end not in ("wait", "close") and (isinstance(end, bool) or not isinstance(end, int) or end < 0):
        raise InvalidArgumentError(f"end={end!r}: use 'wait', 'close' or an offset (exclusive)")
    check_on_data_loss(options.get("on_data_loss", "skip"))
    positive_seconds("poll_interval", options.get("poll_interval"), optional=True)
    for name in ("commit_interval", "rebalance_interval"):
        if name in options:
            positive_seconds(name, options[name])


class KafkaReading:
    """One librdkafka consumer and the messages read from it but not handed out yet."""

    def __init__(
        self,
        url: str,
        kafka: object,
        key_deserializer: Callable[[bytes], Any] | None,
        value_deserializer: Callable[[bytes], Any] | None,
    ) -> None:
        self.target: KafkaTarget = target(url, kafka)  # type: ignore[arg-type]
        self.decoder = MessageDecoder.of(key_deserializer, value_deserializer)
        self.client: confluent_kafka.Consumer | None = None
        # Read and not handed out yet, each partition's in order (a deserializer may have failed on
        # the first): a batch takes from one partition's queue, whatever the others hold.
        # (No partition is kept with an empty queue: their count says how many partitions wait.)
        self._waiting: collections.defaultdict[int, collections.deque[Message[bytes, bytes]]] = collections.defaultdict(
            collections.deque
        )
        self.positions: dict[int, int] = {}  # partition -> the offset after the last message handed out
        self.on_data_loss = "skip"
        self.starts: dict[int, int] = {}  # partition -> the offset it was assigned at
        self.ends: dict[int, int | None] = {}  # partition -> the end it is read to (exclusive), if it has one
        self.skipped: list[tuple[int, int, int]] = []  # (partition, first, last_exclusive) retention deleted
        self.last_batch: list[Message[Any, Any]] = []  # what the last read handed out (one partition's)
        self._turn = -1  # the partition handed out last: the next batch comes from the one after it
        # With deserializers: the stored key and value of each message of the last batch handed
        # out (a dead letter carries the bytes as stored, not the decoded objects).
        self.raw: dict[tuple[int, int], tuple[bytes, bytes]] = {}

    def poll(
        self, max_messages: int, keep: Callable[[Message[bytes, bytes]], bool], *, wait: bool = True
    ) -> list[Message[bytes, bytes]]:
        """Records as messages (in a worker thread), ``max_messages`` or more (up to ``_LOOKAHEAD``:
        what librdkafka has fetched); ``keep`` drops those past an end. Waits ``_POLL_SECONDS`` at
        most when none has come (``wait=False``: not at all)."""
        client = self.client
        if client is None:
            raise ClosedError("closed while it was read")
        first = client.poll(_POLL_SECONDS if wait else 0)
        if first is None:
            return []
        records = [first]
        records.extend(client.consume(max(max_messages, _LOOKAHEAD) - 1, 0))
        messages = []
        for record in records:
            error = record.error()
            if error is not None:
                if error.code() in _IGNORED:
                    continue
                if error.code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET:
                    self._data_lost(client, record.partition(), record.offset())
                    continue
                raise OSError(f"reading Kafka topic {self.target.topic!r}: {error.str()}")
            message = message_of(record)
            if keep(message):
                messages.append(message)
        return messages

    def _data_lost(self, client: confluent_kafka.Consumer, partition: int | None, offset: int | None) -> None:
        """Retention deleted the records at ``partition``'s position before they were read (librdkafka's
        auto.offset.reset=error): raise, or go on from the oldest record kept and report the range
        skipped, as a local reader does (``skipped``, and a warning in the log)."""
        topic = self.target.topic
        if partition is None or partition < 0:
            raise OSError(f"reading Kafka topic {topic!r}: a position retention deleted, in no partition named")
        first = offset if offset is not None and offset >= 0 else self.positions.get(partition, 0)
        tp = confluent_kafka.TopicPartition(topic, partition)
        oldest, _ = client.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
        if self.on_data_loss == "raise":
            # Reading again raises again, as on a local stream: the position stays where it was.
            _restart(client, topic, partition, first, self.starts)
            raise OffsetOutOfRangeError(
                f"offsets {first}..{oldest - 1} of partition {partition} of Kafka topic {topic!r} were deleted by "
                f"retention before this consumer read them; the oldest offset is now {oldest}. Open the consumer "
                "with on_data_loss='skip' to continue from there, or keep more data (the topic's retention.ms, "
                "retention.bytes)",
                partition=partition,
                offset=first,
                oldest_offset=oldest,
            )
        end = self.ends.get(partition)
        resume = oldest if end is None else min(oldest, end)
        logger.warning(
            "adiskq: Kafka topic %s, partition %d: offsets %d..%d were deleted by retention before they were read; "
            "skipped",
            topic,
            partition,
            first,
            resume - 1,
        )
        self.skipped.append((partition, first, resume))
        self.positions[partition] = resume
        _restart(client, topic, partition, resume, self.starts)

    def deliver(self, messages: list[Message[bytes, bytes]], max_messages: int) -> list[Message[Any, Any]]:
        """``messages`` (after the undelivered ones) through the deserializers, up to ``max_messages``;
        the rest wait for the next read. ``DeserializationError`` when the first fails."""
        waiting = self._waiting
        for message in messages:
            waiting[message.partition].append(message)
        if not waiting:
            self.last_batch = []
            return []
        # One partition's messages at a time, as a local group's batches are (a reader's position in
        # a partition is then the batch's next message: ``next_offsets``); the partitions take turns.
        partition = min(waiting, key=lambda p: (p <= self._turn, p))
        queue = waiting[partition]
        handed = [queue.popleft() for _ in range(min(len(queue), max_messages))]
        if not queue:
            del waiting[partition]
        self._turn = partition
        decoded: list[Message[Any, Any]] = handed
        if self.decoder is not None:
            decoded, failure = self.decoder.decode(handed)
            if failure is not None:
                waiting[partition].extendleft(reversed(handed[len(decoded) :]))
                self._turn = partition - 1  # the message that failed stays next
                if not decoded:
                    failed = handed[0]
                    raise DeserializationError(
                        f"the {failure.which} failed on message {failed.offset} of partition {failed.partition} "
                        f"({type(failure.error).__name__}: {failure.error}); it was not delivered and nothing after "
                        f"it was skipped. Fix the function, or read on after it (Consumer(url, partition="
                        f"{failed.partition}, start={failed.offset + 1}), group.seek({failed.partition}, "
                        f"{failed.offset + 1}))",
                        partition=failed.partition,
                        offset=failed.offset,
                    ) from failure.error
        for message in decoded:
            self.positions[message.partition] = message.offset + 1
        if self.decoder is not None:
            self.raw = {(m.partition, m.offset): (m.key, m.value) for m in handed}
        self.last_batch = decoded
        return decoded

    def next_offsets(self, buffered: int) -> dict[int, int]:
        """Partition -> the offset of the next message handed out, ``buffered`` messages of the last
        batch being still to hand out (Kafka's offsets may have gaps: they are read, not counted)."""
        positions = dict(self.positions)
        batch = self.last_batch
        if buffered and batch:
            positions[batch[0].partition] = batch[len(batch) - buffered].offset
        return positions

    @property
    def undelivered(self) -> bool:
        """Whether messages were read and not handed out yet."""
        return bool(self._waiting)

    def one_partition_waits(self) -> bool:
        """Whether what was read and not handed out yet is all one partition's."""
        return len(self._waiting) == 1

    def first_waiting(self, partition: int) -> Message[bytes, bytes] | None:
        """The next message of ``partition`` read and not handed out yet, if any."""
        queue = self._waiting.get(partition)
        return queue[0] if queue else None

    def take_waiting(self, partition: int, offset: int) -> Message[bytes, bytes] | None:
        """The message at ``offset`` of ``partition``, taken out of those not handed out yet (None: not there)."""
        queue = self._waiting.get(partition)
        if queue is None:
            return None
        for message in queue:
            if message.offset == offset:
                queue.remove(message)
                if not queue:
                    del self._waiting[partition]
                return message
        return None

    def drop_undelivered(self, partition: int | None = None) -> None:
        if partition is None:
            self._waiting.clear()
        else:
            self._waiting.pop(partition, None)

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()


def _restart(client: confluent_kafka.Consumer, topic: str, partition: int, offset: int, starts: dict[int, int]) -> None:
    """Fetch ``partition`` again from ``offset`` after librdkafka stopped it at a position retention
    deleted: a seek is refused in that state, so the partition is assigned again (alone, or, in a
    group of the eager protocol, with the others at their positions, else where they started)."""
    tp = confluent_kafka.TopicPartition(topic, partition, offset)
    try:
        client.incremental_unassign([tp])
        client.incremental_assign([tp])
        return
    except confluent_kafka.KafkaException as error:
        if error.args[0].code() != confluent_kafka.KafkaError._STATE:
            raise
    assigned = client.position(client.assignment())
    for other in assigned:
        if other.partition == partition:
            other.offset = offset
        elif other.offset < 0 and other.partition in starts:
            other.offset = starts[other.partition]
    client.assign(assigned)


class KafkaReadLoop(_Reader[Any, Any]):
    """The read loop of both Kafka readers (``KafkaConsumer``, ``KafkaConsumerGroup``): a batch is
    what was read and not handed out yet, or what a poll in a worker thread brings.

    A reader says when it is done (``_finished``), polls its way (``_poll``: a group commits
    first, each checks its ends) and hears of each poll (``_after_poll``: a group's rebalances).
    """

    _reading_state: KafkaReading
    # Held while a worker thread uses the client to read, and by closing: librdkafka's consumer
    # must not be closed under a poll.
    _client_lock: anyio.Lock
    _reading: bool  # a read is under way (a second at once is refused, as a local reader's is)
    _polled: list[Message[bytes, bytes]]  # what the poll brought, for ``_read_some``

    def _finished(self) -> bool:
        """Whether every partition this reader reads passed its end (never, following)."""
        raise NotImplementedError

    def _reads_several(self) -> bool:
        """Whether more than one partition is read (and not finished)."""
        raise NotImplementedError

    def _poll(self, max_messages: int, wait: bool) -> list[Message[bytes, bytes]]:
        """Messages read from the client (in a worker thread)."""
        raise NotImplementedError

    def _after_poll(self) -> None:
        """After each poll, in the event loop."""

    def _wants_client(self) -> bool:
        """Whether the next read must go to the client before handing out what waits (a seek to check)."""
        return False

    async def _next_batch(self, max_messages: int) -> list[Message[Any, Any]]:
        if self._state != "open":
            self._refuse_unopened()
        buffered = self._take_buffered(max_messages)
        if buffered is not None:
            return buffered
        if self._reading:
            raise anyio.BusyResourceError("reading from")
        self._reading = True
        try:
            await anyio.lowlevel.checkpoint()
            reading = self._reading_state
            while True:
                if self.closed:
                    raise ClosedError(self._closed_while_reading)
                # What waits is handed out first; when it is all one partition's and others are
                # read, librdkafka is asked (without waiting) for theirs, so the partitions take turns.
                top_up = bool(reading.undelivered) and reading.one_partition_waits() and self._reads_several()
                if reading.undelivered and not top_up and not self._wants_client():
                    return self._hand_out([], max_messages)
                if not reading.undelivered and self._finished():
                    return []
                wait = not reading.undelivered
                async with self._client_lock:  # closing waits for this poll (at most _POLL_SECONDS)
                    if self.closed:
                        raise ClosedError(self._closed_while_reading)
                    messages = await anyio.to_thread.run_sync(self._poll, max_messages, wait)
                self._after_poll()
                if messages or reading.undelivered:
                    return self._hand_out(messages, max_messages)
        finally:
            self._reading = False

    def _hand_out(self, polled: list[Message[bytes, bytes]], max_messages: int) -> list[Message[Any, Any]]:
        """What a read hands out, through ``_read_some`` (which telemetry counts, when it is on)."""
        self._polled = polled
        return self._read_some(max_messages)

    def _read_some(self, max_messages: int) -> list[Message[Any, Any]]:
        polled, self._polled = self._polled, []
        return self._reading_state.deliver(polled, max_messages)
