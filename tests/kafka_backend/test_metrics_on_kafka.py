"""OpenTelemetry on the Kafka backend: the probe that tests/async/test_metrics.py runs on a stream,
run on a Kafka topic. Pushes and deliveries are counted, a push's trace continues where its message
is processed, and the group's lag is observed, with Kafka as the messaging system and the topic as
the destination. (The disk gauges are the local stream's: a topic has no local disk to report.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from support.paths import ROOT_DIR

PROBE = os.path.join(ROOT_DIR, "tests", "support", "otel_probe.py")


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def probe(request: pytest.FixtureRequest, kafka_broker: Any) -> dict[str, Any]:
    topic = f"otel-{uuid.uuid4().hex[:10]}"
    url = f"kafka://{kafka_broker.bootstrap}/{topic}"
    done = subprocess.run(
        [sys.executable, PROBE, url, request.param], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    result["topic"], result["url"] = topic, url
    return result


def _points(points: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [p for p in points if p["name"] == name]


def test_pushes_and_deliveries_are_counted_under_the_topic(probe: dict[str, Any]) -> None:
    sent = _points(probe["during"], "messaging.client.sent.messages")
    assert sum(p["value"] for p in sent) == 7
    consumed = _points(probe["after"], "messaging.client.consumed.messages")
    assert sum(p["value"] for p in consumed) == 7
    for point in sent + consumed:
        assert point["attributes"]["messaging.system"] == "kafka"
        assert point["attributes"]["messaging.destination.name"] == probe["topic"]
    assert {p["attributes"]["messaging.consumer.group.name"] for p in consumed} == {"billing"}


def test_a_trace_started_at_push_continues_where_the_message_is_processed(probe: dict[str, Any]) -> None:
    assert probe["traceparent"]
    assert probe["bill_trace_id"] == probe["request_trace_id"]
    assert probe["bill_parent"] == probe["send_span_id"]
    assert probe["many_type"] == "t"


def test_the_group_lag_is_observed(probe: dict[str, Any]) -> None:
    lag = _points(probe["after"], "adiskq.consumer.lag")
    assert lag
    assert {p["attributes"]["messaging.consumer.group.name"] for p in lag} == {"billing"}
    assert sum(p["value"] for p in lag) == 7 - 2  # the probe commits the first two of one partition
