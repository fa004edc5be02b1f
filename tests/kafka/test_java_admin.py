"""The Java AdminClient (4.x, the official jars) calls the admin APIs a one-broker Kafka serves —
DeleteRecords, IncrementalAlterConfigs, DescribeConfigs, OffsetDelete, DeleteGroups, CreateTopics
with a config — against the gateway on each backend and against Apache Kafka, and prints each
answer: the two must print the same (``java/AdminCalls.java``)."""

from __future__ import annotations

import pathlib
import uuid

import pytest
from conftest import RunningGateway
from java_support import compile_client, run_client
from support.kafka_broker import KafkaBroker


@pytest.fixture(scope="module")
def admin_calls(tmp_path_factory: pytest.TempPathFactory) -> list[pathlib.Path]:
    """``AdminCalls`` compiled against the 4.3.0 client: its class path."""
    return compile_client("4.3.0", tmp_path_factory.mktemp("java-admin"), program="AdminCalls")


def _answers(class_path: list[pathlib.Path], bootstrap: str) -> list[str]:
    name = f"java-admin-{uuid.uuid4().hex[:10]}"
    return [
        line.replace(name, "TOPIC")
        for line in run_client(class_path, bootstrap, name, f"g-{name}", program="AdminCalls")
    ]


def test_the_java_admin_client_gets_kafka_s_answers(
    gateway: RunningGateway, kafka_broker: KafkaBroker, admin_calls: list[pathlib.Path]
) -> None:
    from_gateway = _answers(admin_calls, gateway.bootstrap)
    from_kafka = _answers(admin_calls, kafka_broker.bootstrap)
    assert from_gateway == from_kafka
    assert from_gateway == [
        "created",
        "low watermark 3",
        "retention.bytes 1000000",
        "retention.ms 60000",
        "offsets left [TOPIC-1] 0",
        "group deleted",
        "again GroupIdNotFoundException",
    ]
