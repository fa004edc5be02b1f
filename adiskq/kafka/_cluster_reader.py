"""What the Kafka backend's ``Consumer`` and ``ConsumerGroup`` share: a librdkafka consumer read
from AnyIO worker threads, its records handed out as ``Message`` through the readers' buffer.

A read asks librdkafka for one record for at most ``_POLL_SECONDS`` (so a cancelled read ends
within that), then takes whatever else it has fetched without waiting. Deserializers run as a local
reader runs them: a message one fails on raises ``DeserializationError`` and stays next.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import confluent_kafka

from .._async.arguments import check_on_data_loss, check_start, positive_seconds
from .._errors import ClosedError, DeserializationError, InvalidArgumentError, OffsetOutOfRangeError
from .._sansio.capabilities import refuse
from .._sansio.decoding import MessageDecoder
from .._sansio.values import Message
from ._cluster_client import KafkaTarget, target
from ._cluster_mapping import message_of

__all__ = ["KafkaReading", "check_reader_options"]

_POLL_SECONDS: Final = 0.1
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
        self.undelivered: list[Message[bytes, bytes]] = []  # read, not handed out (a deserializer failed on the first)
        self.positions: dict[int, int] = {}  # partition -> the offset after the last message handed out
        self.on_data_loss = "skip"
        self.last_batch: list[Message[Any, Any]] = []  # what the last read handed out (one partition's)

    def poll(self, max_messages: int, keep: Callable[[Message[bytes, bytes]], bool]) -> list[Message[bytes, bytes]]:
        """Up to ``max_messages`` records as messages (in a worker thread); ``keep`` drops those
        past an end. Waits ``_POLL_SECONDS`` at most when none has come."""
        client = self.client
        if client is None:
            raise ClosedError("closed while it was read")
        first = client.poll(_POLL_SECONDS)
        if first is None:
            return []
        records = [first]
        if max_messages > 1:
            records.extend(client.consume(max_messages - 1, 0))
        messages = []
        for record in records:
            error = record.error()
            if error is not None:
                if error.code() in _IGNORED:
                    continue
                if error.code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET:
                    raise OffsetOutOfRangeError(
                        f"Kafka topic {self.target.topic!r}: the next record to read is gone ({error.str()}); "
                        'open the reader with on_data_loss="skip" to read on from the oldest record kept'
                    )
                raise OSError(f"reading Kafka topic {self.target.topic!r}: {error.str()}")
            message = message_of(record)
            if keep(message):
                messages.append(message)
        return messages

    def deliver(self, messages: list[Message[bytes, bytes]], max_messages: int) -> list[Message[Any, Any]]:
        """``messages`` (after the undelivered ones) through the deserializers, up to ``max_messages``;
        the rest wait for the next read. ``DeserializationError`` when the first fails."""
        waiting = self.undelivered + messages if self.undelivered else messages
        # One partition's run at a time, as a local group's batches are: a reader's position in a
        # partition is then the batch's next message (``next_offsets``).
        run = 1
        while run < min(len(waiting), max_messages) and waiting[run].partition == waiting[0].partition:
            run += 1
        handed, self.undelivered = waiting[:run], waiting[run:]
        decoded: list[Message[Any, Any]] = handed
        if self.decoder is not None:
            decoded, failure = self.decoder.decode(handed)
            if failure is not None:
                self.undelivered = handed[len(decoded) :] + self.undelivered
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

    def drop_undelivered(self, partition: int | None = None) -> None:
        self.undelivered = [m for m in self.undelivered if partition is not None and m.partition != partition]

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()
