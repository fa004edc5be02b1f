"""OpenTelemetry metrics and trace context, when ``opentelemetry-api`` is installed (``adiskq[otel]``).

Recorded on the global meter provider, after OpenTelemetry's messaging semantic conventions
(``messaging.system`` = ``adiskq``, the stream's name (its folder's) as ``messaging.destination.name``
and its absolute path as ``adiskq.stream.path``, the partition as ``messaging.destination.partition.id``,
a group's name as ``messaging.consumer.group.name``):

    messaging.client.sent.messages        counter, messages pushed (push, push_many)
    messaging.client.consumed.messages    counter, messages delivered by consumers and groups
    messaging.client.operation.duration   histogram (s) of push (one in PUSH_DURATION_SAMPLE), push_many
                                          (operation "send") and flush (operation "flush", the fsync)
    adiskq.consumer.lag                   gauge per named group and partition it holds: messages
                                          after its committed offset
    adiskq.disk.usage                     gauge per producer's stream: the file system's use (0..1)
    adiskq.disk.refuse_writes_above       gauge: the level above which that producer refuses pushes

A producer made after a tracer provider was set also starts a ``send`` span (kind PRODUCER) for
each ``push`` (one for each ``push_many``, whose records all carry it) and writes its context into
the message's headers as W3C ``traceparent`` (and ``tracestate``), so
``adiskq.otel.context_of(message)`` continues the trace where the message is processed. The message
counts are asynchronous counters over plain integers, reported when the reader collects: a
synchronous ``add`` costs the SDK more than a push.

The cost is decided once per object, when it is made: ``telemetry()`` is None with
``ADISKQ_METRICS=off``, and while the program has set no meter or tracer provider (it has not even
imported ``opentelemetry.metrics`` or ``.trace``, or they still hold the API's placeholders: many
programs have ``opentelemetry-api`` installed without using it, FastAPI's users for one). Producers
and readers then install no hook at all — their hot paths are the same code as without this module —
and adiskq imports nothing of OpenTelemetry, whether it is installed or not.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import operator
import os
import sys
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._sansio.capabilities import is_kafka_url

if TYPE_CHECKING:
    from .._sansio.values import Message, Receipt, Record

__all__ = ["ObservedGroup", "ObservedProducer", "Telemetry", "telemetry"]

SYSTEM: Final = "adiskq"
# The attribute beside messaging.destination.name (the stream's name) that tells streams of one name apart.
PATH_ATTRIBUTE: Final = "adiskq.stream.path"
# The semantic conventions' buckets for messaging.client.operation.duration, with finer ones below
# 5 ms in front: a push takes microseconds, an fsync a millisecond or so.
_DURATION_BUCKETS: Final = (
    0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.075,
    0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip

# A single push's duration is recorded for one push in this many (the first included): recording one
# costs the SDK more than the push. push_many and flush are recorded every time.
PUSH_DURATION_SAMPLE: Final = 64

logger: Final = logging.getLogger("adiskq")
_UNSET: Final = object()
_partition_of: Final = operator.itemgetter(0)  # of a Message or a Receipt (both tuples, partition first)
_instance: Telemetry | object | None = _UNSET


def telemetry() -> Telemetry | None:
    """The process's instruments if a producer or reader made now should record: ``ADISKQ_METRICS``
    is not ``off``, and the program has set a meter or tracer provider."""
    global _instance
    if _instance is _UNSET:
        if os.environ.get("ADISKQ_METRICS", "on").lower() in ("off", "0", "false", "no"):
            _instance = None
        elif not any(sys.modules.get(name) for name in ("opentelemetry.metrics", "opentelemetry.trace")):
            # Setting a provider imports one of these: a program that has not can have set none (yet),
            # and then adiskq imports nothing of OpenTelemetry either.
            return None
        else:
            try:
                _instance = Telemetry()
            except ImportError as error:  # an install this process cannot read (another user's venv)
                # Debug, not a warning: a command-line run as another user must print its one-line
                # error alone, and metrics it cannot import are metrics nobody asked this process for.
                logger.debug("adiskq: OpenTelemetry cannot be imported (%s); recording no metrics", error)
                _instance = None
    instruments: Telemetry | None = _instance  # type: ignore[assignment]
    return instruments if instruments is not None and instruments.providers_set() else None


_TallyKey = TypeVar("_TallyKey", bound=tuple[Any, ...])


class _Tally:
    """A count reported by an asynchronous counter, and the attributes it is reported with."""

    __slots__ = ("attributes", "count")

    def __init__(self, attributes: dict[str, str]) -> None:
        self.attributes = attributes
        self.count = 0


def _shared_tally(tallies: dict[_TallyKey, _Tally], key: _TallyKey, attributes: dict[str, str]) -> _Tally:
    """The tally of ``key`` in ``tallies``, made (reported with ``attributes``) if it is not there yet."""
    found = tallies.get(key)
    if found is None:
        found = tallies[key] = _Tally(attributes)
    return found


class ObservedProducer:
    """What telemetry reads of a producer, and all it reads: its stream's path, whether it is open
    (its pushes are being written), and the level above which it refuses writes. The producer makes
    one when it is made with telemetry on and keeps it; telemetry holds it weakly, so a producer
    dropped without closing stops being reported once it is collected."""

    __slots__ = ("__weakref__", "is_open", "path", "refuse_level")

    def __init__(self, path: str, is_open: Callable[[], bool], refuse_level: Callable[[], float | None]) -> None:
        self.path = path
        self.is_open = is_open
        self.refuse_level = refuse_level


class ObservedGroup:
    """What telemetry reads of a named consumer group: its stream's path, its name, and the lag of
    each partition it holds (``held_lag``: messages after the committed offset; called from the
    metric reader's thread, so it copies what it reads). Held weakly, as ``ObservedProducer``."""

    __slots__ = ("__weakref__", "held_lag", "name", "path")

    def __init__(self, path: str, name: str, held_lag: Callable[[], dict[int, int]]) -> None:
        self.path = path
        self.name = name
        self.held_lag = held_lag


def _observations(tallies: dict[Any, _Tally]) -> list[Any]:
    """An asynchronous counter's observations: each tally's count with its attributes."""
    from opentelemetry.metrics import Observation

    # A copy: the reader may collect in its own thread while a new tally is added.
    return [Observation(tally.count, tally.attributes) for tally in list(tallies.values())]


class Telemetry:
    """The instruments, and the open groups and producers the observable gauges report on."""

    def __init__(self) -> None:
        from opentelemetry import metrics, propagate, trace

        self._metrics = metrics
        self._trace = trace
        self._propagate = propagate
        self._placeholders = _placeholder_providers()
        meter = metrics.get_meter("adiskq")
        # The message counts are kept as plain integers and reported when the reader collects (an
        # asynchronous counter): a synchronous add costs the SDK some microseconds, more than a push.
        self._sent: dict[tuple[str, int], _Tally] = {}
        self._consumed: dict[tuple[str, int, str | None], _Tally] = {}
        meter.create_observable_counter(
            "messaging.client.sent.messages",
            callbacks=[self._observe_sent],
            unit="{message}",
            description="Messages pushed to a stream.",
        )
        meter.create_observable_counter(
            "messaging.client.consumed.messages",
            callbacks=[self._observe_consumed],
            unit="{message}",
            description="Messages delivered to the application by consumers and consumer groups.",
        )
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a push, push_many or flush.",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self._groups: weakref.WeakSet[ObservedGroup] = weakref.WeakSet()
        self._producers: weakref.WeakSet[ObservedProducer] = weakref.WeakSet()
        meter.create_observable_gauge(
            "adiskq.consumer.lag",
            callbacks=[self._observe_lag],
            unit="{message}",
            description="Messages after a named group's committed offset, per partition it holds.",
        )
        meter.create_observable_gauge(
            "adiskq.disk.usage",
            callbacks=[self._observe_disk],
            unit="1",
            description="Use of the stream's file system.",
        )
        meter.create_observable_gauge(
            "adiskq.disk.refuse_writes_above",
            callbacks=[self._observe_refuse_level],
            unit="1",
            description="The file system use above which the producer refuses pushes.",
        )

    def providers_set(self) -> bool:
        """Whether a meter or tracer provider has been set (not the API's placeholders)."""
        placeholders = self._placeholders
        return not (
            isinstance(self._metrics.get_meter_provider(), placeholders)
            and isinstance(self._trace.get_tracer_provider(), placeholders)
        )

    # -- attributes ------------------------------------------------------------------------------

    @staticmethod
    def attributes(
        stream: str, operation: str, partition: int | None = None, group: str | None = None
    ) -> dict[str, str]:
        """The semantic conventions' attributes of one operation on one stream (and partition, group)."""
        attributes = {
            **_destination(stream),
            "messaging.operation.name": operation,
            "messaging.operation.type": "send" if operation == "send" else "receive",
        }
        if operation not in ("send", "receive"):
            del attributes["messaging.operation.type"]
        if partition is not None:
            attributes["messaging.destination.partition.id"] = str(partition)
        if group is not None:
            attributes["messaging.consumer.group.name"] = group
        return attributes

    # -- producers -------------------------------------------------------------------------------

    def wrap_producer(
        self,
        observed: ObservedProducer,
        inner_push: Callable[..., Awaitable[Receipt]],
        inner_push_many: Callable[[Iterable[Any]], Awaitable[list[Receipt]]],
        inner_flush: Callable[[], Awaitable[None]],
    ) -> tuple[
        Callable[..., Awaitable[Receipt]],
        Callable[[Iterable[Any]], Awaitable[list[Receipt]]],
        Callable[[], Awaitable[None]],
    ]:
        """A producer's push, push_many and flush, measured (and traced, with a tracer provider):
        wrappers around the calls given (the producer's own, serializing already if it does), which
        the producer installs (``Producer._wrap``). Its disk usage is reported while ``observed``
        says it is open."""
        path = observed.path
        duration = self.duration.record
        send_attributes = self.attributes(path, "send")
        flush_attributes = self.attributes(path, "flush")
        tallies: dict[int, _Tally] = {}
        tracer = self._trace.get_tracer("adiskq")
        span_kind = self._trace.SpanKind.PRODUCER
        inject = self._propagate.inject
        span_name = f"send {path}"
        pushes = itertools.count()

        def tally(partition: int) -> _Tally:
            found = tallies.get(partition)
            if found is None:
                found = tallies[partition] = _shared_tally(
                    self._sent, (path, partition), self.attributes(path, "send", partition)
                )
            return found

        async def push(
            value: bytes,
            *,
            key: str | bytes | None = None,
            tag: str | None = None,
            headers: Mapping[str, bytes] | None = None,
            timestamp: Any = None,
        ) -> Receipt:
            if next(pushes) % PUSH_DURATION_SAMPLE:
                receipt = await inner_push(value, key=key, tag=tag, headers=headers, timestamp=timestamp)
            else:
                started = time.perf_counter()
                receipt = await inner_push(value, key=key, tag=tag, headers=headers, timestamp=timestamp)
                duration(time.perf_counter() - started, send_attributes)
            (tallies.get(receipt.partition) or tally(receipt.partition)).count += 1
            return receipt

        async def traced_push(
            value: bytes,
            *,
            key: str | bytes | None = None,
            tag: str | None = None,
            headers: Mapping[str, bytes] | None = None,
            timestamp: Any = None,
        ) -> Receipt:
            with tracer.start_as_current_span(span_name, kind=span_kind, end_on_exit=True) as span:
                if span.get_span_context().is_valid:  # sampled or not, its context travels on
                    carrier: dict[str, str] = {}
                    inject(carrier)
                    headers = {**(headers or {}), **{name: text.encode() for name, text in carrier.items()}}
                return await push(value, key=key, tag=tag, headers=headers, timestamp=timestamp)

        async def push_many(records: Iterable[Record | bytes]) -> list[Receipt]:
            started = time.perf_counter()
            receipts = await inner_push_many(records)
            duration(time.perf_counter() - started, send_attributes)
            for partition, count in collections.Counter(map(_partition_of, receipts)).items():
                tally(partition).count += count
            return receipts

        async def traced_push_many(records: Iterable[Record | bytes]) -> list[Receipt]:
            # One send span for the batch; every record carries its context.
            with tracer.start_as_current_span(span_name, kind=span_kind, end_on_exit=True) as span:
                items = list(records)
                if span.get_span_context().is_valid:
                    carrier: dict[str, str] = {}
                    inject(carrier)
                    context = {name: text.encode() for name, text in carrier.items()}
                    items = [_with_headers(item, context) for item in items]
                return await push_many(items)

        async def flush() -> None:
            started = time.perf_counter()
            await inner_flush()
            duration(time.perf_counter() - started, flush_attributes)

        # A tracer provider set now makes every push a span; without one, pushes skip the tracing API.
        traced = not isinstance(self._trace.get_tracer_provider(), self._placeholders)
        self._producers.add(observed)
        return (traced_push if traced else push), (traced_push_many if traced else push_many), flush

    # -- readers ---------------------------------------------------------------------------------

    def watch_group(self, observed: ObservedGroup) -> None:
        """Report this named group's lag until ``unwatch_group``."""
        self._groups.add(observed)

    def unwatch_group(self, observed: ObservedGroup | None) -> None:
        if observed is not None:
            self._groups.discard(observed)

    def counting_reads(
        self, read_some: Callable[[int], list[Message[Any, Any]]], stream: str, group: str | None
    ) -> Callable[[int], list[Message[Any, Any]]]:
        """``read_some`` that counts the messages it hands out, per partition."""
        tallies: dict[int, _Tally] = {}

        def tally(partition: int) -> _Tally:
            found = tallies.get(partition)
            if found is None:
                found = tallies[partition] = _shared_tally(
                    self._consumed, (stream, partition, group), self.attributes(stream, "receive", partition, group)
                )
            return found

        def read_counted(max_messages: int) -> list[Message]:
            messages = read_some(max_messages)
            if messages:
                partitions = set(map(_partition_of, messages))  # counted in C (measured: see RESULTS.md, F2)
                if len(partitions) == 1:
                    tally(partitions.pop()).count += len(messages)
                else:
                    for partition, count in collections.Counter(map(_partition_of, messages)).items():
                        tally(partition).count += count
            return messages

        return read_counted

    # -- observable gauges (called by the metric reader, perhaps in its own thread) ---------------

    def _observe_sent(self, options: object) -> Iterable[Any]:
        return _observations(self._sent)

    def _observe_consumed(self, options: object) -> Iterable[Any]:
        return _observations(self._consumed)

    def _observe_lag(self, options: object) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        for group in list(self._groups):
            for partition, lag in group.held_lag().items():
                yield Observation(lag, self.attributes(group.path, "receive", partition, group.name))

    def _open_producers(self) -> list[ObservedProducer]:
        return [producer for producer in list(self._producers) if producer.is_open()]

    def _observe_disk(self, options: object) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        from .._storage.stream import disk_usage

        for producer in self._open_producers():
            try:
                usage = disk_usage(producer.path)
            except OSError:
                continue
            if usage.total_bytes > 0:
                yield Observation(usage.used_bytes / usage.total_bytes, self._stream_attributes(producer.path))

    def _observe_refuse_level(self, options: object) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        for producer in self._open_producers():
            level = producer.refuse_level()
            if level is not None:
                yield Observation(level, self._stream_attributes(producer.path))

    @staticmethod
    def _stream_attributes(path: str) -> dict[str, str]:
        return _destination(path)


@functools.lru_cache(maxsize=256)
def _destination_of(path: str) -> tuple[tuple[str, str], ...]:
    if is_kafka_url(path):  # a topic of the Kafka backend: Kafka's system, the topic, the URL beside it
        topic = path.rsplit("/", 1)[-1]
        return (("messaging.system", "kafka"), ("messaging.destination.name", topic), (PATH_ATTRIBUTE, path))
    absolute = os.path.abspath(path)
    return (
        ("messaging.system", SYSTEM),
        ("messaging.destination.name", os.path.basename(absolute)),
        (PATH_ATTRIBUTE, absolute),
    )


def _destination(path: str) -> dict[str, str]:
    """The attributes naming a stream: its name (the folder's), one series however the path was
    spelled (``orders`` and ``/srv/orders``), and its absolute path beside it."""
    return dict(_destination_of(path))


def _placeholder_providers() -> tuple[type, ...]:
    """The API's own providers, in place until a program sets its own (which do nothing)."""
    from opentelemetry import metrics, trace

    placeholders: list[type] = [metrics.NoOpMeterProvider, trace.NoOpTracerProvider, trace.ProxyTracerProvider]
    try:  # the proxy the metrics API hands out before a provider is set has no public name
        from opentelemetry.metrics._internal import _ProxyMeterProvider

        placeholders.append(_ProxyMeterProvider)
    except ImportError:
        placeholders.append(type(metrics.get_meter_provider()))  # still the placeholder: nothing set yet
    return tuple(placeholders)


def _with_headers(item: Record | bytes, extra: Mapping[str, bytes]) -> Record | bytes:
    """A push_many item with these headers added (anything else is left for push_many to refuse)."""
    from .._sansio.values import Record

    if isinstance(item, Record):
        return item._replace(headers={**(item.headers or {}), **extra})
    if isinstance(item, bytes | bytearray | memoryview):
        return Record(bytes(item), headers=dict(extra))
    return item
