"""Kafka transactions through the gateway with real clients: librdkafka (confluent-kafka), aiokafka,
kafka-python and the Java client (3.x and 4.x). A committed transaction is read by read_committed
and read_uncommitted consumers; an aborted one only by read_uncommitted ones; an open one holds
read_committed consumers at its first offset (the last stable offset); a zombie is fenced and its
transaction aborted; offsets sent in a transaction are committed with it; a transaction left open by
a gateway that stopped is aborted at the next start, and one aborted before a restart stays dropped
by read_committed consumers after it."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import time
import uuid
import warnings
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from anyio.from_thread import start_blocking_portal
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from conftest import call
from java_support import compile_client, run_client
from kio.schema.list_offsets.v5.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from adiskq.kafka import KafkaGateway

with warnings.catch_warnings():
    # kafka-python reads its schemas with importlib.resources.read_text, deprecated in 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer as KpConsumer
    from kafka import KafkaProducer as KpProducer
    from kafka import TopicPartition as KpTopicPartition

pytestmark = pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")

_SECONDS = 30.0


def read_to_end(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> tuple[list[tuple[int, bytes]], int]:
    """Every record a librdkafka consumer of ``isolation`` reads from the partition's start, and
    the offset at which it reached the end it may read (the LSO for read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + _SECONDS
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return got, message.offset()
            got.append((message.offset(), message.value()))
        raise AssertionError(f"the consumer did not reach the end of {topic} in {_SECONDS} s: {got}")
    finally:
        consumer.close()


def transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(_SECONDS)
    return producer


def test_confluent_commit_abort_and_an_open_transaction(gateway, topic: str) -> None:
    """Offsets: c0-c2 at 0-2, the commit marker at 3, a0-a2 at 4-6, the abort marker at 7, the open
    transaction's record at 8 (as Kafka numbers them). read_committed stops at 8 (the LSO) without
    the aborted records; read_uncommitted reads everything but the markers; committing the open
    transaction lets read_committed read it."""
    producer = transactional(gateway.bootstrap, f"t-{topic}")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"c%d" % i, partition=0)
    producer.commit_transaction(_SECONDS)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"a%d" % i, partition=0)
    producer.flush(_SECONDS)  # sent: librdkafka drops what it has not sent when it aborts
    producer.abort_transaction(_SECONDS)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0)
    producer.flush(_SECONDS)

    committed, stable_end = read_to_end(gateway.bootstrap, topic, "read_committed")
    assert committed == [(0, b"c0"), (1, b"c1"), (2, b"c2")]
    assert stable_end == 8
    uncommitted, end = read_to_end(gateway.bootstrap, topic, "read_uncommitted")
    assert uncommitted == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (4, b"a0"), (5, b"a1"), (6, b"a2"), (8, b"open")]
    assert end == 9

    producer.commit_transaction(_SECONDS)
    committed, stable_end = read_to_end(gateway.bootstrap, topic, "read_committed")
    assert committed == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (8, b"open")]
    assert stable_end == 10


def test_confluent_zombie_is_fenced_and_its_transaction_aborted(gateway, topic: str) -> None:
    """A second instance of the transactional id aborts the first's open transaction; the first's
    commit then fails with a fatal fencing error, and no read_committed consumer sees its record."""
    zombie = transactional(gateway.bootstrap, f"t-{topic}")
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(_SECONDS)
    successor = transactional(gateway.bootstrap, f"t-{topic}")
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(_SECONDS)
    assert raised.value.args[0].fatal()
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(_SECONDS)
    committed, _ = read_to_end(gateway.bootstrap, topic, "read_committed")
    assert [value for _, value in committed] == [b"successor"]


