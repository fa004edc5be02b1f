"""A process that pushes and consumes with OpenTelemetry's SDK as the global meter and tracer
providers, and prints what the SDK's in-memory reader and exporter got, as JSON.

    python tests/support/otel_probe.py STREAM BACKEND

Its own process, because the global providers can be set once per process, and a tracer provider
makes every later push carry a ``traceparent`` header.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adiskq
import adiskq.otel

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
exporter = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(tracer_provider)


def points() -> list[dict[str, Any]]:
    """Every data point the reader collects now: metric name, attributes, and value (or count)."""
    found = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    found.append(
                        {
                            "name": metric.name,
                            "unit": metric.unit,
                            "attributes": dict(point.attributes or {}),
                            "value": value if value is not None else None,
                            "count": getattr(point, "count", None),
                        }
                    )
    return found


async def main(path: str) -> dict[str, Any]:
    tracer = trace.get_tracer("probe")
    async with adiskq.Producer(path, partitions=2) as producer:
        for i in range(3):
            await producer.push(b"single %d" % i, key="a")  # key "a": one partition
        await producer.push_many([adiskq.Record(b"many", key="b"), adiskq.Record(b"many", key="b")])
        with tracer.start_as_current_span("request") as request:
            traced = await producer.push(b"traced", key="a")
            await producer.push_many([adiskq.Record(b"traced many", key="b", headers={"type": b"t"})])
        await producer.flush()
        during = points()  # the producer is open: its disk gauges report
    async with adiskq.ConsumerGroup(path, "billing") as group:
        seen = []
        with anyio.fail_after(10):
            async for message in group:
                seen.append(message)
                if message.offset < 2:
                    group.commit(message)
                if len(seen) == 7:
                    break
        await group.flush()
        after = points()
        carried = next(m for m in seen if m.value == b"traced")
        with tracer.start_as_current_span("bill", context=adiskq.otel.context_of(carried)) as bill:
            pass
    trace_id = request.get_span_context().trace_id
    send, _ = [  # the push's, then the push_many's
        span
        for span in exporter.get_finished_spans()
        if span.name == f"send {path}" and span.context is not None and span.context.trace_id == trace_id
    ]
    return {
        "during": during,
        "after": after,
        "traced": list(traced),
        "traceparent": carried.headers.get("traceparent", b"").decode(),
        "many_traceparent": next(m for m in seen if m.value == b"traced many").headers["traceparent"].decode(),
        "many_type": next(m for m in seen if m.value == b"traced many").headers["type"].decode(),
        "request_trace_id": request.get_span_context().trace_id,
        "bill_trace_id": bill.get_span_context().trace_id,
        "bill_parent": bill.parent.span_id if bill.parent else None,  # type: ignore[attr-defined]
        "send_span_id": send.context.span_id if send.context is not None else None,
        "send_kind": send.kind.name,
        "untraced_headers": sorted(next(m for m in seen if m.value == b"single 0").headers),
    }


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], backend=sys.argv[2])))
