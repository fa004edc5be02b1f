"""``adiskq.ConsumerGroup("kafka://HOST:PORT/TOPIC", "name", ...)``: a Kafka consumer group.

The group's name is Kafka's ``group.id``; Kafka's coordinator shares the partitions among the
members (of any client). ``commit(msg)`` marks a message processed; the marks are committed to
Kafka every ``commit_interval`` seconds while the group is read, on ``flush()``, when a partition
is taken away (a rebalance) and on close, so a crash delivers at most the last interval's messages
again (at least once), as a local group does. ``start`` applies to partitions the group has never
committed in. ``dead_letter(msg, reason=...)`` produces the message to the dead-letter topic and
commits it. ``ConsumerGroup.__new__`` makes one of these for a ``kafka://`` URL.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import confluent_kafka

from .._async.group import DEFAULT_COMMIT_INTERVAL, DEFAULT_REBALANCE_INTERVAL, ConsumerGroup
from .._async.metrics import ObservedGroup, telemetry
from .._async.reader import _Reader
from .._errors import ClosedError, DeserializationError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.capabilities import is_kafka_url, refuse
from .._sansio.naming import validate_group_name
from .._sansio.retries import dead_letter_headers
from .._sansio.values import Message
from ._cluster_client import KafkaTarget, configured, ensure_topic, new_consumer, offsets_at, target, topic_partitions
from ._cluster_mapping import Outgoing
from ._cluster_reader import KafkaReading, KafkaReadLoop, check_reader_options
from ._mirror_config import KafkaEnd
from ._mirror_kafka import TIMEOUT

__all__ = ["KafkaConsumerGroup"]

_TAKEN = frozenset(
    {
        "name",
        "start",
        "end",
        "on_data_loss",
        "commit_interval",
        "poll_interval",
        "exclusive",
        "rebalance_interval",
        "tags",
        "value_deserializer",
        "key_deserializer",
        "wait_for_stream",
        "max_attempts",
        "dead_letter_path",
        "kafka",
    }
)


class KafkaConsumerGroup(KafkaReadLoop, ConsumerGroup[Any, Any]):
    """A ``ConsumerGroup`` of a Kafka topic (see ``adiskq.ConsumerGroup`` and README's capability table)."""

    def __init__(self, path: str, name: str | None = None, **options: Any) -> None:
        unknown = set(options) - _TAKEN
        if unknown:
            raise TypeError(f"ConsumerGroup() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        name = options.pop("name", name)
        if name is None:
            raise refuse("unnamed ConsumerGroup")
        if options.get("exclusive"):
            raise refuse("exclusive=True")
        if options.get("max_attempts") is not None:
            raise refuse("max_attempts=")
        check_reader_options(options, group=True)
        dead_letters = options.get("dead_letter_path")
        if dead_letters is not None and not is_kafka_url(dead_letters):
            raise InvalidArgumentError(
                f"dead_letter_path={dead_letters!r}: a group of a Kafka topic sends dead letters to a Kafka topic: "
                "give its kafka:// URL (or None for TOPIC.NAME.dead-letters on the same cluster)"
            )
        validate_group_name(name)
        self.name = name
        self.start = options.get("start", "oldest")
        self.end = options.get("end", "wait")
        self.on_data_loss = options.get("on_data_loss", "skip")
        self.commit_interval = options.get("commit_interval", DEFAULT_COMMIT_INTERVAL)
        self.poll_interval = options.get("poll_interval")
        self.rebalance_interval = options.get("rebalance_interval", DEFAULT_REBALANCE_INTERVAL)
        self.exclusive = False
        self.max_attempts = None
        self.wait_for_stream = False
        self._reading = False
        self._changed: anyio.Event | None = None  # what assignments() waits on
        self._observed: ObservedGroup | None = None
        kafka = options.get("kafka")
        self._reading_state = KafkaReading(
            path, kafka, options.get("key_deserializer"), options.get("value_deserializer")
        )
        self._reading_state.on_data_loss = self.on_data_loss
        topic = self._reading_state.target.topic
        self._dead_letter_target: KafkaTarget = (
            target(dead_letters, kafka)
            if dead_letters is not None
            else target(KafkaEnd(self._reading_state.target.end.bootstrap, f"{topic}.{name}.dead-letters").url, kafka)
        )
        self.dead_letter_path = self._dead_letter_target.url
        self.path = path
        self._held: set[int] = set()  # the partitions Kafka gave this member
        self._held_noted: frozenset[int] = frozenset()  # the partitions assignments() was last told of
        self._pending: dict[int, int] = {}  # partition -> offset to commit (the one after the last commit(msg))
        self._stored: dict[int, int] = {}  # partition -> the offset committed to Kafka last
        self._group_ends: dict[int, int] = {}  # end="close": each partition's end when the group opened
        self._done: set[int] = set()
        # partition -> (offset sought, the offset to read on from if it is past the end): a seek the
        # client's cached end could not allow at once, checked by the next read (``_apply_seeks``).
        self._seeks: dict[int, tuple[int, int]] = {}
        self._assigned = False  # whether Kafka assigned this member partitions (or none) yet
        self._last_commit = time.monotonic()
        self._dead_letter_client: confluent_kafka.Producer | None = None
        self._polled: list[Message[bytes, bytes]] = []
        self._client_lock = anyio.Lock()
        _Reader.__init__(self)

    _closed_message = "this consumer group was closed; open a new ConsumerGroup"
    _not_open_message = (
        "the ConsumerGroup is not open: read it inside `async with adiskq.ConsumerGroup(url, 'name') as group:`, "
        "which opens it and commits its offsets when the block ends"
    )

    # -- opening and closing ---------------------------------------------------------------------

    async def __aenter__(self) -> Any:
        if self._state != "new":
            raise ClosedError(self._closed_message)
        with configured(self._reading_state.target):
            await anyio.to_thread.run_sync(self._open_client)
        self._state = "open"
        instruments = telemetry()
        if instruments is not None:
            self._observed = ObservedGroup(self.path, self.name or "", self._cached_lag)
            instruments.watch_group(self._observed)  # its lag, as adiskq.consumer.lag
        return self

    def _cached_lag(self) -> dict[int, int]:
        """The lag of the partitions held, from the end offsets librdkafka last fetched (no request:
        telemetry's reader calls this from its own thread)."""
        client = self._reading_state.client
        if client is None:
            return {}
        topic = self._reading_state.target.topic
        marks = {**self._stored, **self._pending}
        lag = {}
        for partition in list(self._held):
            if partition in marks:
                try:
                    _, high = client.get_watermark_offsets(
                        confluent_kafka.TopicPartition(topic, partition), cached=True
                    )
                except confluent_kafka.KafkaException:
                    continue
                if high >= 0:
                    lag[partition] = max(0, high - marks[partition])
        return lag

    def _open_client(self) -> None:
        reading = self._reading_state
        config, topic = reading.target.config, reading.target.topic
        count = topic_partitions(config, topic)
        settings: dict[str, str | bool | int] = {
            "group.id": self.name or "",
            # Every partition is given its offset (_on_assign); one retention deleted comes as an
            # error the reader handles by on_data_loss (KafkaReading.poll), reporting a skip.
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
        client = new_consumer(config, **settings)
        try:
            if self.end == "close":
                self._group_ends = offsets_at(client, topic, list(range(count)), "newest")
                reading.ends = dict(self._group_ends)
            client.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke)
        except BaseException:
            client.close()
            raise
        reading.client = client

    def _on_assign(self, client: confluent_kafka.Consumer, partitions: list[confluent_kafka.TopicPartition]) -> None:
        """Kafka gave this member ``partitions`` (in the polling worker thread): those the group
        never committed in start at ``start``."""
        topic = self._reading_state.target.topic
        committed = client.committed(partitions, timeout=TIMEOUT) if partitions else []
        fresh = [tp.partition for tp in committed if tp.offset < 0]
        # Concrete offsets, "oldest" and "newest" too: an empty partition is then seen at its end.
        starts = offsets_at(client, topic, fresh, self.start, deleted_ok=True) if fresh else {}
        for tp in committed:
            if tp.offset >= 0:
                self._stored[tp.partition] = tp.offset
            elif tp.partition in starts:
                tp.offset = starts[tp.partition]
            end = self._group_ends.get(tp.partition)
            if end is not None and 0 <= tp.offset >= end:
                self._done.add(tp.partition)
        self._held.update(tp.partition for tp in committed)
        self._reading_state.starts.update((tp.partition, tp.offset) for tp in committed if tp.offset >= 0)
        self._assigned = True
        client.assign(committed)

    def _on_revoke(self, client: confluent_kafka.Consumer, partitions: list[confluent_kafka.TopicPartition]) -> None:
        """``partitions`` go to another member: their marks are committed first (in the polling thread)."""
        gone = {tp.partition for tp in partitions}
        self._assigned = False  # until the rebalance's assignment comes
        self._commit_now(client, only=gone)
        self._held -= gone
        for partition in gone:
            self._pending.pop(partition, None)
            self._reading_state.drop_undelivered(partition)
        client.unassign()

    async def aclose(self) -> None:
        """Commit the marks, leave the group and close the client (also when cancelled)."""
        if self.closed:
            await anyio.lowlevel.checkpoint()
            return
        self._mark_closed()
        try:
            with anyio.CancelScope(shield=True):
                async with self._client_lock:
                    await anyio.to_thread.run_sync(self._close_client)
        finally:
            self._held.clear()
            self._note_assignment_change()
            instruments = telemetry()
            if instruments is not None:
                instruments.unwatch_group(self._observed)

    def _close_client(self) -> None:
        client = self._reading_state.client
        try:
            if client is not None:
                self._commit_now(client)
        finally:
            self._reading_state.close()
            if self._dead_letter_client is not None:
                self._dead_letter_client.flush(TIMEOUT)

    def _release(self) -> None:
        self._reading_state.close()

    # -- reading ---------------------------------------------------------------------------------

    def _finished(self) -> bool:
        # end="close": done once Kafka assigned this member its share, read to the ends (a member
        # given none, with more members than partitions, is done at once).
        return bool(self._group_ends) and self._assigned and self._held <= self._done

    def _reads_several(self) -> bool:
        return len(self._held - self._done) > 1

    def _wants_client(self) -> bool:
        return bool(self._seeks)

    def _after_poll(self) -> None:
        if self._held != self._held_noted:  # a rebalance ran in the poll: wake assignments()
            self._held_noted = frozenset(self._held)
            self._note_assignment_change()

    def _poll(self, max_messages: int, wait: bool) -> list[Message[bytes, bytes]]:
        reading = self._reading_state
        client = reading.client
        if client is not None and self._pending and time.monotonic() - self._last_commit >= self.commit_interval:
            self._commit_now(client)
        if client is not None and self._seeks:
            self._apply_seeks(client)
        messages = reading.poll(max_messages, self._before_end, wait=wait)
        if not messages and self._group_ends and client is not None:
            topic = reading.target.topic
            waiting = [p for p in self._held if p not in self._done]
            if waiting:
                for tp in client.position([confluent_kafka.TopicPartition(topic, p) for p in waiting]):
                    if tp.offset >= 0 and tp.offset >= self._group_ends.get(tp.partition, 0):
                        self._done.add(tp.partition)
        return messages

    def _before_end(self, message: Message[bytes, bytes]) -> bool:
        end = self._group_ends.get(message.partition)
        if end is None or not self._group_ends:
            return True
        if message.offset + 1 >= end:
            self._done.add(message.partition)
        return message.offset < end

    # -- commits ---------------------------------------------------------------------------------

    def commit(self, message: Message[Any, Any]) -> None:
        """Mark ``message`` and everything before it in its partition as processed (committed to
        Kafka within ``commit_interval`` seconds, on ``flush()`` and on close)."""
        if self.closed:
            raise ClosedError("this consumer group was closed; commit before closing it")
        if self._state != "open":  # never opened: nothing would store the commit, as a local group says
            self._refuse_unopened()
        if message.partition not in self._held:
            raise InvalidArgumentError(
                f"partition {message.partition} is not held by this member (Kafka gave it to another): its "
                "messages come again to that member from the last committed offset"
            )
        offset = message.offset + 1
        if offset > self._pending.get(message.partition, -1):
            self._pending[message.partition] = offset

    def _commit_now(self, client: confluent_kafka.Consumer, only: set[int] | None = None) -> None:
        """Commit the marks (of ``only`` these partitions) to Kafka now (in a worker thread)."""
        topic = self._reading_state.target.topic
        marks = {p: o for p, o in self._pending.items() if (only is None or p in only) and o != self._stored.get(p)}
        self._last_commit = time.monotonic()
        if not marks:
            return
        try:
            client.commit(
                offsets=[confluent_kafka.TopicPartition(topic, p, o) for p, o in marks.items()], asynchronous=False
            )
        except confluent_kafka.KafkaException as error:
            if error.args[0].code() == confluent_kafka.KafkaError._NO_OFFSET:
                return
            raise OSError(
                f"committing group {self.name!r}'s offsets in Kafka topic {topic!r} failed: {error}"
            ) from None
        self._stored.update(marks)

    @property
    def committed(self) -> dict[int, int]:
        """Partition -> next offset, as committed (committed to Kafka or still pending), for the partitions held."""
        marks = {**self._stored, **self._pending}
        return {partition: offset for partition, offset in marks.items() if partition in self._held}

    async def flush(self) -> None:
        """Commit the marks to Kafka now."""
        if self.closed:
            raise ClosedError(self._closed_message)
        if self._state != "open":  # never opened: say so, as reading does, rather than answer quietly
            self._refuse_unopened()
        client = self._reading_state.client
        if client is None:
            await anyio.lowlevel.checkpoint()
            return
        await anyio.to_thread.run_sync(self._commit_now, client)

    async def lag(self) -> dict[int, int]:
        """Partition -> records left past the commits (``commit(msg)`` marks included), for the
        partitions this member holds and has committed in."""
        if self.closed:
            raise ClosedError(self._closed_message)
        if self._state != "open":  # never opened: say so, as reading does, rather than answer quietly
            self._refuse_unopened()
        client = self._reading_state.client
        assert client is not None
        held = sorted(self._held)

        def measure() -> dict[int, int]:
            topic = self._reading_state.target.topic
            ends = offsets_at(client, topic, held, "newest")
            marks = {**self._stored, **self._pending}
            return {p: max(0, ends[p] - marks[p]) for p in held if p in marks}

        return await anyio.to_thread.run_sync(measure)

    def seek(self, partition: int, offset: int) -> None:
        """Read ``partition`` on from ``offset`` (a partition this member holds), as a local group's seek.

        An offset past the partition's end raises ``OffsetOutOfRangeError``, and where the member
        reads does not move. Without blocking on the cluster, the end known is the one the client
        saw in its last fetch: an offset up to it is sought at once; one past it is checked against
        the partition's end at the next read, which raises ``OffsetOutOfRangeError`` if it is still
        past (and reads on from where the member was), or reads from there.
        """
        if self.closed:
            raise ClosedError("this consumer group was closed")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError(f"offset={offset!r}: offsets are numbered from 0")
        if partition not in self._held:
            raise InvalidArgumentError(
                f"partition {partition!r} is not held by this member (it holds {list(self.assignment)}): "
                "seek within `assignment`, or move a stopped group's offsets with adiskq.reset_offsets"
            )
        reading = self._reading_state
        client = reading.client
        assert client is not None
        was = self._next_offset(client, partition)
        remaining = self._messages.remaining
        if remaining:
            # The read-ahead batch came from one partition: keep it unless it is this one.
            buffered = self._messages.take(remaining) or []
            if buffered and buffered[0].partition != partition:
                self._messages.set(buffered, 0)
        reading.drop_undelivered(partition)
        self._done.discard(partition)
        tp = confluent_kafka.TopicPartition(reading.target.topic, partition)
        try:
            _, end = client.get_watermark_offsets(tp, cached=True)
        except confluent_kafka.KafkaException:
            end = -1
        if 0 <= offset <= end:
            self._seeks.pop(partition, None)
            client.seek(confluent_kafka.TopicPartition(reading.target.topic, partition, offset))
        else:
            self._seeks[partition] = (offset, self._seeks.get(partition, (offset, was))[1])

    def _next_offset(self, client: confluent_kafka.Consumer, partition: int) -> int:
        """The offset of the next message this member hands out from ``partition`` (no request)."""
        buffered = self._messages.remaining
        if buffered and self._reading_state.last_batch and self._reading_state.last_batch[0].partition == partition:
            return self._reading_state.last_batch[len(self._reading_state.last_batch) - buffered].offset
        waiting = self._reading_state.first_waiting(partition)
        if waiting is not None:
            return waiting.offset
        pending = self._seeks.get(partition)
        if pending is not None:
            return pending[1]
        (position,) = client.position([confluent_kafka.TopicPartition(self._reading_state.target.topic, partition)])
        return int(position.offset)

    def _apply_seeks(self, client: confluent_kafka.Consumer) -> None:
        """The seeks past the end the client knew, checked against each partition's end (in a worker thread)."""
        topic = self._reading_state.target.topic
        seeks, self._seeks = self._seeks, {}
        refused: OffsetOutOfRangeError | None = None
        for partition, (offset, was) in seeks.items():
            if partition not in self._held:
                continue
            tp = confluent_kafka.TopicPartition(topic, partition)
            _, end = client.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
            if offset > end:
                refused = refused or OffsetOutOfRangeError(
                    f"offset {offset} of partition {partition} of Kafka topic {topic!r} is not written yet (the "
                    f"next offset is {end}); seek to an offset up to {end}",
                    partition=partition,
                    offset=offset,
                    next_offset=end,
                )
                offset = was
            if offset >= 0:
                client.seek(confluent_kafka.TopicPartition(topic, partition, offset))
        if refused is not None:
            raise refused

    @property
    def assignment(self) -> tuple[int, ...]:
        return tuple(sorted(self._held))

    @property
    def member_id(self) -> str | None:
        client = self._reading_state.client
        return None if client is None else client.memberid()

    @property
    def skipped(self) -> list[tuple[int, int, int]]:
        """``(partition, first, last_exclusive)`` ranges retention deleted before they were read."""
        return list(self._reading_state.skipped)

    @property
    def tags(self) -> frozenset[str] | None:
        return None

    # -- retries and dead letters ----------------------------------------------------------------

    async def retry(self, message: Message[Any, Any], *, delay: float = 0.0, reason: str | None = None) -> None:
        raise refuse("retry()")

    async def dead_letter(self, message: Message[Any, Any] | DeserializationError, *, reason: str) -> None:
        """Produce ``message`` (its stored bytes) to the dead-letter topic, acknowledged by every
        in-sync replica, then commit it. A ``DeserializationError`` the group raised names the message."""
        if not isinstance(reason, str):
            raise TypeError(f"reason is text (str), not {type(reason).__name__}")
        if self.closed:
            raise ClosedError("this consumer group was closed; dead_letter() before closing it")
        reading = self._reading_state
        if isinstance(message, DeserializationError):
            failed = reading.take_waiting(message.partition, message.offset)
            if failed is None:
                raise InvalidArgumentError("that message is not the one this group failed to decode last")
            stored: Message[Any, Any] = failed
            delivered: Message[Any, Any] = failed
        else:
            raw = reading.raw.get((message.partition, message.offset))
            stored = message if raw is None else message._replace(key=raw[0], value=raw[1])
            delivered = message
        if delivered.partition not in self._held:
            raise InvalidArgumentError(f"partition {delivered.partition} is not held by this member any more")
        letter = Outgoing(
            stored.key or None,
            stored.value,
            list(dead_letter_headers(stored, stream=self.path, group=self.name or "", reason=reason).items()),
            stored.timestamp_ns // 1_000_000,
        )
        with anyio.CancelScope(shield=True):  # produced and committed, or neither
            await anyio.to_thread.run_sync(self._send_dead_letter, letter)
            self.commit(delivered)
            client = reading.client
            if client is not None:
                await anyio.to_thread.run_sync(self._commit_now, client)

    def _send_dead_letter(self, letter: Outgoing) -> None:
        config = self._dead_letter_target.config
        if self._dead_letter_client is None:
            ensure_topic(config, self._dead_letter_target.topic, None, None)
            self._dead_letter_client = confluent_kafka.Producer({"enable.idempotence": True, "acks": "all", **config})
        results: list[Any] = []
        self._dead_letter_client.produce(
            self._dead_letter_target.topic,
            letter.value,
            letter.key,
            headers=letter.headers,  # type: ignore[arg-type]  # None values are Kafka's null
            timestamp=letter.timestamp_ms,
            on_delivery=lambda error, _: results.append(error),
        )
        deadline = time.monotonic() + TIMEOUT
        while not results and time.monotonic() < deadline:
            self._dead_letter_client.flush(0.1)
        if not results or results[0] is not None:
            raise OSError(f"the dead letter was not acknowledged by Kafka: {results[0] if results else 'timed out'}")