def test_confluent_consume_transform_produce_commits_offsets_with_the_output(gateway, topic: str) -> None:
    """send_offsets_to_transaction: the group's offset moves only when the transaction commits."""
    source = f"{topic}-in"
    plain = Producer({"bootstrap.servers": gateway.bootstrap})
    for i in range(4):
        plain.produce(source, b"in%d" % i, partition=0)
    plain.flush(_SECONDS)
    group = f"g-{topic}"
    consumer = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        producer = transactional(gateway.bootstrap, f"t-{topic}")
        for commit in (False, True):
            producer.begin_transaction()
            producer.produce(topic, b"out", partition=0)
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, 4)], consumer.consumer_group_metadata(), _SECONDS
            )
            if commit:
                producer.commit_transaction(_SECONDS)
            else:
                producer.abort_transaction(_SECONDS)
                (stored,) = consumer.committed([TopicPartition(source, 0)], _SECONDS)
                assert stored.offset < 0  # nothing committed by the aborted transaction
        (stored,) = consumer.committed([TopicPartition(source, 0)], _SECONDS)
        assert stored.offset == 4
    finally:
        consumer.close()


def test_aiokafka_transactions_and_read_committed(gateway, topic: str) -> None:
    async def run() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=gateway.bootstrap, transactional_id=f"t-{topic}")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait(topic, b"c%d" % i, partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aborted", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic, b"c3", partition=0)
        finally:
            await producer.stop()
        seen = []
        for isolation in ("read_committed", "read_uncommitted"):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=gateway.bootstrap, isolation_level=isolation, enable_auto_commit=False
            )
            await consumer.start()
            try:
                partition = AioTopicPartition(topic, 0)
                consumer.assign([partition])
                await consumer.seek_to_beginning(partition)
                end = (await consumer.end_offsets([partition]))[partition]
                values = []
                while await consumer.position(partition) < end:
                    batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), _SECONDS)
                    values += [record.value for records in batch.values() for record in records]
                seen.append(values)
            finally:
                await consumer.stop()
        return seen[0], seen[1]

    committed, uncommitted = asyncio.run(run())
    assert committed == [b"c0", b"c1", b"c2", b"c3"]
    assert uncommitted == [b"c0", b"c1", b"c2", b"aborted", b"c3"]


def test_kafka_python_transactions_and_read_committed(gateway, topic: str) -> None:
    producer = KpProducer(bootstrap_servers=gateway.bootstrap, transactional_id=f"t-{topic}", max_block_ms=30_000)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"c0", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    seen = {}
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KpConsumer(bootstrap_servers=gateway.bootstrap, isolation_level=isolation, enable_auto_commit=False)
        try:
            partition = KpTopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek_to_beginning(partition)
            end = consumer.end_offsets([partition])[partition]
            values: list[bytes] = []
            deadline = time.monotonic() + _SECONDS
            while consumer.position(partition) < end and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    values += [record.value for record in records]
            seen[isolation] = values
        finally:
            consumer.close()
    assert seen == {"read_committed": [b"c0"], "read_uncommitted": [b"c0", b"aborted"]}


@pytest.mark.parametrize("version", ["3.9.0", "4.3.0"])
def test_java_client_transactions(gateway, topic: str, version: str, tmp_path: pathlib.Path) -> None:
    """The Java client commits (with a group's offset), aborts, and its zombie is fenced."""
    cp = compile_client(version, tmp_path, "Transactions")
    lines = run_client(cp, gateway.bootstrap, topic, f"g-{topic}", program="Transactions")
    answers = dict(line.split(" ", 1) for line in lines)
    assert answers["fenced"] in ("ProducerFencedException", "InvalidProducerEpochException"), lines
    assert answers["committed"] == "c0,c1,c2", lines
    assert answers["uncommitted"] == "c0,c1,c2,a0,a1,zombie", lines
    assert answers["offset"] == "3", lines
    # The 4.x client uses transaction version 2 (KIP-890), which the gateway advertises: every ending
    # bumps the epoch (init 0, commit 1, abort 2, the zombie's abort 3, the successor's init 4);
    # 3.x uses version 1 (init 0, the zombie's abort 1, the successor's init 2).
    with open(os.path.join(gateway.root, "kafka-transactions.json")) as state:
        stored = json.load(state)["coordinator"]["transactions"][f"java-{topic}"]
    assert stored["epoch"] == (4 if version.startswith("4.") else 2)


