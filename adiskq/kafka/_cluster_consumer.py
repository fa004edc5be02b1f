"""``adiskq.Consumer("kafka://HOST:PORT/TOPIC", ...)``: a topic's partitions read without a group.

The partitions are assigned, not subscribed (no group, nothing committed to Kafka), each from
``start``: ``"oldest"``, ``"newest"``, an offset or a ``datetime``; ``end`` is ``"wait"``, ``"close"``
(the partitions' last stable offsets when it opened) or an offset. Records of aborted
transactions are never delivered (``isolation.level=read_committed``), so offsets may have gaps, as
Kafka's do. ``Consumer.__new__`` makes one of these for a ``kafka://`` URL.
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import confluent_kafka

from .._async.consumer import Consumer
from .._async.reader import _Reader
from .._errors import ClosedError, InvalidArgumentError
from .._sansio.values import Message
from ._cluster_client import configured, new_consumer, offsets_at, topic_partitions
from ._cluster_reader import KafkaReading, KafkaReadLoop, check_reader_options

__all__ = ["KafkaConsumer"]

_TAKEN = frozenset(
    {
        "start",
        "end",
        "on_data_loss",
        "poll_interval",
        "tags",
        "value_deserializer",
        "key_deserializer",
        "wait_for_stream",
        "kafka",
    }
)


class KafkaConsumer(KafkaReadLoop, Consumer[Any, Any]):
    """A ``Consumer`` of a Kafka topic (see ``adiskq.Consumer`` and README's capability table)."""

    def __init__(self, path: str, partition: int | None = None, **options: Any) -> None:
        unknown = set(options) - _TAKEN
        if unknown:
            raise TypeError(f"Consumer() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int) or partition < 0):
            raise InvalidArgumentError(
                f"partition={partition!r}: partitions are numbered from 0 (None, the default: every partition)"
            )
        check_reader_options(options, group=False)
        self.partition = partition
        self.start = options.get("start", "oldest")
        self.end = options.get("end", "wait")
        self.on_data_loss = options.get("on_data_loss", "skip")
        self.poll_interval = options.get("poll_interval")
        self.wait_for_stream = False
        self._reading = False
        self._reading_state = KafkaReading(
            path, options.get("kafka"), options.get("key_deserializer"), options.get("value_deserializer")
        )
        self._reading_state.on_data_loss = self.on_data_loss
        self.path = path
        self._ends: dict[int, int | None] = {}  # partition -> end offset (exclusive), None: follow
        self._done: set[int] = set()
        self._polled: list[Message[bytes, bytes]] = []
        self._client_lock = anyio.Lock()
        _Reader.__init__(self)

    _closed_message = "this consumer was closed; open a new Consumer"
    _not_open_message = (
        "the Consumer is not open: read it inside `async with adiskq.Consumer(url) as consumer:`, which opens it "
        "and closes its client when the block ends"
    )

    async def __aenter__(self) -> Any:
        if self._state != "new":
            raise ClosedError(self._closed_message)
        with configured(self._reading_state.target):
            await anyio.to_thread.run_sync(self._open_client)
        self._state = "open"
        return self

    def _open_client(self) -> None:
        reading = self._reading_state
        config, topic = reading.target.config, reading.target.topic
        count = topic_partitions(config, topic)
        if self.partition is not None and self.partition >= count:
            raise InvalidArgumentError(
                f"partition={self.partition}: Kafka topic {topic!r} has partitions 0..{count - 1}; "
                f"there is no partition {self.partition}"
            )
        partitions = [self.partition] if self.partition is not None else list(range(count))
        client = new_consumer(
            config,
            **{
                "group.id": f"adiskq-consumer-{uuid.uuid4().hex}",  # librdkafka asks for one; nothing is committed
                # A position retention deleted comes as an error the reader handles by on_data_loss
                # (KafkaReading.poll), so a skip is reported as a local reader reports it.
                "auto.offset.reset": "error",
            },
        )
        try:
            starts = offsets_at(client, topic, partitions, self.start, deleted_ok=True)
            if self.end == "close":
                ends: dict[int, int | None] = dict(offsets_at(client, topic, partitions, "newest"))
            elif self.end == "wait":
                ends = dict.fromkeys(partitions)
            else:
                ends = dict.fromkeys(partitions, int(self.end))
            client.assign([confluent_kafka.TopicPartition(topic, p, starts[p]) for p in partitions])
        except BaseException:
            client.close()
            raise
        self._ends = ends
        self._done = {p for p in partitions if ends[p] is not None and starts[p] >= ends[p]}  # type: ignore[operator]
        reading.positions = dict(starts)
        reading.starts = dict(starts)
        reading.ends = ends
        reading.client = client

    async def aclose(self) -> None:
        """Close the client (also when cancelled); closing twice is harmless."""
        if self.closed:
            await anyio.lowlevel.checkpoint()
            return
        self._mark_closed()
        with anyio.CancelScope(shield=True):
            async with self._client_lock:
                await anyio.to_thread.run_sync(self._reading_state.close)

    def _release(self) -> None:
        self._reading_state.close()

    # -- reading ---------------------------------------------------------------------------------

    def _finished(self) -> bool:
        return len(self._done) == len(self._ends)

    def _reads_several(self) -> bool:
        return len(self._ends) - len(self._done) > 1

    def _poll(self, max_messages: int, wait: bool) -> list[Message[bytes, bytes]]:
        reading = self._reading_state
        messages = reading.poll(max_messages, self._before_end, wait=wait)
        if not messages and len(self._done) < len(self._ends) and reading.client is not None:
            # Caught up: a partition whose position passed its end (over transaction markers) is done.
            topic = reading.target.topic
            waiting = [p for p, end in self._ends.items() if end is not None and p not in self._done]
            if waiting:
                for tp in reading.client.position([confluent_kafka.TopicPartition(topic, p) for p in waiting]):
                    if tp.offset >= 0 and tp.offset >= (self._ends[tp.partition] or 0):
                        self._finish(tp.partition)
        return messages

    def _before_end(self, message: Message[bytes, bytes]) -> bool:
        end = self._ends.get(message.partition)
        if end is None:
            return True
        if message.offset + 1 >= end:
            self._finish(message.partition)
        return message.offset < end

    def _finish(self, partition: int) -> None:
        if partition in self._done:
            return
        self._done.add(partition)
        client = self._reading_state.client
        if client is not None:
            client.pause([confluent_kafka.TopicPartition(self._reading_state.target.topic, partition)])

    # -- state -----------------------------------------------------------------------------------

    @property
    def positions(self) -> dict[int, int]:
        """Partition -> the offset of the next message this consumer returns from it (empty before it opens)."""
        return self._reading_state.next_offsets(self._messages.remaining)

    @property
    def position(self) -> int | None:
        """The offset of the next message this consumer returns, when it reads one partition."""
        if len(self._ends) > 1:
            raise InvalidArgumentError(
                "this consumer reads several partitions: its `positions` maps each to its next offset "
                "(or open it with partition=N to read one)"
            )
        positions = self.positions
        return next(iter(positions.values())) if positions else None

    @property
    def assignment(self) -> tuple[int, ...]:
        return tuple(sorted(self._ends))

    @property
    def skipped(self) -> list[tuple[int, int, int]]:
        """``(partition, first, last_exclusive)`` ranges retention deleted before they were read."""
        return list(self._reading_state.skipped)

    @property
    def tags(self) -> frozenset[str] | None:
        return None

    @property
    def uses_inotify(self) -> bool | None:
        return None
