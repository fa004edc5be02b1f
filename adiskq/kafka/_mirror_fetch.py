"""Kafka → local: a topic copied into a stream, its position kept in the stream itself.

Each local record carries the Kafka offset it came from in the header ``adiskq.kafka.offset``
(``_mirror_mapping.py``); Kafka partition p goes to local partition p, and what one fetch brought
of a partition is one write of that partition's share, which adiskq commits whole or not at all.
So the last record of local partition p says where Kafka partition p stands, and a restart resumes
after it: nothing lost, nothing twice, also when a power cut took back the stream's tail (those
records are fetched again). The mirror writes the stream as its one producer, so nothing else
puts records between its own.
"""

from __future__ import annotations

import logging
import time
from typing import Final

import anyio
import anyio.to_thread
import confluent_kafka

from .._errors import InvalidArgumentError, MirrorError, StreamNotFoundError
from .._sansio.values import Record, ns_from_datetime
from .._storage.stream import StreamReader
from ._mirror_config import KafkaEnd
from ._mirror_kafka import TIMEOUT, partition_count, watermarks
from ._mirror_mapping import local_record, offset_of
from ._mirror_options import MirrorOptions, MirrorStatus, write_status

__all__ = ["Fetcher"]

log = logging.getLogger("adiskq.mirror")
STATUS_INTERVAL: Final = 1.0
POLL_SECONDS: Final = 0.2  # the longest one consume() call waits: how soon a cancellation is seen


