"""``adiskq.Producer("kafka://HOST:PORT/TOPIC", ...)``: the producer's API on a Kafka topic.

``Producer.__new__`` makes one of these for a ``kafka://`` URL, so the check costs a push
nothing: it happens once, when the producer is made. Every option is checked there, and one the
capability table (``_sansio/capabilities.py``) says Kafka lacks raises ``UnsupportedFeatureError``;
what needs the cluster's answer (``flush="sync"`` and the topic's ``min.insync.replicas``) is
checked when the producer opens, before any push.

The client is confluent-kafka (librdkafka), idempotent with ``acks=all``, driven from AnyIO worker
threads (docs/MIRROR.md, "The client", measured why). A push hands its record to librdkafka in
a worker thread and waits there for the broker's acknowledgement: it returns the record's
``Receipt`` once the broker has it, or raises, and nothing is left half done.
"""

from __future__ import annotations

import errno
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, Self

import anyio
import anyio.to_thread
import confluent_kafka

from .._async.batch_encoding import Timestamp
from .._async.batch_encoding import timestamp_ns as _timestamp_ns
from .._async.metrics import telemetry
from .._async.producer import Producer, PushKeyT, PushValueT
from .._async.producer import _observed as observed_producer
from .._errors import ClosedError, InvalidArgumentError, MessageTooLargeError, PartialWriteError
from .._sansio.capabilities import refuse
from .._sansio.naming import partition_for_key
from .._sansio.producer_options import check_producer_options
from .._sansio.values import Receipt, Record, Retention
from ._cluster_client import KafkaTarget, check_sync_flush, configured, ensure_topic, target
from ._cluster_mapping import Outgoing, outgoing
from ._mirror_kafka import TIMEOUT

__all__ = ["KafkaProducer"]

# What a local producer takes that shapes its files, and what each is called in the refusal.
_LOCAL_ONLY: Final = (
    "segment_size_bytes",
    "key_index",
    "mode",
    "lock_timeout",
    "refuse_writes_above",
    "flush_interval",
    "vacuum_interval",
    "zstd_dictionary",
    "max_message_bytes",
)
_TAKEN: Final = frozenset(
    {
        "partitions",
        "retention",
        "flush",
        "shared",
        "value_serializer",
        "key_serializer",
        "compression",
        "kafka",
        "partitioner",
        *_LOCAL_ONLY,
    }
)
# How long a push waits for its acknowledgement past librdkafka's own delivery timeout.
_DELIVERY_MARGIN: Final = 10.0
_DELIVERY_TIMEOUT_MS: Final = 120_000
_CLIENT_MAX_BYTES: Final = 1_000_000  # librdkafka's default message.max.bytes


