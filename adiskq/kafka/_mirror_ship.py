"""Local → Kafka: a stream shipped to a topic, each batch one Kafka transaction with its positions.

How it is exact (``docs/MIRROR.md`` has the whole argument): the transactional producer's
``transactional.id`` comes from the stream's identity and the topic, so a restarted copy fences the
old one (``init_transactions()`` aborts its open transaction); every batch of records is produced in
one transaction together with the position record of each partition it touched, in the state topic;
a restart reads the positions committed last and goes on from them, after checking that the local
record before each position is still the one shipped (its CRC-32C).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Final

import anyio
import anyio.to_thread
import confluent_kafka

from .._errors import MirrorDivergedError, MirrorError, OffsetOutOfRangeError, StreamLockedError
from .._sansio.values import Message, ns_from_datetime
from .._storage.stream import StreamReader
from .._storage.upgrade import give_identity
from ._mirror_config import KafkaEnd
from ._mirror_kafka import (
    TIMEOUT,
    TRANSACTION_TIMEOUT_MS,
    Position,
    create_topic,
    ensure_state_topic,
    partition_count,
    read_positions,
    state_key,
    state_value,
)
from ._mirror_mapping import record_crc, to_kafka
from ._mirror_options import MirrorOptions, MirrorStatus, write_status

__all__ = ["Shipper", "transactional_id"]

log = logging.getLogger("adiskq.mirror")
STATUS_INTERVAL: Final = 1.0  # seconds between writes of the status file
_UNASSIGNED: Final = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the producer's partitioner places the record


class _Aborted(Exception):
    """The transaction in flight was aborted (an abortable Kafka error): ship again from the positions committed."""


def transactional_id(stream_id: str, topic: str) -> str:
    """The ``transactional.id`` of the mirror of stream ``stream_id`` to ``topic``."""
    return f"adiskq-mirror-{stream_id}-{topic}"


class Shipper:
    """The local → Kafka mirror: ``open()`` (connect, fence, find and check the positions), ``run()``, ``close()``."""

    def __init__(self, stream_path: str, end: KafkaEnd, options: MirrorOptions) -> None:
        self.stream_path = stream_path
        self.end = end
        self.options = options
        self.config = {**options.kafka_config, "bootstrap.servers": end.bootstrap}
        self.status = MirrorStatus("to-kafka", stream_path, end.url)
        self.positions: dict[int, Position] = {}
        self.stream_id = ""
        self._producer: confluent_kafka.Producer | None = None
        self._kafka_partitions = 0
        self._status_written = 0.0

    # -- opening ---------------------------------------------------------------------------------

    async def open(self) -> None:
        await anyio.to_thread.run_sync(self._open)

    def _open(self) -> None:
        stream = StreamReader.open(self.stream_path)
        self.stream_id = self._identity(stream)
        local_partitions = stream.partition_count
        self._kafka_partitions = self._topic(local_partitions)
        ensure_state_topic(self.config, self.options.state_topic)
        producer = confluent_kafka.Producer(
            {
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                **self.config,
                "transactional.id": transactional_id(self.stream_id, self.end.topic),
                "enable.idempotence": True,
                "acks": "all",
                "partitioner": "murmur2_random",
            }
        )
        try:
            producer.init_transactions(TIMEOUT)  # fences an older copy, aborts its open transaction
        except confluent_kafka.KafkaException as error:
            raise MirrorError(
                f"cannot start a transactional producer on {self.end.bootstrap}: {error}; the mirror needs a "
                "cluster with transactions (Apache Kafka, with a transaction state log it can write, or `adiskq serve`)"
            ) from None
        self._producer = producer
        stored = read_positions(
            self.config, self.options.state_topic, state_key(self.stream_id, self.end.topic, 0)[:-1]
        )
        for partition in range(local_partitions):
            self.positions[partition] = self._checked_position(stream, partition, stored.get(partition))
        self.status.positions = {p: position.next_offset for p, position in self.positions.items()}
        self._note_ends(stream)

    def _identity(self, stream: StreamReader) -> str:
        if stream.settings.stream_id is not None:
            return stream.settings.stream_id
        try:
            stream_id, done = give_identity(self.stream_path)
        except StreamLockedError:
            raise MirrorError(
                f"stream {self.stream_path!r} has no identity yet, which the mirror derives its Kafka "
                "transactional.id from; it is given once, while no producer has the stream open (the stream "
                "gains it in settings.json, which an adiskq older than the mirror refuses): stop its producers "
                f"once and run `adiskq upgrade {self.stream_path} --identity`, or start the mirror then"
            ) from None
        if stream_id is None:
            members = ", ".join(f"group {name!r} (pid {member.pid})" for name, member in done.readers)
            raise MirrorError(
                f"stream {self.stream_path!r} has no identity yet, and it is given only while no consumer group "
                f"member has the stream open ({members}): stop them once and start the mirror again"
            )
        log.info("gave stream %s its identity %s (format %s)", self.stream_path, stream_id, done.after)
        return stream_id

    def _topic(self, local_partitions: int) -> int:
        """The topic's partition count, creating the topic if asked; refuses a topic too small to
        preserve partitions."""
        topic = self.end.topic
        count = partition_count(self.config, topic)
        if count is None:
            if not self.options.create_topic:
                raise MirrorError(
                    f"Kafka topic {topic!r} does not exist on {self.end.bootstrap}: create it with at least "
                    f"{local_partitions} partitions, or let the mirror create it (--create-topic, create_topic=True)"
                )
            count = self.options.partitions or local_partitions
            create_topic(self.config, topic, count, self.options.replication_factor)
        if self.options.partitioning == "preserve" and count < local_partitions:
            raise MirrorError(
                f"Kafka topic {topic!r} has {count} partitions and stream {self.stream_path!r} has "
                f"{local_partitions}: partitioning 'preserve' sends partition p to partition p. Add partitions "
                "to the topic, or use partitioning 'rehash' (Kafka's murmur2 of the key)"
            )
        return count

    def _checked_position(self, stream: StreamReader, partition: int, stored: Position | None) -> Position:
        """Where to ship partition ``partition`` from: its stored position, checked against the stream
        (``MirrorDivergedError`` if the stream no longer holds what was shipped), or ``start``'s."""
        reader = stream.partition(partition)
        oldest, end = reader.bounds()
        partitioning = self.options.partitioning
        if stored is None:
            start = self.options.start
            if start == "oldest":
                return Position(oldest, None, partitioning)
            if start == "newest":
                return Position(end, None, partitioning)
            if isinstance(start, int):
                if start > end:
                    raise MirrorError(f"start offset {start} is past the end of partition {partition} ({end})")
                return self._past_loss(partition, Position(start, None, partitioning), oldest)
            return Position(reader.offset_for_time(ns_from_datetime(start)), None, partitioning)
        if stored.partitioning != partitioning:
            raise MirrorError(
                f"the mirror of stream {self.stream_path!r} to Kafka topic {self.end.topic!r} placed records with "
                f"partitioning {stored.partitioning!r}; going on with {partitioning!r} would put a key's later "
                f"messages in another partition than its earlier ones. Keep partitioning {stored.partitioning!r}, "
                "or mirror to a new topic"
            )
        if end < stored.next_offset:
            raise MirrorDivergedError(
                f"partition {partition} of stream {self.stream_path!r} ends at offset {end}, but the mirror shipped "
                f"it up to {stored.next_offset} to Kafka topic {self.end.topic!r}: the stream lost records it had "
                "(a power cut with flush='async'), and new messages would take offsets Kafka already holds. "
                "Mirror the stream to a new topic, or write the lost messages again and mirror them to a new topic",
                partition=partition,
                offset=end,
            )
        if stored.crc is not None and stored.next_offset > 0 and oldest < stored.next_offset:
            last = reader.read_one(stored.next_offset - 1)
            if record_crc(last) != stored.crc:
                raise MirrorDivergedError(
                    f"the record at offset {stored.next_offset - 1} of partition {partition} of stream "
                    f"{self.stream_path!r} is not the one the mirror shipped to Kafka topic {self.end.topic!r} "
                    "(its CRC-32C differs): the stream lost records (a power cut with flush='async') and new "
                    "messages took their offsets. Nothing more is shipped: mirror the stream to a new topic",
                    partition=partition,
                    offset=stored.next_offset - 1,
                )
        elif stored.next_offset > 0 and oldest >= stored.next_offset:
            log.warning(
                "partition %d: the record before the mirror's position %d was removed by retention, so it "
                "cannot be compared with the one shipped",
                partition,
                stored.next_offset,
            )
        return self._past_loss(partition, stored, oldest)

    def _past_loss(self, partition: int, position: Position, oldest: int) -> Position:
        if position.next_offset >= oldest:
            return position
        gap = (partition, position.next_offset, oldest)
        if self.options.on_data_loss == "fail":
            raise MirrorError(
                f"partition {partition} of stream {self.stream_path!r}: offsets {position.next_offset}..{oldest - 1} "
                "were removed by retention before the mirror shipped them; on_data_loss='skip' "
                "(--on-data-loss skip) ships from the oldest record left"
            )
        log.warning("partition %d: offsets %d..%d were removed before shipping; skipped", *gap[:2], oldest - 1)
        self.status.skipped.append(gap)
        return Position(oldest, position.crc, position.partitioning)

    def _note_ends(self, stream: StreamReader) -> None:
        for partition in self.positions:
            self.status.ends[partition] = stream.partition(partition).bounds()[1]

    # -- running -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Ship until cancelled (or, with ``once``, until what was there at the start is shipped)."""
        while True:
            try:
                await self._session()
            except BaseExceptionGroup as group:
                error = _first_failure(group)
                if not isinstance(error, _Aborted):
                    raise error from None
                log.warning("a Kafka transaction was aborted; shipping again from the positions committed")
                continue
            await anyio.to_thread.run_sync(self._write_status, True)
            return

    async def _session(self) -> None:
        from .._async.consumer import Consumer

        send, receive = anyio.create_memory_object_stream[tuple[int, list[Message]]](8)
        batch_messages = self.options.batch_messages

        async def read_partition(partition: int, out: anyio.abc.ObjectSendStream[tuple[int, list[Message]]]) -> None:
            async with (
                out,
                Consumer(
                    self.stream_path,
                    partition=partition,
                    start=self.positions[partition].next_offset,
                    end="close" if self.options.once else "wait",
                    on_data_loss="raise" if self.options.on_data_loss == "fail" else "skip",
                ) as consumer,
            ):
                async for messages in consumer.batches(max_messages=batch_messages):
                    await out.send((partition, messages))
                for gap in consumer.skipped:
                    self.status.skipped.append(gap)

        async with anyio.create_task_group() as readers:
            for partition in self.positions:
                readers.start_soon(read_partition, partition, send.clone())
            send.close()
            async with receive:
                async for first in receive:
                    batch = [first]
                    count = len(first[1])
                    while count < batch_messages:
                        try:
                            more = receive.receive_nowait()
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                        batch.append(more)
                        count += len(more[1])
                    await self._ship(batch)

    async def _ship(self, batch: Sequence[tuple[int, list[Message]]]) -> None:
        positions: dict[int, Position] = {}
        for partition, messages in batch:
            last = messages[-1]
            positions[partition] = Position(last.offset + 1, record_crc(last), self.options.partitioning)
        await anyio.to_thread.run_sync(self._transaction, batch, positions)
        self.positions.update(positions)
        self.status.positions.update({p: position.next_offset for p, position in positions.items()})
        self.status.shipped += sum(len(messages) for _, messages in batch)
        self.status.updated = time.time()
        if self.status.updated - self._status_written >= STATUS_INTERVAL:
            await anyio.to_thread.run_sync(self._write_status, False)

    def _transaction(self, batch: Sequence[tuple[int, list[Message]]], positions: dict[int, Position]) -> None:
        """One Kafka transaction: the batch's records and its positions, committed together or not at all."""
        producer = self._producer
        assert producer is not None
        topic = self.end.topic
        preserve = self.options.partitioning == "preserve"
        try:
            producer.begin_transaction()
            for partition, messages in batch:
                to = partition if preserve else _UNASSIGNED
                for message in messages:
                    headers: list[tuple[str, str | bytes | None]] | None = None
                    if message.headers or message.tag is not None:
                        key, value, mapped, timestamp_ms = to_kafka(message)
                        headers = list(mapped)
                    else:  # the common case, without to_kafka's checks
                        key, value, timestamp_ms = message.key, message.value, message.timestamp_ns // 1_000_000
                    while True:
                        try:
                            producer.produce(topic, value, key, partition=to, timestamp=timestamp_ms, headers=headers)
                            break
                        except BufferError:  # librdkafka's queue is full: let it send, then again
                            producer.poll(0.05)
            for partition, position in positions.items():
                producer.produce(
                    self.options.state_topic, state_value(position), state_key(self.stream_id, topic, partition)
                )
            self._commit(producer)
        except confluent_kafka.KafkaException as error:
            self._failed(producer, error)

    @staticmethod
    def _commit(producer: confluent_kafka.Producer) -> None:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                producer.commit_transaction(TIMEOUT)
                return
            except confluent_kafka.KafkaException as error:
                kafka_error = error.args[0]
                if kafka_error.retriable() and time.monotonic() < deadline:
                    continue  # librdkafka's rule: a retriable commit may be called again
                raise

    def _failed(self, producer: confluent_kafka.Producer, error: confluent_kafka.KafkaException) -> None:
        kafka_error = error.args[0]
        self.status.last_error = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {kafka_error.str()}"
        if kafka_error.txn_requires_abort():
            producer.abort_transaction(TIMEOUT)
            raise _Aborted from None
        if kafka_error.fatal():
            raise MirrorError(
                f"the Kafka producer of the mirror stopped for good: {kafka_error.str()}. If another copy of this "
                "mirror started (it fences this one), that copy ships now; otherwise start the mirror again"
            ) from None
        raise MirrorError(f"shipping to Kafka topic {self.end.topic!r} failed: {kafka_error.str()}") from None

    def _write_status(self, final: bool) -> None:
        try:
            stream = StreamReader.open(self.stream_path)
            self._note_ends(stream)
        except (OSError, OffsetOutOfRangeError):
            pass
        self._status_written = time.time()
        write_status(self.stream_path, self.status, self.end.topic)
        if final:
            log.info("shipped %d messages to %s", self.status.shipped, self.end.url)

    # -- closing -----------------------------------------------------------------------------------

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await anyio.to_thread.run_sync(_flush_and_forget, producer)


def _first_failure(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The failure a task group's exceptions stand for: its first leaf that is not a cancellation
    (the readers cancelled because the shipping failed), else the first leaf."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop(0)
        if isinstance(error, BaseExceptionGroup):
            pending[:0] = error.exceptions
        else:
            leaves.append(error)
    cancelled = anyio.get_cancelled_exc_class()
    return next((leaf for leaf in leaves if not isinstance(leaf, cancelled)), leaves[0])


def _flush_and_forget(producer: confluent_kafka.Producer) -> None:
    # No transaction is open between batches; what a cancelled batch left open is aborted by the next
    # copy's init_transactions() (or the broker's transaction.timeout.ms), never read committed.
    producer.flush(1.0)
