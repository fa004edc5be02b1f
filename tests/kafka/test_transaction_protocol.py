"""The transaction coordinator's APIs as a client sends them (FindCoordinator for a transactional
id, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, OffsetFetch's
require_stable), answered as Kafka answers them; its state kept across a restart and the
transactions left open aborted then; a hung transaction aborted at its timeout; transaction version 2
(KIP-890: EndTxn v5, TxnOffsetCommit v5, Produce v12)."""

from __future__ import annotations

import datetime as dt
import errno
import importlib
import json
import logging
import os
import pathlib
import time
from collections.abc import Iterator

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from conftest import call
from differential import Side
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnRequest as AddPartitionsV1
from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnTopic as AddPartitionsTopicV1
from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnV5
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v5.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequest as TxnOffsetCommitV5
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequestPartition as TxnOffsetCommitV5Partition
from kio.schema.txn_offset_commit.v5.request import TxnOffsetCommitRequestTopic as TxnOffsetCommitV5Topic
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i64
from transaction_support import COMMITTED, UNCOMMITTED, read_to_end

from adiskq.kafka import KafkaGateway, _transactions
from adiskq.kafka._search_progress import SearchProgress
from adiskq.kafka.transaction_coordinator import Markers, TransactionCoordinator, TransactionCoordinatorStateError
from adiskq.kafka.wire import codec as kafka_codec
from adiskq.kafka.wire.codec import KafkaRecord

NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
OPERATION_NOT_ATTEMPTED = 55
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90


def create_topic(port: int, name: str, partitions: int = 1) -> None:
    answer = call(
        port,
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name=TopicName(name),
                    num_partitions=i32(partitions),
                    replication_factor=i16(1),
                    assignments=(),
                    configs=(),
                ),
            ),
            timeout=dt.timedelta(seconds=10),
            validate_only=False,
        ),
    )
    assert answer.topics[0].error_code.value in (0, 36), answer  # created, or there already


def init(port: int, transactional_id: str, timeout_ms: int = 60_000, expected: tuple[int, int] = (-1, -1)) -> object:
    return call(
        port,
        InitProducerIdRequest(
            transactional_id=TransactionalId(transactional_id),
            transaction_timeout=dt.timedelta(milliseconds=timeout_ms),
            producer_id=ProducerId(expected[0]),
            producer_epoch=i16(expected[1]),
        ),
    )


def producer(port: int, transactional_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    answer = init(port, transactional_id, timeout_ms)
    assert answer.error_code.value == NONE, answer
    return answer.producer_id, answer.producer_epoch


def add_partitions(
    port: int, transactional_id: str, ids: tuple[int, int], topic: str, partitions: list[int]
) -> list[int]:
    answer = call(
        port,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TransactionalId(transactional_id),
            v3_and_below_producer_id=ProducerId(ids[0]),
            v3_and_below_producer_epoch=i16(ids[1]),
            v3_and_below_topics=(
                AddPartitionsToTxnTopic(name=TopicName(topic), partitions=tuple(i32(p) for p in partitions)),
            ),
        ),
    )
    (result,) = answer.results_by_topic_v3_and_below
    return [p.partition_error_code.value for p in result.results_by_partition]


def add_offsets(port: int, transactional_id: str, ids: tuple[int, int], group: str) -> int:
    answer = call(
        port,
        AddOffsetsToTxnRequest(
            transactional_id=TransactionalId(transactional_id),
            producer_id=ProducerId(ids[0]),
            producer_epoch=i16(ids[1]),
            group_id=GroupId(group),
        ),
    )
    return int(answer.error_code.value)


def txn_commit_offset(
    port: int, transactional_id: str, ids: tuple[int, int], group: str, topic: str, offset: int
) -> int:
    answer = call(
        port,
        TxnOffsetCommitRequest(
            transactional_id=TransactionalId(transactional_id),
            group_id=GroupId(group),
            producer_id=ProducerId(ids[0]),
            producer_epoch=i16(ids[1]),
            topics=(
                TxnOffsetCommitRequestTopic(
                    name=TopicName(topic),
                    partitions=(
                        TxnOffsetCommitRequestPartition(
                            partition_index=i32(0), committed_offset=i64(offset), committed_metadata="m"
                        ),
                    ),
                ),
            ),
        ),
    )
    return int(answer.topics[0].partitions[0].error_code.value)