class KafkaProducer(Producer[PushKeyT, PushValueT]):
    """A ``Producer`` of a Kafka topic (see ``adiskq.Producer`` and README's capability table)."""

    def __init__(self, path: str, **options: Any) -> None:
        unknown = set(options) - _TAKEN
        if unknown:
            raise TypeError(f"Producer() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        for name in _LOCAL_ONLY:
            if name in options and not (name == "refuse_writes_above" and options[name] is None):
                raise refuse("local stream options", asked=f"{name}=")
        partitions = options.get("partitions")
        if partitions is not None and (
            isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1
        ):
            raise InvalidArgumentError(f"partitions={partitions!r}: give a partition count of 1 or more")
        retention = options.get("retention")
        flush = options.get("flush", "async")
        shared = options.get("shared", False)
        compression = options.get("compression")
        check_producer_options(
            flush=flush,
            shared=shared,
            compression=compression,
            retention=retention,
            value_serializer=options.get("value_serializer"),
            key_serializer=options.get("key_serializer"),
        )
        if retention is not None and retention.max_disk_usage is not None:
            raise refuse("retention", asked="Retention(max_disk_usage=...)")
        partitioner: Literal["murmur2", "fnv1"] = options.get("partitioner") or "murmur2"
        if partitioner not in ("murmur2", "fnv1"):
            raise InvalidArgumentError(
                f'partitioner={partitioner!r}: give "murmur2" (the default on Kafka, as Java clients place keys) or '
                '"fnv1" (adiskq\'s placement, for a topic adiskq mirror fills with --partitioning preserve)'
            )
        self._target: KafkaTarget = target(path, options.get("kafka"))
        self._max_message_bytes = _client_max_bytes(self._target.config)
        self.path = path
        self.flush_mode = flush
        self.shared = shared
        self.partitioner = partitioner
        self.value_serializer: Callable[..., Any] | None = options.get("value_serializer")
        self.key_serializer: Callable[..., Any] | None = options.get("key_serializer")
        self.refuse_writes_above = None
        self._asked_partitions: int | None = partitions
        self._retention: Retention | None = retention
        self._compression_type = "zstd" if compression == "zstd" else "none"
        self._state: Literal["new", "open", "closing", "closed"] = "new"
        self._stream = None
        self._partition_count = 0
        self._client: confluent_kafka.Producer | None = None
        self._limiter = anyio.CapacityLimiter(16)
        self._random = random.Random()
        self._observed = None
        instruments = telemetry()
        if instruments is not None:  # decided once, as a local producer decides it
            self._observed = observed_producer(self)
            push, push_many, flush = instruments.wrap_producer(self._observed, self.push, self.push_many, self.flush)
            self.push = push  # type: ignore[method-assign,assignment]
            self.push_many = push_many  # type: ignore[method-assign,assignment]
            self.flush = flush  # type: ignore[method-assign,assignment]

    # -- opening and closing ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise ClosedError("a Producer is opened once; create a new one to write again")
        self._state = "open"
        try:
            with configured(self._target):
                self._partition_count, self._client = await anyio.to_thread.run_sync(self._open)
        except BaseException:
            self._state = "closed"
            raise
        return self

    def _open(self) -> tuple[int, confluent_kafka.Producer]:
        config = self._target.config
        count = ensure_topic(config, self._target.topic, self._asked_partitions, self._retention)
        if self.flush_mode == "sync":
            check_sync_flush(config, self._target.topic)
        client = confluent_kafka.Producer(
            {
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 1,
                "delivery.timeout.ms": _DELIVERY_TIMEOUT_MS,
                "compression.type": self._compression_type,
                **config,
                "partitioner": "murmur2_random",  # Java's placement of a key; a null key at random
            }
        )
        return count, client

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for every record handed to the client to be acknowledged, then let it go (also when cancelled)."""
        if self._state in ("closing", "closed"):
            await anyio.lowlevel.checkpoint()
            return
        self._state = "closing"
        client, self._client = self._client, None
        try:
            if client is not None:
                with anyio.CancelScope(shield=True):
                    left = await anyio.to_thread.run_sync(client.flush, TIMEOUT)
                if left:
                    raise OSError(
                        errno.ETIMEDOUT, f"{left} records were not acknowledged by Kafka within {TIMEOUT:.0f} s"
                    )
        finally:
            self._state = "closed"

    def _check_open(self) -> None:
        if self._state != "open":
            raise ClosedError(
                "the Producer is not open: use it inside `async with adiskq.Producer(url) as producer:`"
                if self._state == "new"
                else "this producer was closed; open a new Producer"
            )

    # -- writing ---------------------------------------------------------------------------------

    def _record(self, value: Any, key: Any, tag: object, headers: Any, timestamp: Timestamp) -> Outgoing:
        if self.value_serializer is not None:
            value = self.value_serializer(value)
        if key is not None and self.key_serializer is not None:
            key = self.key_serializer(key)
        timestamp_ns = time.time_ns() if timestamp is None else _timestamp_ns(timestamp)
        if headers is not None and not isinstance(headers, Mapping):
            raise TypeError(f"headers is a mapping of names to bytes, or adiskq.Headers, not {type(headers).__name__}")
        record = outgoing(value, key, tag, headers, timestamp_ns)
        size = len(record.value) + len(record.key or b"") + sum(len(n) + len(v or b"") for n, v in record.headers)
        if size > self._max_message_bytes:
            raise MessageTooLargeError(
                f"a record of {size} bytes is over the Kafka client's message.max.bytes ({self._max_message_bytes}); "
                "nothing was sent. Raise it in kafka= (and the topic's max.message.bytes), or send less"
            )
        return record

    async def push(
        self,
        value: PushValueT,
        *,
        key: PushKeyT | None = None,
        tag: str | None = None,
        headers: Mapping[str, bytes] | None = None,
        timestamp: Timestamp = None,
    ) -> Receipt:
        """Send one record; returns its ``Receipt(partition, offset)`` once the broker acknowledged it."""
        self._check_open()
        record = self._record(value, key, tag, headers, timestamp)
        (result,) = await anyio.to_thread.run_sync(self._send, [record], limiter=self._limiter)
        if isinstance(result, BaseException):
            raise result
        return result

    async def push_many(self, records: Iterable[Record[PushKeyT, PushValueT] | PushValueT]) -> list[Receipt]:
        """Send many records; receipts come back in the order given. Every record is checked before
        any is sent. Kafka acknowledges each record on its own: if some fail, ``PartialWriteError``
        says which were written (their receipts; None for the others)."""
        self._check_open()
        outgoing_records = []
        for item in records:
            if isinstance(item, Record):
                outgoing_records.append(self._record(item.value, item.key, item.tag, item.headers, item.timestamp))
            else:
                outgoing_records.append(self._record(item, None, None, None, None))
        if not outgoing_records:
            await anyio.lowlevel.checkpoint()
            return []
        results = await anyio.to_thread.run_sync(self._send, outgoing_records, limiter=self._limiter)
        failures = [result for result in results if isinstance(result, BaseException)]
        if not failures:
            return [result for result in results if isinstance(result, Receipt)]
        if len(failures) == len(results):
            raise failures[0]
        receipts = [result if isinstance(result, Receipt) else None for result in results]
        raise PartialWriteError(failures[0], receipts) from failures[0]

    def _partition_of(self, key: bytes | None) -> int:
        """The partition ``partitioner="fnv1"`` gives a record (adiskq's placement; a null key at random)."""
        if key is None:
            return self._random.randrange(self._partition_count)
        return partition_for_key(key, self._partition_count)

    def _send(self, records: list[Outgoing]) -> list[Receipt | BaseException]:
        """Hand ``records`` to librdkafka and wait for each one's acknowledgement (in a worker thread)."""
        client = self._client
        if client is None:
            raise ClosedError("this producer was closed; open a new Producer")
        results: list[Receipt | BaseException | None] = [None] * len(records)
        done = threading.Event()
        pending = [len(records)]

        def delivered(index: int) -> Callable[[Any, Any], None]:
            def report(error: Any, message: Any) -> None:
                results[index] = (
                    _failure(error) if error is not None else Receipt(message.partition(), message.offset())
                )
                pending[0] -= 1  # delivery reports run in whichever thread polls; the GIL orders these
                if pending[0] == 0:
                    done.set()

            return report

        topic = self._target.topic
        fnv1 = self.partitioner == "fnv1"
        for index, record in enumerate(records):
            extra: dict[str, Any] = {"partition": self._partition_of(record.key)} if fnv1 else {}
            while True:
                try:
                    client.produce(
                        topic,
                        record.value,
                        record.key,
                        headers=record.headers or None,  # type: ignore[arg-type]  # None values are Kafka's null
                        timestamp=record.timestamp_ms,
                        on_delivery=delivered(index),
                        **extra,
                    )
                    break
                except BufferError:  # librdkafka's queue is full: let it send, then hand it the record
                    client.poll(0.05)
                except confluent_kafka.KafkaException as error:
                    results[index] = _failure(error.args[0])
                    pending[0] -= 1
                    break
                except (TypeError, ValueError) as error:
                    results[index] = InvalidArgumentError(f"Kafka's client refused the record: {error}")
                    pending[0] -= 1
                    break
        if pending[0] == 0:
            done.set()
        deadline = time.monotonic() + _DELIVERY_TIMEOUT_MS / 1000 + _DELIVERY_MARGIN
        while not done.is_set():
            client.flush(0.1)  # sends at once (no linger) and serves the delivery reports
            if time.monotonic() > deadline:
                break
        return [
            result if result is not None else OSError(errno.ETIMEDOUT, "Kafka did not acknowledge the record in time")
            for result in results
        ]

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged."""
        self._check_open()
        client = self._client
        assert client is not None
        left = await anyio.to_thread.run_sync(client.flush, TIMEOUT, limiter=self._limiter)
        if left:
            raise OSError(errno.ETIMEDOUT, f"{left} records were not acknowledged by Kafka within {TIMEOUT:.0f} s")

    async def vacuum(self, retention: Retention | None = None) -> Any:
        raise refuse("vacuum()")

    @property
    def partitions(self) -> int:
        """The topic's partition count (0 until opened)."""
        return self._partition_count


def _client_max_bytes(config: Mapping[str, str]) -> int:
    """The largest record the client sends (librdkafka's message.max.bytes, 1,000,000 by default)."""
    given = config.get("message.max.bytes", str(_CLIENT_MAX_BYTES))
    try:
        return int(given)
    except ValueError:
        raise InvalidArgumentError(f"kafka={{'message.max.bytes': {given!r}}}: give a number of bytes") from None


def _failure(error: Any) -> BaseException:
    """librdkafka's error for a record as the exception a local push raises for the same cause."""
    code = error.code() if hasattr(error, "code") else None
    if code in (confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE, confluent_kafka.KafkaError.RECORD_LIST_TOO_LARGE):
        return MessageTooLargeError(
            f"Kafka refused the record as too large ({error.str()}): the topic's max.message.bytes and the client's "
            "message.max.bytes bound it"
        )
    text = error.str() if hasattr(error, "str") else str(error)
    return OSError(errno.EIO, f"Kafka did not take the record: {text}")
