"""OpenTelemetry metrics and trace context, read back through the SDK's in-memory reader and exporter.

The SDK runs in a process of its own (tests/support/otel_probe.py): global providers are set once
per process, and a tracer provider would make every later push of this process carry a traceparent.

Local stream only here: the same metrics of a Kafka topic (README's capability table: metrics)
are read back in tests/kafka_backend/test_metrics_on_kafka.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support.paths import ROOT_DIR
from support.snippets import run_snippet

PROBE = os.path.join(ROOT_DIR, "tests", "support", "otel_probe.py")
BACKENDS = ["asyncio", "trio"]


@pytest.fixture(scope="module", params=BACKENDS)
def probe(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the probe's producer and group recorded, on each backend."""
    stream = os.fspath(tmp_path_factory.mktemp("otel") / "orders")
    done = subprocess.run(
        [sys.executable, PROBE, stream, request.param], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    result["stream"] = stream
    return result


def point(points: list[dict[str, Any]], name: str, **attributes: str) -> dict[str, Any]:
    """The one data point of ``name`` whose attributes include these (dots spelled as underscores)."""
    wanted = {key.replace("_", "."): value for key, value in attributes.items()}
    found = [p for p in points if p["name"] == name and wanted.items() <= p["attributes"].items()]
    assert len(found) == 1, (name, attributes, points)
    return found[0]


def test_pushes_are_counted_per_partition(probe: dict[str, Any]) -> None:
    """messaging.client.sent.messages counts push and push_many per stream and partition; the
    stream is named by its folder's name (one series however its path is spelled), its absolute
    path in an attribute beside it."""
    base = {"messaging_system": "adiskq", "messaging_destination_name": "orders", "adiskq_stream_path": probe["stream"]}
    sent = "messaging.client.sent.messages"
    assert point(probe["during"], sent, **base, messaging_destination_partition_id="0")["value"] == 4
    assert point(probe["during"], sent, **base, messaging_destination_partition_id="1")["value"] == 3


def test_deliveries_are_counted_per_partition_and_group(probe: dict[str, Any]) -> None:
    """messaging.client.consumed.messages counts what the group handed out, with its name."""
    consumed = "messaging.client.consumed.messages"
    for partition, count in (("0", 4), ("1", 3)):
        found = point(probe["after"], consumed, messaging_destination_partition_id=partition)
        assert found["value"] == count
        assert found["attributes"]["messaging.consumer.group.name"] == "billing"
        assert found["attributes"]["messaging.operation.type"] == "receive"


def test_push_and_flush_durations_are_recorded(probe: dict[str, Any]) -> None:
    """messaging.client.operation.duration (seconds) measures the first push (then one in 64), each
    push_many (two), and each flush."""
    duration = "messaging.client.operation.duration"
    send = point(probe["during"], duration, messaging_operation_name="send")
    assert (send["count"], send["unit"]) == (3, "s")
    assert point(probe["during"], duration, messaging_operation_name="flush")["count"] == 1


def test_lag_and_disk_usage_are_observed(probe: dict[str, Any]) -> None:
    """adiskq.consumer.lag is what follows the group's commits; disk usage is a fraction below the refusal level."""
    lag = "adiskq.consumer.lag"
    assert point(probe["after"], lag, messaging_destination_partition_id="0")["value"] == 2
    assert point(probe["after"], lag, messaging_destination_partition_id="1")["value"] == 1
    usage = point(probe["during"], "adiskq.disk.usage")["value"]
    assert 0 < usage < 1
    assert point(probe["during"], "adiskq.disk.refuse_writes_above")["value"] == 0.95
    assert not [p for p in probe["after"] if p["name"] == "adiskq.disk.usage"]  # the producer is closed


def test_a_trace_started_at_push_continues_where_the_message_is_processed(probe: dict[str, Any]) -> None:
    """push carries its send span's context as traceparent; context_of() makes the processing span its child."""
    trace_id = probe["request_trace_id"]
    assert probe["traceparent"].startswith(f"00-{trace_id:032x}-{probe['send_span_id']:016x}-")
    assert probe["send_kind"] == "PRODUCER"
    assert probe["bill_trace_id"] == trace_id
    assert probe["bill_parent"] == probe["send_span_id"]


def test_push_many_carries_the_trace_of_its_batch(probe: dict[str, Any]) -> None:
    """Each record of a push_many made inside a span carries that trace, beside its own headers."""
    assert probe["many_traceparent"].startswith(f"00-{probe['request_trace_id']:032x}-")
    assert probe["many_type"] == "t"


WITHOUT = textwrap.dedent(
    """
    import sys
    if sys.argv[2] == "missing":
        sys.modules["opentelemetry"] = None  # as if it were not installed: every import of it fails
    import anyio
    import adiskq

    async def main(path):
        async with adiskq.Producer(path) as producer:
            await producer.push(b"m", key="k")
            await producer.flush()
            hooked = sorted(set(vars(producer)) & {"push", "push_many", "flush"})
        async with adiskq.ConsumerGroup(path, "g", end="close") as group:
            [message] = [m async for m in group]
            hooked += ["_read_some"] if "_read_some" in vars(group) else []
        loaded = sorted(name for name, module in sys.modules.items() if name.startswith("opentelemetry") and module)
        print(hooked, loaded, dict(message.headers))

    anyio.run(main, sys.argv[1], backend=sys.argv[3])
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["missing", "off", "unused"])
def test_without_opentelemetry_nothing_is_imported_hooked_or_recorded(stream_path: str, backend: str, how: str) -> None:
    """Without the package, with ADISKQ_METRICS=off, or installed but not used by the program, no
    OpenTelemetry module is loaded, no push or read is wrapped, and messages carry no trace headers."""
    env = {**os.environ, "ADISKQ_METRICS": "off" if how == "off" else "on"}
    assert run_snippet(WITHOUT, stream_path, how, backend, env=env).split() == ["[]", "[]", "{}"]


UNSET = textwrap.dedent(
    """
    import sys
    import anyio
    import opentelemetry.metrics, opentelemetry.trace  # imported, and no provider set
    import adiskq

    async def main(path):
        async with adiskq.Producer(path) as producer:
            await producer.push(b"m", key="k")
            hooked = sorted(set(vars(producer)) & {"push", "push_many", "flush"})
        async with adiskq.Consumer(path, end="close") as consumer:
            [message] = [m async for m in consumer]
            hooked += ["_read_some"] if "_read_some" in vars(consumer) else []
        print(hooked, dict(message.headers))

    anyio.run(main, sys.argv[1], backend=sys.argv[2])
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_installed_but_unused_opentelemetry_costs_nothing(stream_path: str, backend: str) -> None:
    """With the package installed but no meter or tracer provider set, nothing is wrapped and no header added."""
    assert run_snippet(UNSET, stream_path, backend).split() == ["[]", "{}"]


SERIALIZED_AND_TRACED = textwrap.dedent(
    """
    import json, sys
    import anyio
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    import adiskq

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    trace.set_tracer_provider(TracerProvider())
    seen = []

    def serialize(value):
        seen.append(trace.get_current_span().get_span_context().is_valid)  # inside the send span?
        return json.dumps(value).encode()

    async def main(path):
        async with adiskq.Producer(path, value_serializer=serialize) as producer:
            await producer.push({"n": 1})
            await producer.push_many([adiskq.Record({"n": 2})])
        async with adiskq.Consumer(path, end="close") as consumer:
            stored = [(message.value.decode(), sorted(message.headers)) async for message in consumer]
        sent = [
            point.value
            for resource in reader.get_metrics_data().resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "messaging.client.sent.messages"
            for point in metric.data.data_points
        ]
        print(json.dumps({"seen": seen, "stored": stored, "sent": sent}))

    anyio.run(main, sys.argv[1], backend=sys.argv[2])
    """
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_serializers_run_inside_telemetry(stream_path: str, backend: str) -> None:
    """The wrappers' fixed order: telemetry outside (the send span is current while the value is
    serialized, so a serializer's time is the push's), serializers inside (the stored value is the
    serializer's bytes, carrying the span's context), every push counted."""
    found = json.loads(run_snippet(SERIALIZED_AND_TRACED, stream_path, backend))
    assert found["seen"] == [True, True]
    assert found["stored"] == [['{"n": 1}', ["traceparent"]], ['{"n": 2}', ["traceparent"]]]
    assert sum(found["sent"]) == 2