def end(port: int, transactional_id: str, ids: tuple[int, int], commit: bool) -> int:
    answer = call(
        port,
        EndTxnRequest(
            transactional_id=TransactionalId(transactional_id),
            producer_id=ProducerId(ids[0]),
            producer_epoch=i16(ids[1]),
            committed=commit,
        ),
    )
    return int(answer.error_code.value)


def committed(port: int, group: str, topic: str, *, stable: bool = False) -> tuple[int, int]:
    """(error code, offset) of the group's partition 0."""
    answer = call(
        port,
        OffsetFetchRequest(
            group_id=GroupId(group),
            topics=(OffsetFetchRequestTopic(name=TopicName(topic), partition_indexes=(i32(0),)),),
            require_stable=stable,
        ),
    )
    (partition,) = answer.topics[0].partitions
    return partition.error_code.value, partition.committed_offset


def test_find_coordinator_names_this_broker_for_a_transactional_id(gateway) -> None:
    port = gateway.gateway.port
    found, empty = call(port, FindCoordinatorRequest(key_type=1, coordinator_keys=("t-find", ""))).coordinators
    assert (found.error_code.value, found.node_id, found.port) == (NONE, 0, port)
    assert empty.error_code.value == INVALID_REQUEST
    assert "non-empty transactional id" in empty.error_message


def test_init_producer_id_bumps_the_epoch_and_fences_the_older_instance(gateway, topic: str) -> None:
    """A second InitProducerId keeps the producer id and bumps the epoch; the older epoch is then
    PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for a version-1 request, which predates it)."""
    port = gateway.gateway.port
    create_topic(port, topic)
    first = producer(port, "t-fence")
    second = producer(port, "t-fence")
    assert second == (first[0], first[1] + 1)
    assert add_partitions(port, "t-fence", first, topic, [0]) == [PRODUCER_FENCED]
    old = call(
        port,
        AddPartitionsV1(
            v3_and_below_transactional_id=TransactionalId("t-fence"),
            v3_and_below_producer_id=ProducerId(first[0]),
            v3_and_below_producer_epoch=i16(first[1]),
            v3_and_below_topics=(AddPartitionsTopicV1(name=TopicName(topic), partitions=(i32(0),)),),
        ),
    )
    assert (
        old.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value
        == INVALID_PRODUCER_EPOCH
    )
    assert add_partitions(port, "t-fence", (first[0] + 1, second[1]), topic, [0]) == [INVALID_PRODUCER_ID_MAPPING]
    assert add_offsets(port, "t-fence", second, "g-fence") == NONE
    assert add_offsets(port, "t-fence", first, "g-fence") == PRODUCER_FENCED
    assert end(port, "t-fence", second, commit=False) == NONE


def test_init_producer_id_refuses_a_timeout_over_the_maximum(gateway) -> None:
    answer = init(gateway.gateway.port, "t-long", timeout_ms=900_001)
    assert answer.error_code.value == INVALID_TRANSACTION_TIMEOUT