def latest_offset(port: int, topic: str, isolation_level: int, timestamp: int = -1) -> int:
    """ListOffsets (v5) of partition 0 at ``timestamp`` (-1: the latest) for an isolation level."""
    answer = call(
        port,
        ListOffsetsRequest(
            replica_id=BrokerId(-1),
            isolation_level=i8(isolation_level),
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=(ListOffsetsPartition(partition_index=i32(0), timestamp=i64(timestamp)),),
                ),
            ),
        ),
    )
    partition = answer.topics[0].partitions[0]
    assert partition.error_code.value == 0, partition
    return int(partition.offset)


def test_list_offsets_answers_the_last_stable_offset_to_read_committed(gateway, topic: str) -> None:
    """With a transaction open from offset 2, read_committed's latest offset is 2 and a time finds
    nothing past it; read_uncommitted's is the high watermark. Once committed, both are the end."""
    port = gateway.gateway.port
    plain = Producer({"bootstrap.servers": gateway.bootstrap})
    for i in range(2):
        plain.produce(topic, b"p%d" % i, partition=0, timestamp=1_000 + i)
    plain.flush(_SECONDS)
    producer = transactional(gateway.bootstrap, f"t-{topic}")
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=0, timestamp=5_000)
    producer.flush(_SECONDS)
    assert latest_offset(port, topic, 1) == 2
    assert latest_offset(port, topic, 0) == 3
    assert latest_offset(port, topic, 1, timestamp=4_000) == -1
    assert latest_offset(port, topic, 0, timestamp=4_000) == 2
    assert latest_offset(port, topic, 1, timestamp=1_001) == 1
    producer.commit_transaction(_SECONDS)
    assert latest_offset(port, topic, 1) == latest_offset(port, topic, 0) == 4


@pytest.fixture(params=["asyncio", "trio"])
def restartable(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[object]:
    """Gateways started one after another on the same root: ``start()`` returns the bootstrap."""
    with start_blocking_portal(backend=str(request.param)) as portal:
        running: list[object] = []

        class Gateways:
            def start(self) -> str:
                self.stop()
                gateway = KafkaGateway(str(tmp_path), port=0)
                context = portal.wrap_async_context_manager(gateway)
                context.__enter__()
                running.append(context)
                return f"127.0.0.1:{gateway.port}"

            def stop(self) -> None:
                while running:
                    running.pop().__exit__(None, None, None)  # type: ignore[attr-defined]

        gateways = Gateways()
        try:
            yield gateways
        finally:
            gateways.stop()


def test_a_transaction_left_open_is_aborted_at_the_next_start(restartable) -> None:
    """The gateway stops while a transaction has records written: the next start writes its abort
    marker before it answers, so read_committed consumers read past it, without its records; a
    transaction aborted before the restart stays dropped too (found in the data, not in memory)."""
    bootstrap = restartable.start()
    producer = transactional(bootstrap, "t-restart")
    producer.begin_transaction()
    producer.produce("orders", b"committed", partition=0)
    producer.commit_transaction(_SECONDS)  # 0, its marker at 1
    producer.begin_transaction()
    producer.produce("orders", b"aborted", partition=0)
    producer.flush(_SECONDS)
    producer.abort_transaction(_SECONDS)  # 2, its marker at 3
    producer.begin_transaction()
    producer.produce("orders", b"left-open", partition=0)
    producer.flush(_SECONDS)  # 4
    _, stable_end = read_to_end(bootstrap, "orders", "read_committed")
    assert stable_end == 4
    del producer  # (never told: its gateway went away)

    bootstrap = restartable.start()
    committed, stable_end = read_to_end(bootstrap, "orders", "read_committed")
    assert committed == [(0, b"committed")]
    assert stable_end == 6  # past the abort marker at 5
    uncommitted, _ = read_to_end(bootstrap, "orders", "read_uncommitted")
    assert uncommitted == [(0, b"committed"), (2, b"aborted"), (4, b"left-open")]
