"""OpenTelemetry metrics and trace context, when ``opentelemetry-api`` is installed (``adiskq[otel]``).

Recorded on the global meter provider, after OpenTelemetry's messaging semantic conventions
(``messaging.system`` = ``adiskq``, the stream's path as ``messaging.destination.name``, the
partition as ``messaging.destination.partition.id``, a group's name as ``messaging.consumer.group.name``):

    messaging.client.sent.messages        counter, messages pushed (push, push_many)
    messaging.client.consumed.messages    counter, messages delivered by consumers and groups
    messaging.client.operation.duration   histogram (s) of push, push_many (operation "send") and
                                          flush (operation "flush", the fsync)
    adiskq.consumer.lag                   gauge per named group and partition it holds: messages
                                          after its committed offset
    adiskq.disk.usage                     gauge per producer's stream: the file system's use (0..1)
    adiskq.disk.refuse_writes_above       gauge: the level above which that producer refuses pushes

A producer's push also starts a ``send`` span (kind PRODUCER) and writes its context into the
message's headers as W3C ``traceparent`` (and ``tracestate``) when a tracer provider is set, so
``adiskq.otel.context_of(message)`` continues the trace where the message is processed.

The cost is decided once per object, when it is made: ``telemetry()`` is None where the package is
missing or ``ADISKQ_METRICS=off``, and where no meter or tracer provider has been set yet (the API's
own placeholders: many programs have ``opentelemetry-api`` installed without using it, FastAPI's
users for one), producers and readers install no hook at all — their hot paths are then the same
code as without this module. Nothing of OpenTelemetry is imported before a producer or reader is
made, nor ever where it is missing.
"""

from __future__ import annotations

import importlib.util
import os
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .._sansio.values import Message, Receipt, Record
    from .group import ConsumerGroup
    from .producer import Producer

__all__ = ["Telemetry", "telemetry"]

