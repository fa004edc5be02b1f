"""Differential tests: one scenario, run by a real client against the gateway and against Apache Kafka
(the ``kafka_broker`` fixture), and what the client observed compared.

A scenario is a function ``scenario(side) -> observation``: it drives a client at ``side.bootstrap``,
names its topics and groups with ``side.name(...)`` (each side and each test has its own), and
returns what the client saw, in a form that compares with ``==`` (offsets, keys, timestamps, error
codes...; never addresses, which differ). ``differential.run(scenario)`` gives both observations;
``differential.compare(scenario)`` asserts they are equal and returns Kafka's.

The gateway fixture runs each test on asyncio and on Trio; Kafka's observation does not depend on
the gateway's event loop, so it is taken once per test and kept for the other backend's run.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

# (test id without the gateway's backend) -> Kafka's observation, for the second backend's run.
_KAFKA_SEEN: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Side:
    """One of the two brokers a scenario runs against."""

    kind: str  # "gateway" or "kafka"
    bootstrap: str
    prefix: str  # unique to this side and test: every topic and group name starts with it

    @property
    def port(self) -> int:
        """The port of the (first) broker."""
        return int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])

    def name(self, what: str = "t") -> str:
        """A topic or group name of this test's own on this side."""
        return f"{self.prefix}-{what}"[:240]


class Differential:
    """Runs scenarios on both sides of one test."""

    def __init__(self, gateway: Any, kafka_bootstrap: str, request: pytest.FixtureRequest) -> None:
        params = dict(getattr(request.node, "callspec", None).params) if hasattr(request.node, "callspec") else {}
        params.pop("gateway", None)  # the gateway's backend: not part of what Kafka is asked
        key = request.node.originalname + "".join(f"-{params[name]}" for name in sorted(params))
        self.key = f"{request.node.path.stem}::{key}"
        label = re.sub(r"[^a-zA-Z0-9._-]", "-", key)[:150]
        self.gateway = Side("gateway", gateway.bootstrap, f"g-{gateway.backend}-{label}")
        self.kafka = Side("kafka", kafka_bootstrap, f"k-{label}")

    def run(self, scenario: Callable[[Side], T]) -> tuple[T, T]:
        """(what the client saw of the gateway, what it saw of Kafka)."""
        if self.key not in _KAFKA_SEEN:
            _KAFKA_SEEN[self.key] = scenario(self.kafka)
        seen_in_kafka: T = _KAFKA_SEEN[self.key]
        return scenario(self.gateway), seen_in_kafka

    def compare(self, scenario: Callable[[Side], T]) -> T:
        """Assert the client saw the same of both; Kafka's observation."""
        seen_in_gateway, seen_in_kafka = self.run(scenario)
        assert seen_in_gateway == seen_in_kafka, "the gateway (left) differs from Apache Kafka (right)"
        return seen_in_kafka


@pytest.fixture
def differential(gateway: Any, kafka_broker: Any, request: pytest.FixtureRequest) -> Differential:
    """Both sides of this test: the module's gateway (on its backend) and the run's Kafka node."""
    return Differential(gateway, kafka_broker.bootstrap, request)