def test_add_partitions_names_the_partition_that_does_not_exist(gateway, topic: str) -> None:
    """Nothing is added when a partition does not exist: it is UNKNOWN_TOPIC_OR_PARTITION, the
    others OPERATION_NOT_ATTEMPTED; then ending the transaction finds none open."""
    port = gateway.gateway.port
    create_topic(port, topic)
    ids = producer(port, "t-unknown")
    assert add_partitions(port, "t-unknown", ids, topic, [0, 1]) == [
        OPERATION_NOT_ATTEMPTED,
        UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert end(port, "t-unknown", ids, commit=True) == INVALID_TXN_STATE


def test_txn_offset_commit_needs_the_group_added_first(gateway, topic: str) -> None:
    port = gateway.gateway.port
    create_topic(port, topic)
    ids = producer(port, "t-nogroup")
    assert txn_commit_offset(port, "t-nogroup", ids, "g-nogroup", topic, 5) == INVALID_TXN_STATE


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_offsets_sent_in_a_transaction_are_committed_only_with_it(gateway, topic: str, commit: bool) -> None:
    """TxnOffsetCommit's offsets stay pending (OffsetFetch shows the old offset; with
    require_stable, UNSTABLE_OFFSET_COMMIT) until the transaction ends: a commit makes them the
    group's, an abort drops them. The retry of the ending gets the same answer."""
    port = gateway.gateway.port
    create_topic(port, topic)
    group = f"g-{topic}"
    transactional_id = f"t-{topic}"
    ids = producer(port, transactional_id)
    assert add_offsets(port, transactional_id, ids, group) == NONE
    assert txn_commit_offset(port, transactional_id, ids, group, topic, 7) == NONE
    assert committed(port, group, topic) == (NONE, -1)
    assert committed(port, group, topic, stable=True) == (UNSTABLE_OFFSET_COMMIT, -1)
    assert end(port, transactional_id, ids, commit) == NONE
    assert committed(port, group, topic, stable=True) == (NONE, 7 if commit else -1)
    assert end(port, transactional_id, ids, commit) == NONE  # a retry of the ending
    assert end(port, transactional_id, ids, not commit) == INVALID_TXN_STATE


def test_a_new_instance_aborts_the_open_transaction_of_the_old(gateway, topic: str) -> None:
    """InitProducerId finding a transaction open aborts it (its offsets dropped) and answers
    CONCURRENT_TRANSACTIONS; asked again, it hands out an epoch the old instance never held."""
    port = gateway.gateway.port
    create_topic(port, topic)
    group = f"g-{topic}"
    old = producer(port, "t-zombie")
    assert add_offsets(port, "t-zombie", old, group) == NONE
    assert txn_commit_offset(port, "t-zombie", old, group, topic, 3) == NONE
    assert init(port, "t-zombie").error_code.value == CONCURRENT_TRANSACTIONS
    new = producer(port, "t-zombie")
    assert new == (old[0], old[1] + 2)
    assert end(port, "t-zombie", old, commit=True) == PRODUCER_FENCED
    assert committed(port, group, topic, stable=True) == (NONE, -1)


def wait_until(predicate, seconds: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    """Ask ``predicate`` until it holds (each answer is a request to the gateway), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the gateway did not get there in time"
        time.sleep(0.05)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(gateway, topic: str) -> None:
    port = gateway.gateway.port
    create_topic(port, topic)
    group = f"g-{topic}"
    ids = producer(port, "t-timeout", timeout_ms=300)
    assert add_offsets(port, "t-timeout", ids, group) == NONE
    assert txn_commit_offset(port, "t-timeout", ids, group, topic, 9) == NONE
    wait_until(lambda: committed(port, group, topic, stable=True)[0] == NONE)
    assert end(port, "t-timeout", ids, commit=True) == PRODUCER_FENCED
    assert committed(port, group, topic, stable=True) == (NONE, -1)
    again = producer(port, "t-timeout")
    assert again[0] == ids[0]
    assert again[1] > ids[1] + 1


@pytest.fixture(params=["asyncio", "trio"])
def restartable(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[object]:
    """Start gateways, one after another, on the same root folder: ``start()`` returns its port."""
    portal_cm = start_blocking_portal(backend=str(request.param))
    portal = portal_cm.__enter__()
    running: list[object] = []

    class Gateways:
        root = str(tmp_path)

        def start(self) -> int:
            self.stop()
            gateway = KafkaGateway(self.root, port=0)
            context = portal.wrap_async_context_manager(gateway)
            context.__enter__()
            running.append(context)
            return gateway.port

        def stop(self) -> None:
            while running:
                running.pop().__exit__(None, None, None)  # type: ignore[attr-defined]

    gateways = Gateways()
    try:
        yield gateways
    finally:
        gateways.stop()
        portal_cm.__exit__(None, None, None)


def test_the_coordinator_state_outlives_a_restart_which_aborts_open_transactions(restartable) -> None:
    """After a restart the transactional id keeps its producer id and epoch (the next instance is
    fenced past them), a committed transaction's offsets stay, and a transaction left open is aborted:
    its pending offsets are dropped and its producer fenced."""
    port = restartable.start()
    create_topic(port, "orders")
    done = producer(port, "t-done")
    assert add_offsets(port, "t-done", done, "g-done") == NONE
    assert txn_commit_offset(port, "t-done", done, "g-done", "orders", 4) == NONE
    assert end(port, "t-done", done, commit=True) == NONE
    hung = producer(port, "t-hung")
    assert add_offsets(port, "t-hung", hung, "g-hung") == NONE
    assert txn_commit_offset(port, "t-hung", hung, "g-hung", "orders", 6) == NONE
    assert os.path.exists(os.path.join(restartable.root, "kafka-transactions.json"))

    port = restartable.start()
    assert committed(port, "g-done", "orders", stable=True) == (NONE, 4)
    assert committed(port, "g-hung", "orders", stable=True) == (NONE, -1)
    assert end(port, "t-hung", hung, commit=True) == PRODUCER_FENCED
    assert producer(port, "t-done") == (done[0], done[1] + 1)
    assert producer(port, "t-hung") == (hung[0], hung[1] + 2)


def test_a_damaged_state_file_stops_the_start_with_a_message(restartable) -> None:
    restartable.start()
    restartable.stop()
    with open(os.path.join(restartable.root, "kafka-transactions.json"), "w") as damaged:
        damaged.write('{"version": 1, "coordinator": {"version": 7}}')
    with pytest.raises(BaseException) as raised:  # noqa: PT011 (the message is checked below)
        restartable.start()
    error: BaseException = raised.value
    while isinstance(error, BaseExceptionGroup):
        (error,) = error.exceptions
    assert isinstance(error, TransactionCoordinatorStateError)
    assert "not version 1 of the coordinator's state" in str(error)


# ---- transaction version 2 (KIP-890): EndTxn v5, TxnOffsetCommit v5, Produce v12 ----


def end_v5(port: int, transactional_id: str, ids: tuple[int, int], commit: bool) -> tuple[int, int, int]:
    """(error code, producer id, epoch) of an EndTxn v5."""
    answer = call(
        port,
        EndTxnV5(
            transactional_id=TransactionalId(transactional_id),
            producer_id=ProducerId(ids[0]),
            producer_epoch=i16(ids[1]),
            committed=commit,
        ),
    )
    return int(answer.error_code.value), answer.producer_id, answer.producer_epoch


def txn_commit_offset_v5(port: int, transactional_id: str, ids: tuple[int, int], group: str, topic: str) -> int:
    answer = call(
        port,
        TxnOffsetCommitV5(
            transactional_id=TransactionalId(transactional_id),
            group_id=GroupId(group),
            producer_id=ProducerId(ids[0]),
            producer_epoch=i16(ids[1]),
            topics=(
                TxnOffsetCommitV5Topic(
                    name=TopicName(topic),
                    partitions=(
                        TxnOffsetCommitV5Partition(
                            partition_index=i32(0), committed_offset=i64(5), committed_metadata=""
                        ),
                    ),
                ),
            ),
        ),
    )
    return int(answer.topics[0].partitions[0].error_code.value)


def test_end_txn_v5_bumps_the_epoch_at_every_ending(gateway, topic: str) -> None:
    """Transaction version 2: TxnOffsetCommit v5 adds its group itself (no AddOffsetsToTxn); EndTxn
    v5 answers the epoch bumped, its retry with the old epoch the same answer, the old epoch is
    fenced after; an abort with nothing open is allowed (and bumps), a commit of nothing is not."""
    port = gateway.gateway.port
    create_topic(port, topic)
    group = f"g-{topic}"
    ids = producer(port, "t-v2")
    assert txn_commit_offset_v5(port, "t-v2", ids, group, topic) == NONE
    assert end_v5(port, "t-v2", ids, commit=True) == (NONE, ids[0], ids[1] + 1)
    assert end_v5(port, "t-v2", ids, commit=True) == (NONE, ids[0], ids[1] + 1)  # the retry
    assert committed(port, group, topic, stable=True) == (NONE, 5)
    assert add_offsets(port, "t-v2", ids, group) == PRODUCER_FENCED
    bumped = (ids[0], ids[1] + 1)
    assert end_v5(port, "t-v2", bumped, commit=True)[0] == INVALID_TXN_STATE
    assert end_v5(port, "t-v2", bumped, commit=False) == (NONE, ids[0], ids[1] + 2)


def test_an_exhausted_epoch_ends_with_a_new_producer_id() -> None:
    """At the last epochs EndTxn v5 hands out a new producer id at epoch 0; the markers carry the
    old id (its records' producer), at the epoch after the last it held."""
    ids = iter(range(100, 200))
    coordinator = TransactionCoordinator(lambda: next(ids))
    answer = coordinator.init_producer_id("t", 60_000, 0)
    coordinator.transactions["t"].epoch = 32766
    assert coordinator.add_partitions("t", answer.producer_id, 32766, [("orders", 0)], 0) == NONE
    error, markers = coordinator.end_txn_bumping("t", answer.producer_id, 32766, commit=True)
    assert error == NONE
    assert markers is not None
    assert (markers.producer_id, markers.epoch, markers.partitions) == (answer.producer_id, 32767, {("orders", 0)})
    txn = coordinator.transactions["t"]
    assert (txn.producer_id, txn.epoch) == (101, 0)
    coordinator.complete("t")
    assert coordinator.end_txn_bumping("t", answer.producer_id, 32766, commit=True) == (NONE, None)  # a retry


def produce_transactional(port: int, version: int, transactional_id: str, ids: tuple[int, int], topic: str) -> int:
    """The error code of a Produce of ``version`` with one transactional batch (sequence 0)."""
    schema = importlib.import_module(f"kio.schema.produce.v{version}.request")
    batch = kafka_codec.encode_batch(
        base_offset=0,
        records=[KafkaRecord(0, 1_000, b"k", b"in-v2", [])],
        base_timestamp_ms=1_000,
        producer_id=ids[0],
        producer_epoch=ids[1],
        base_sequence=0,
        transactional=True,
    )
    answer = call(
        port,
        schema.ProduceRequest(
            transactional_id=TransactionalId(transactional_id),
            acks=-1,
            timeout=dt.timedelta(seconds=10),
            topic_data=(
                schema.TopicProduceData(
                    name=TopicName(topic), partition_data=(schema.PartitionProduceData(index=i32(0), records=batch),)
                ),
            ),
        ),
    )
    return int(answer.responses[0].partition_responses[0].error_code.value)


def test_produce_v12_adds_its_partition_to_the_transaction(gateway, topic: str) -> None:
    """Transaction version 2: a Produce v12 of a partition not in the transaction adds it (a v11
    one is refused with INVALID_TXN_STATE, as version 1 wants AddPartitionsToTxn first); the commit
    then writes its marker, after which the partition has no transaction open."""
    port = gateway.gateway.port
    create_topic(port, topic)
    ids = producer(port, "t-v12")
    assert produce_transactional(port, 11, "t-v12", ids, topic) == INVALID_TXN_STATE
    assert produce_transactional(port, 12, "t-v12", ids, topic) == NONE
    assert latest_offsets(port, topic) == (0, 1)  # (read_committed's, read_uncommitted's): open from 0
    assert end_v5(port, "t-v12", ids, commit=True) == (NONE, ids[0], ids[1] + 1)
    assert latest_offsets(port, topic) == (2, 2)  # the record, its commit marker


def latest_offsets(port: int, topic: str) -> tuple[int, int]:
    """ListOffsets' latest offset of partition 0 for read_committed, then read_uncommitted."""
    found = []
    for isolation_level in (1, 0):
        answer = call(
            port,
            ListOffsetsRequest(
                replica_id=BrokerId(-1),
                isolation_level=i8(isolation_level),
                topics=(
                    ListOffsetsTopic(
                        name=TopicName(topic),
                        partitions=(ListOffsetsPartition(partition_index=i32(0), timestamp=i64(-1)),),
                    ),
                ),
            ),
        )
        found.append(int(answer.topics[0].partitions[0].offset))
    return found[0], found[1]


def test_an_ending_whose_state_cannot_be_stored_waits_and_then_completes(
    gateway, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state file cannot be written (a full disk): EndTxn answers CONCURRENT_TRANSACTIONS
    (retriable) and nothing is committed; once writes succeed again the gateway stores the decision,
    carries it out, and the client's retry is answered NONE with the offsets committed."""
    port = gateway.gateway.port
    create_topic(port, topic)
    group = f"g-{topic}"
    ids = producer(port, f"t-{topic}")
    assert add_offsets(port, f"t-{topic}", ids, group) == NONE
    assert txn_commit_offset(port, f"t-{topic}", ids, group, topic, 11) == NONE
    real_write = _transactions.atomic_write_json

    def disk_full(path: str, value: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(_transactions, "atomic_write_json", disk_full)
    assert end(port, f"t-{topic}", ids, commit=True) == CONCURRENT_TRANSACTIONS
    assert committed(port, group, topic, stable=True) == (UNSTABLE_OFFSET_COMMIT, -1)
    monkeypatch.setattr(_transactions, "atomic_write_json", real_write)
    wait_until(lambda: end(port, f"t-{topic}", ids, commit=True) == NONE)
    assert committed(port, group, topic, stable=True) == (NONE, 11)


def test_a_late_ending_after_a_timeout_in_version_2() -> None:
    """Transaction version 2: the coordinator's abort at the timeout bumps the epoch once; the
    producer's late EndTxn v5 with the epoch before it is INVALID_TXN_STATE for a commit and the
    same answer (NONE) for an abort, as Kafka 4.4 answers; an epoch older still is fenced."""
    ids = iter(range(100, 200))
    coordinator = TransactionCoordinator(lambda: next(ids))
    answer = coordinator.init_producer_id("t", 1_000, 0)
    producer_id, epoch = answer.producer_id, answer.epoch
    assert coordinator.add_partitions("t", producer_id, epoch, [("orders", 0)], 0) == NONE
    (markers,) = coordinator.timed_out(5_000)
    assert markers.epoch == epoch + 1
    coordinator.complete("t")
    assert coordinator.end_txn_bumping("t", producer_id, epoch, commit=True) == (INVALID_TXN_STATE, None)
    assert coordinator.end_txn_bumping("t", producer_id, epoch, commit=False) == (NONE, None)
    assert coordinator.end_txn_bumping("t", producer_id, epoch - 1, commit=True) == (PRODUCER_FENCED, None)


def test_a_lost_state_file_still_aborts_the_transactions_left_open_in_the_data(restartable) -> None:
    """Without ``kafka-transactions.json`` (deleted, or lost with its disk), the start finds the
    transaction a Produce left open in the topic's data and aborts it: read_committed readers are no
    longer held at its first record and never get it; the state is stored again, so a further start
    writes no second marker."""
    port = restartable.start()
    create_topic(port, "orders")
    ids = producer(port, "t-lost")
    assert produce_transactional(port, 12, "t-lost", ids, "orders") == NONE
    assert latest_offsets(port, "orders") == (0, 1)  # open from its record at 0
    restartable.stop()
    state = os.path.join(restartable.root, "kafka-transactions.json")
    os.remove(state)

    port = restartable.start()
    assert latest_offsets(port, "orders") == (2, 2)  # the record, its abort marker
    side = Side("gateway", f"127.0.0.1:{port}", "lost-state")
    assert read_to_end(side, [("orders", 0)], COMMITTED) == []
    assert [value for *_, value in read_to_end(side, [("orders", 0)], UNCOMMITTED)] == [b"in-v2"]
    assert os.path.exists(state)
    port = restartable.start()
    assert latest_offsets(port, "orders") == (2, 2)


def test_the_search_of_a_start_without_state_says_what_it_reads_and_what_it_found(
    restartable, caplog: pytest.LogCaptureFixture
) -> None:
    """A start that must read its topics' data for transactions left open says so in its log
    before it reads (how much), and when done (what it read, what it aborted); a start with no
    topic to read, and a start that has its state, say nothing of it."""
    caplog.set_level(logging.INFO, logger="adiskq.kafka")
    port = restartable.start()
    assert not [r for r in caplog.records if "transactions left open" in r.getMessage()]
    create_topic(port, "orders", partitions=2)
    ids = producer(port, "t-lost")
    assert produce_transactional(port, 12, "t-lost", ids, "orders") == NONE
    restartable.stop()
    os.remove(os.path.join(restartable.root, "kafka-transactions.json"))
    caplog.clear()

    restartable.start()
    lines = [r.getMessage() for r in caplog.records if "transactions left open" in r.getMessage()]
    assert lines[0] == (
        "adiskq: no transaction state (kafka-transactions.json): reading the 1 records of 1 topics "
        "(2 partitions) once, for transactions left open, before answering clients"
    )
    assert lines[-1].startswith("adiskq: read 1 records for transactions left open in ")
    assert lines[-1].endswith("; 1 aborted")
    caplog.clear()
    restartable.start()
    assert not [r for r in caplog.records if "transactions left open" in r.getMessage()]


def test_the_search_reports_its_progress_every_few_seconds(caplog: pytest.LogCaptureFixture) -> None:
    """While it reads, the search says how far it got, at most every five seconds."""
    caplog.set_level(logging.INFO, logger="adiskq.kafka")
    now = [100.0]
    progress = SearchProgress("state.json", 3, 12, 1_000, clock=lambda: now[0])
    progress.advance(100)
    now[0] += 4.0
    progress.advance(200)
    now[0] += 1.5
    progress.advance(300)
    progress.advance(50)
    now[0] += 2.0
    progress.aborted = 2
    progress.finished()
    assert [r.getMessage() for r in caplog.records] == [
        "adiskq: no transaction state (state.json): reading the 1000 records of 3 topics (12 partitions) once, "
        "for transactions left open, before answering clients",
        "adiskq: read 600 of 1000 records (60%) for transactions left open, 6 s so far",
        "adiskq: read 650 records for transactions left open in 7.5 s; 2 aborted",
    ]


def test_a_lost_state_file_and_a_topic_that_cannot_be_searched_stop_the_start_with_what_to_do(restartable) -> None:
    """Without the state file, a topic whose data cannot be searched for open transactions would
    leave one open for good: the start stops, naming the topic and what to do."""
    port = restartable.start()
    create_topic(port, "orders")
    restartable.stop()
    pathlib.Path(restartable.root, "kafka-transactions.json").unlink(
        missing_ok=True
    )  # stored only once a topic could hold a transaction
    with open(os.path.join(restartable.root, "orders", "settings.json"), "w") as damaged:
        damaged.write("{not json")
    with pytest.raises(BaseException) as raised:  # noqa: PT011 (the message is checked below)
        restartable.start()
    error: BaseException = raised.value
    while isinstance(error, BaseExceptionGroup):
        (error,) = error.exceptions
    assert isinstance(error, TransactionCoordinatorStateError)
    assert "topic 'orders' could not be searched" in str(error)
    assert "adiskq check --repair" in str(error)


# ---- the cost of an ending: what is stored, and when ----


def stored_state(root: str, transactional_id: str) -> str:
    """The state of ``transactional_id`` as ``kafka-transactions.json`` holds it now."""
    with open(os.path.join(root, "kafka-transactions.json")) as file:
        return str(json.load(file)["coordinator"]["transactions"][transactional_id]["state"])


def test_end_txn_is_answered_once_the_markers_are_durable_and_the_complete_state_follows(restartable) -> None:
    """EndTxn is answered without waiting to store the Complete state (the markers are on disk):
    the file still says PrepareCommit, and the gateway stores CompleteCommit on its own soon
    after. A crash before then leaves PrepareCommit, and the next start writes the marker again:
    the transaction reads once, committed, and the client's retried EndTxn is answered NONE."""
    port = restartable.start()
    create_topic(port, "orders")
    ids = producer(port, "t-lazy")
    assert produce_transactional(port, 12, "t-lazy", ids, "orders") == NONE
    assert end(port, "t-lazy", ids, commit=True) == NONE
    assert latest_offsets(port, "orders") == (2, 2)  # the record, its commit marker
    assert stored_state(restartable.root, "t-lazy") == "PrepareCommit"
    state = pathlib.Path(restartable.root, "kafka-transactions.json")
    before_the_crash = state.read_bytes()
    wait_until(lambda: stored_state(restartable.root, "t-lazy") == "CompleteCommit", seconds=10)

    restartable.stop()
    state.write_bytes(before_the_crash)  # as if the gateway had died before storing it
    port = restartable.start()
    assert latest_offsets(port, "orders") == (3, 3)  # the marker written again
    side = Side("gateway", f"127.0.0.1:{port}", "lazy-complete")
    assert [value for *_, value in read_to_end(side, [("orders", 0)], COMMITTED)] == [b"in-v2"]
    assert end(port, "t-lazy", ids, commit=True) == NONE


def test_a_clean_stop_stores_the_complete_state_not_stored_yet(restartable) -> None:
    """The gateway's stop stores what EndTxn left for later: the next start has nothing to redo."""
    port = restartable.start()
    create_topic(port, "orders")
    ids = producer(port, "t-stop")
    assert produce_transactional(port, 12, "t-stop", ids, "orders") == NONE
    assert end(port, "t-stop", ids, commit=True) == NONE
    restartable.stop()
    assert stored_state(restartable.root, "t-stop") == "CompleteCommit"
    port = restartable.start()
    assert latest_offsets(port, "orders") == (2, 2)  # no marker written again


def test_an_ending_with_group_offsets_stores_its_complete_state_before_the_answer(restartable) -> None:
    """A commit that held group offsets is stored as CompleteCommit before EndTxn is answered: a
    restart must not store its offsets again over a commit made since outside any transaction."""
    port = restartable.start()
    create_topic(port, "orders")
    ids = producer(port, "t-offsets")
    assert add_offsets(port, "t-offsets", ids, "g-offsets") == NONE
    assert txn_commit_offset(port, "t-offsets", ids, "g-offsets", "orders", 4) == NONE
    assert end(port, "t-offsets", ids, commit=True) == NONE
    assert stored_state(restartable.root, "t-offsets") == "CompleteCommit"


@pytest.mark.anyio
async def test_the_markers_of_an_ending_are_written_side_by_side(tmp_path: pathlib.Path) -> None:
    """Each partition's marker is written (and fsynced) while the others are: an ending of three
    partitions takes one marker's time, not three."""
    in_flight = 0
    all_three = anyio.Event()

    async def write_marker(topic: str, partition: int, markers: Markers) -> None:
        nonlocal in_flight
        in_flight += 1
        if in_flight == 3:
            all_three.set()
        with anyio.fail_after(10):
            await all_three.wait()  # only if all three are in flight at once

    async def store_offsets(group: str, topic: str, offsets: object) -> None:
        raise AssertionError("no offsets in this transaction")

    ids = iter(range(100, 200))
    service = _transactions.TransactionService(
        str(tmp_path), TransactionCoordinator(lambda: next(ids)), write_marker, store_offsets
    )
    answer = await service.init_producer_id("t", 60_000, None)
    partitions = [("orders", 0), ("orders", 1), ("payments", 0)]
    assert await service.add_partitions("t", answer.producer_id, answer.epoch, partitions) == NONE
    assert await service.end_txn("t", answer.producer_id, answer.epoch, commit=True) == NONE
    assert all_three.is_set()
