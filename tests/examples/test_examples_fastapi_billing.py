"""examples/fastapi_service.py's billing group, over HTTP: failed charges retried, hopeless orders dead-lettered."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from support.waiting import wait_for
from test_examples_fastapi import Service, service

import adiskq

pytestmark = pytest.mark.timeout(90)

__all__ = ["service"]  # the fixture, imported for the test below


def billing(running: Service) -> dict[str, Any]:
    answer = httpx.get(f"{running.url}/billing", timeout=10)
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()
    return state


def test_orders_are_charged_retried_and_dead_lettered(service: Service) -> None:
    """An order failing once is charged at its second attempt; one failing every time and one with
    no amount end up in the dead-letter stream with their reasons; other events are not billed."""
    service.post("order", {"id": 1, "amount": 5, "fails": 1}, key="customer-1")
    service.post("order", {"id": 2, "amount": -3}, key="customer-2")
    service.post("order", {"id": 3, "amount": 7, "fails": 5}, key="customer-3")
    service.post("signup", {"plan": "pro"}, key="customer-4")

    # Order 3 is dead-lettered last (after order 1 is charged): wait for the dead-letter stream's
    # second message, woken by its files.
    dead = f"{service.stream}.dead-letters"
    part = os.path.join(dead, "parts", "000000")
    wait_for(lambda: os.path.isdir(part), "the first dead letter", [os.path.dirname(service.stream)])
    wait_for(
        lambda: adiskq.stats(dead).partitions[0].next_offset == 2,
        "the second dead letter",
        [part],
        processes=[service.process],
        timeout=30,
    )
    state = billing(service)
    assert state["charged"] == [{"id": 1, "attempt": 2}]
    letters = {letter["order"]["id"]: letter for letter in state["dead_letters"]}
    assert letters[2]["reason"] == "order 2 has no positive amount"
    assert letters[2]["attempts"] == 1
    assert letters[3]["attempts"] == 3
    assert letters[3]["reason"].startswith("payment service unavailable (attempt 3)")
    assert service.stop() == 0
