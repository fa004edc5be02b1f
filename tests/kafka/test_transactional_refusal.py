"""A transactional producer is refused at once, with an error saying why, by every client:
librdkafka (confluent-kafka), kafka-python, aiokafka and the Java client (3.x and 4.x).

The gateway does not serve transactions: a producer configured with ``transactional.id`` must learn
that when it starts, as a final error, instead of retrying a coordinator that never comes until
its own timeout (what a retriable COORDINATOR_NOT_AVAILABLE made librdkafka do for the whole
``init_transactions`` timeout). An idempotent producer without a transactional id is unaffected.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import pathlib
import time
import warnings

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TransactionalIdAuthorizationFailed
from confluent_kafka import KafkaError, KafkaException, Producer
from conftest import call
from java_support import compile_client, run_client
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.types import TransactionalId

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")

_TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
# Far below the timeouts the clients are given: a refusal that waited for one would fail the test.
_PROMPT_SECONDS = 10.0


def test_confluent_init_transactions_fails_at_once_with_a_fatal_error(gateway) -> None:
    """librdkafka's ``init_transactions`` raises a fatal, non-retriable error naming the cause,
    well before its 60 s timeout."""
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "transactional.id": "refused-confluent"})
    started = time.monotonic()
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(60)
    elapsed = time.monotonic() - started
    error = raised.value.args[0]
    assert elapsed < _PROMPT_SECONDS, f"init_transactions took {elapsed:.1f}s to fail"
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert error.fatal()
    assert not error.retriable()
    assert "transactions are not served by this gateway" in error.str()


def test_aiokafka_transactional_producer_fails_to_start(gateway) -> None:
    """aiokafka's transactional producer fails its ``start`` with TransactionalIdAuthorizationFailed."""

    async def run() -> float:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap, transactional_id="refused-aiokafka")
        started = time.monotonic()
        try:
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await asyncio.wait_for(producer.start(), 60)
        finally:
            await producer.stop()
        return time.monotonic() - started

    elapsed = asyncio.run(run())
    assert elapsed < _PROMPT_SECONDS, f"start took {elapsed:.1f}s to fail"


def test_kafka_python_init_transactions_fails_at_once(gateway) -> None:
    """kafka-python's ``init_transactions`` raises TransactionalIdAuthorizationFailedError, well
    before its 60 s ``max_block_ms``."""
    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, transactional_id="refused-kp", max_block_ms=60_000)
    started = time.monotonic()
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
    finally:
        producer.close(timeout=5)
    elapsed = time.monotonic() - started
    assert elapsed < _PROMPT_SECONDS, f"init_transactions took {elapsed:.1f}s to fail"


def test_protocol_answers_for_a_transactional_id(gateway) -> None:
    """FindCoordinator for a transaction and InitProducerId with a transactional id both answer
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (final in every client); FindCoordinator says why. A group
    coordinator and an idempotent producer id are still served."""
    port = gateway.gateway.port
    answer = call(port, FindCoordinatorRequest(key_type=1, coordinator_keys=("t1",)))
    (coordinator,) = answer.coordinators
    assert coordinator.error_code.value == _TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert coordinator.error_message is not None
    assert "not served" in coordinator.error_message
    assert coordinator.node_id == -1
    group = call(port, FindCoordinatorRequest(key_type=0, coordinator_keys=("g1",))).coordinators[0]
    assert group.error_code.value == 0
    assert group.port == port
    refused = call(
        port,
        InitProducerIdRequest(transactional_id=TransactionalId("t1"), transaction_timeout=dt.timedelta(seconds=60)),
    )
    assert refused.error_code.value == _TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (refused.producer_id, refused.producer_epoch) == (-1, -1)
    idempotent = call(port, InitProducerIdRequest(transactional_id=None, transaction_timeout=dt.timedelta(seconds=60)))
    assert idempotent.error_code.value == 0
    assert idempotent.producer_id >= 0


@pytest.mark.parametrize("version", ["3.9.0", "4.3.0"])
def test_java_init_transactions_fails_at_once(gateway, version: str, tmp_path: pathlib.Path) -> None:
    """The Java client's ``initTransactions`` throws TransactionalIdAuthorizationException, well
    before its 60 s ``max.block.ms``."""
    cp = compile_client(version, tmp_path, "TransactionalRefusal")
    (line,) = run_client(cp, gateway.bootstrap, program="TransactionalRefusal")
    outcome, seconds, exception = line.split()[:3]
    assert outcome == "refused", line
    assert float(seconds) < _PROMPT_SECONDS, line
    assert exception == "TransactionalIdAuthorizationException", line