SYSTEM: Final = "adiskq"
# The semantic conventions' buckets for messaging.client.operation.duration, with finer ones below
# 5 ms in front: a push takes microseconds, an fsync a millisecond or so.
_DURATION_BUCKETS: Final = (
    0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.075,
    0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip

_UNSET: Final = object()
_instance: Telemetry | object | None = _UNSET


def telemetry() -> Telemetry | None:
    """The process's instruments if a producer or reader made now should record: OpenTelemetry is
    installed, ``ADISKQ_METRICS`` is not ``off``, and a meter or tracer provider has been set."""
    global _instance
    if _instance is _UNSET:
        enabled = os.environ.get("ADISKQ_METRICS", "on").lower() not in ("off", "0", "false", "no")
        _instance = Telemetry() if enabled and importlib.util.find_spec("opentelemetry") is not None else None
    instruments: Telemetry | None = _instance  # type: ignore[assignment]
    return instruments if instruments is not None and instruments.providers_set() else None


class Telemetry:
    """The instruments, and the open groups and producers the observable gauges report on."""

    def __init__(self) -> None:
        from opentelemetry import metrics, propagate, trace

        self._metrics = metrics
        self._trace = trace
        self._propagate = propagate
        self._placeholders = _placeholder_providers()
        meter = metrics.get_meter("adiskq")
        self.sent = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Messages pushed to a stream."
        )
        self.consumed = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Messages delivered to the application by consumers and consumer groups.",
        )
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a push, push_many or flush.",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self._groups: weakref.WeakSet[ConsumerGroup] = weakref.WeakSet()
        self._producers: weakref.WeakSet[Producer] = weakref.WeakSet()
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
            "messaging.system": SYSTEM,
            "messaging.destination.name": stream,
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

    def instrument_producer(self, producer: Producer) -> None:
        """Measure this producer's push, push_many and flush (instance attributes in front of the
        class's methods), and report its disk usage while it is open."""
        from .producer import Producer

        path = producer.path
        sent, duration = self.sent.add, self.duration.record
        send_attributes = self.attributes(path, "send")
        flush_attributes = self.attributes(path, "flush")
        by_partition: dict[int, dict[str, str]] = {}
        tracer = self._trace.get_tracer("adiskq")
        span_kind = self._trace.SpanKind.PRODUCER
        set_span_in_context, inject = self._trace.set_span_in_context, self._propagate.inject
        span_name = f"send {path}"

        def partition_attributes(partition: int) -> dict[str, str]:
            attributes = by_partition.get(partition)
            if attributes is None:
                attributes = by_partition[partition] = self.attributes(path, "send", partition)
            return attributes

        async def push(
            value: bytes,
            *,
            key: str | bytes | None = None,
            tag: str | None = None,
            headers: Mapping[str, bytes] | None = None,
            timestamp: Any = None,
        ) -> Receipt:
            span = tracer.start_span(span_name, kind=span_kind)
            try:
                if span.get_span_context().is_valid:  # a tracer provider is set: carry the context
                    carrier: dict[str, str] = {}
                    inject(carrier, context=set_span_in_context(span))
                    headers = {**(headers or {}), **{name: text.encode() for name, text in carrier.items()}}
                started = time.perf_counter()
                receipt = await Producer.push(producer, value, key=key, tag=tag, headers=headers, timestamp=timestamp)
                duration(time.perf_counter() - started, send_attributes)
                sent(1, partition_attributes(receipt.partition))
                return receipt
            finally:
                span.end()

        async def push_many(records: Iterable[Record | bytes]) -> list[Receipt]:
            started = time.perf_counter()
            receipts = await Producer.push_many(producer, records)
            duration(time.perf_counter() - started, send_attributes)
            counts: dict[int, int] = {}
            for receipt in receipts:
                counts[receipt.partition] = counts.get(receipt.partition, 0) + 1
            for partition, count in counts.items():
                sent(count, partition_attributes(partition))
            return receipts

        async def flush() -> None:
            started = time.perf_counter()
            await Producer.flush(producer)
            duration(time.perf_counter() - started, flush_attributes)

        producer.push = push  # type: ignore[method-assign]
        producer.push_many = push_many  # type: ignore[method-assign]
        producer.flush = flush  # type: ignore[method-assign]
        self._producers.add(producer)

    # -- readers ---------------------------------------------------------------------------------

    def watch_group(self, group: ConsumerGroup) -> None:
        """Report this named group's lag until ``unwatch_group``."""
        self._groups.add(group)

    def unwatch_group(self, group: ConsumerGroup) -> None:
        self._groups.discard(group)

    def counting_reads(
        self, read_some: Callable[[int], list[Message]], stream: str, group: str | None
    ) -> Callable[[int], list[Message]]:
        """``read_some`` that counts the messages it hands out, per partition."""
        by_partition: dict[int, dict[str, str]] = {}
        add = self.consumed.add

        def read_counted(max_messages: int) -> list[Message]:
            messages = read_some(max_messages)
            if messages:
                counts: dict[int, int] = {}
                for message in messages:
                    counts[message.partition] = counts.get(message.partition, 0) + 1
                for partition, count in counts.items():
                    attributes = by_partition.get(partition)
                    if attributes is None:
                        attributes = by_partition[partition] = self.attributes(stream, "receive", partition, group)
                    add(count, attributes)
            return messages

        return read_counted

    # -- observable gauges (called by the metric reader, perhaps in its own thread) ---------------

    def _observe_lag(self, options: object) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        for group in list(self._groups):
            for partition, lag in group._held_lag().items():
                yield Observation(lag, self.attributes(group.path, "receive", partition, group.name))

    def _open_producers(self) -> list[Producer]:
        return [producer for producer in list(self._producers) if producer._state == "open"]

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
            if producer.refuse_writes_above is not None:
                yield Observation(producer.refuse_writes_above, self._stream_attributes(producer.path))

    @staticmethod
    def _stream_attributes(path: str) -> dict[str, str]:
        return {"messaging.system": SYSTEM, "messaging.destination.name": path}


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