class Fetcher:
    """The Kafka → local mirror: ``open()`` (the topic, the stream, the positions), ``run()``, ``close()``."""

    def __init__(self, end: KafkaEnd, stream_path: str, options: MirrorOptions) -> None:
        if options.partitioning != "preserve":
            raise InvalidArgumentError(
                "partitioning='rehash' applies to a mirror to Kafka: from Kafka, partition p goes to partition p, "
                "so that each local partition's last record says where its Kafka partition stands"
            )
        self.end = end
        self.stream_path = stream_path
        self.options = options
        self.config = {**options.kafka_config, "bootstrap.servers": end.bootstrap}
        self.status = MirrorStatus("from-kafka", end.url, stream_path)
        self.positions: dict[int, int] = {}  # the next Kafka offset, by partition (-2: oldest, -1: newest)
        self._producer: object = None
        self._kafka_headers = False  # whether the stream holds adiskq.Headers (format 5): known once opened
        self._consumer: confluent_kafka.Consumer | None = None
        self._status_written = 0.0

    async def open(self) -> None:
        from .._async.partition_writes import opened
        from .._async.producer import Producer

        partitions = await anyio.to_thread.run_sync(partition_count, self.config, self.end.topic)
        if partitions is None:
            raise MirrorError(f"Kafka topic {self.end.topic!r} does not exist on {self.end.bootstrap}")
        local = await anyio.to_thread.run_sync(_local_partitions, self.stream_path)
        if local is not None and local > partitions:
            log.info(
                "stream %s has more partitions than topic %s; the extra ones stay empty",
                self.stream_path,
                self.end.topic,
            )
        producer = await opened(Producer(self.stream_path, partitions=max(partitions, local or 0)))
        self._producer = producer
        # A format-5 stream stores Kafka's header lists as they are (repeated names, nulls).
        settings = producer.settings
        self._kafka_headers = settings is not None and settings.holds_kafka_headers
        try:
            await anyio.to_thread.run_sync(self._find_positions, partitions)
        except BaseException:
            await self.close()
            raise

    def _find_positions(self, partitions: int) -> None:
        stream = StreamReader.open(self.stream_path)
        starts = self._starts(partitions)
        for partition in range(partitions):
            reader = stream.partition(partition)
            oldest, end = reader.bounds()
            if end == 0:
                self.positions[partition] = starts[partition]
                continue
            if oldest >= end:
                raise MirrorError(
                    f"partition {partition} of stream {self.stream_path!r} has had every record removed by retention, "
                    "so nothing says where its Kafka partition stands: mirror into a new stream"
                )
            last = reader.read_one(end - 1)
            offset = offset_of(last)
            if offset is None:
                raise MirrorError(
                    f"the last record of partition {partition} of stream {self.stream_path!r} (offset {end - 1}) has "
                    "no 'adiskq.kafka.offset' header: something other than the mirror wrote it, so nothing says "
                    "where the Kafka topic stands. Mirror into a new stream"
                )
            self.positions[partition] = offset + 1
        self.status.positions = {p: max(o, 0) for p, o in self.positions.items()}

    def _starts(self, partitions: int) -> dict[int, int]:
        """Where each Kafka partition is read from when its local partition is empty."""
        start = self.options.start
        if start == "oldest":
            return dict.fromkeys(range(partitions), confluent_kafka.OFFSET_BEGINNING)
        if start == "newest":
            return {p: high for p, (_, high) in enumerate(watermarks(self.config, self.end.topic, partitions))}
        if isinstance(start, int):
            return dict.fromkeys(range(partitions), start)
        consumer = confluent_kafka.Consumer({**self.config, "group.id": "adiskq-mirror-times"})
        try:
            found = consumer.offsets_for_times(
                [
                    confluent_kafka.TopicPartition(self.end.topic, p, ns_from_datetime(start) // 1_000_000)
                    for p in range(partitions)
                ],
                timeout=TIMEOUT,
            )
        finally:
            consumer.close()
        return {tp.partition: (confluent_kafka.OFFSET_END if tp.offset < 0 else tp.offset) for tp in found}

    async def run(self) -> None:
        """Copy until cancelled (or, with ``once``, until every partition reached its end)."""
        consumer = confluent_kafka.Consumer(
            {
                "fetch.wait.max.ms": 100,
                **self.config,
                "group.id": f"adiskq-mirror-{self.end.topic}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
        self._consumer = consumer
        consumer.assign([confluent_kafka.TopicPartition(self.end.topic, p, o) for p, o in self.positions.items()])
        # With once, the end is every record written when the mirror starts (the high watermark):
        # a read-committed reader gets past it once the transactions open then have ended.
        ends = None
        if self.options.once:
            marks = await anyio.to_thread.run_sync(
                lambda: watermarks(self.config, self.end.topic, len(self.positions), committed=False)
            )
            ends = {p: high for p, (_, high) in enumerate(marks)}
        while ends is None or not self._reached(consumer, ends):
            messages = await anyio.to_thread.run_sync(consumer.consume, self.options.batch_messages, POLL_SECONDS)
            shares: dict[int, list[Record]] = {}
            lost: list[int] = []
            for message in messages:
                error = message.error()
                partition, offset = message.partition(), message.offset()
                if error is not None:
                    if self._on_error(consumer, error, partition, offset):
                        assert partition is not None
                        lost.append(partition)
                    continue
                assert partition is not None  # a consumed record has both
                assert offset is not None
                share = shares.get(partition)
                if share is None:
                    share = shares[partition] = []
                raw_headers = message.headers()
                share.append(
                    local_record(
                        message.key(),
                        message.value(),
                        None if raw_headers is None else _headers(raw_headers),
                        message.timestamp()[1],
                        offset,
                        kafka_headers=self._kafka_headers,
                    )
                )
            for partition, records in shares.items():
                await self._write(partition, records)
            if lost:  # after the writes, so that every position is what the stream holds
                await anyio.to_thread.run_sync(self._past_loss, consumer, lost)
            if time.time() - self._status_written >= STATUS_INTERVAL:
                await anyio.to_thread.run_sync(self._write_status)
        await anyio.to_thread.run_sync(self._write_status)

    def _reached(self, consumer: confluent_kafka.Consumer, ends: dict[int, int]) -> bool:
        """Whether every partition was read up to ``ends`` (an empty partition's end is 0)."""
        partitions = [confluent_kafka.TopicPartition(self.end.topic, p) for p in self.positions]
        for tp in consumer.position(partitions):
            position = tp.offset if tp.offset >= 0 else max(self.positions[tp.partition], 0)
            if position < ends[tp.partition]:
                return False
        return True

    async def _write(self, partition: int, records: list[Record]) -> None:
        from .._async.partition_writes import write
        from .._async.producer import Producer

        producer = self._producer
        assert isinstance(producer, Producer)
        # One partition's share: written whole or not at all, with its last record's offset header
        # the new position.
        await write(producer, partition, records)
        last = records[-1].headers
        assert last is not None
        self.positions[partition] = int(last["adiskq.kafka.offset"]) + 1
        self.status.positions[partition] = max(self.status.positions.get(partition, 0), self.positions[partition])
        self.status.shipped += len(records)
        self.status.updated = time.time()

    def _on_error(
        self,
        consumer: confluent_kafka.Consumer,
        error: confluent_kafka.KafkaError,
        partition: int | None,
        offset: int | None,
    ) -> bool:
        """An event in the consumer's stream instead of a record: a partition's end, a position
        retention removed (True: ``_past_loss`` decides), or a failure (librdkafka retries the ones
        it can by itself)."""
        code = error.code()
        if code == confluent_kafka.KafkaError._PARTITION_EOF and partition is not None and offset is not None:
            # The end may lie past the last record copied (a transaction's marker, aborted records):
            # the status counts no lag for those; the position to resume from stays.
            tp = confluent_kafka.TopicPartition(self.end.topic, partition)
            _, stable = consumer.get_watermark_offsets(tp, cached=True)
            self.status.positions[partition] = max(self.positions[partition], offset, stable)
            return False
        # With auto.offset.reset=error, librdkafka reports a position retention removed as
        # _AUTO_OFFSET_RESET (the broker's OFFSET_OUT_OF_RANGE behind it).
        if code in (confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE, confluent_kafka.KafkaError._AUTO_OFFSET_RESET):
            return partition is not None
        self.status.last_error = f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {error.str()}"
        if error.fatal():
            raise MirrorError(f"reading Kafka topic {self.end.topic!r}: {error.str()}")
        log.warning("reading Kafka topic %s: %s", self.end.topic, error.str())
        return False

    def _past_loss(self, consumer: confluent_kafka.Consumer, partitions: list[int]) -> None:
        """Partitions whose position retention removed: fail, or go on from their oldest record."""
        marks = watermarks(self.config, self.end.topic, len(self.positions), committed=False)
        for partition in partitions:
            low, high = marks[partition]
            position = max(self.positions[partition], 0)
            if position > high:
                raise MirrorError(
                    f"partition {partition} of Kafka topic {self.end.topic!r} ends at offset {high}, before the "
                    f"{position} the mirror copied: the topic was deleted and made again, or is another one. "
                    "Copy it into a new stream"
                )
            if position >= low:
                continue  # not lost (the records came back into range): read on from there
            if self.options.on_data_loss == "fail":
                raise MirrorError(
                    f"partition {partition} of Kafka topic {self.end.topic!r} no longer holds offset {position} (it "
                    f"holds {low}..{high - 1}): retention removed records before the mirror copied them; "
                    "on_data_loss='skip' (--on-data-loss skip) goes on from the oldest one"
                )
            log.warning(
                "partition %d: Kafka offsets %d..%d were removed before copying; skipped", partition, position, low - 1
            )
            self.status.skipped.append((partition, position, low))
            self.positions[partition] = low
        # Everything consumed is written: every partition starts again where the stream ends.
        consumer.assign([confluent_kafka.TopicPartition(self.end.topic, p, o) for p, o in self.positions.items()])

    def _write_status(self) -> None:
        try:
            ends = watermarks(self.config, self.end.topic, len(self.positions))
            self.status.ends = {p: high for p, (_, high) in enumerate(ends)}
        except MirrorError as error:
            self.status.last_error = str(error)
        self._status_written = time.time()
        write_status(self.stream_path, self.status, self.end.topic)

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await anyio.to_thread.run_sync(consumer.close)
        producer, self._producer = self._producer, None
        if producer is not None:
            from .._async.producer import Producer

            assert isinstance(producer, Producer)
            await producer.aclose()


def _headers(
    headers: dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]],
) -> list[tuple[str, bytes | None]]:
    """A consumed message's headers: librdkafka hands them as a list of (name, bytes or None)."""
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in pairs]


def _local_partitions(stream_path: str) -> int | None:
    try:
        return StreamReader.open(stream_path).partition_count
    except StreamNotFoundError:
        return None
