"""The transaction coordinator's decisions, as Kafka's coordinator makes them: epochs that fence
zombies, the answers of each state, timeouts, and recovery from its stored state.

The answers (error codes and epochs) of the scenarios below are those Apache Kafka 4.4 gave to the
same requests (InitProducerId v4, AddPartitionsToTxn v3, AddOffsetsToTxn v3, EndTxn v4) on one
node; the differential tests against the broker fixture check them once the gateway serves them."""

from __future__ import annotations

import itertools
import json

import pytest

from adiskq.kafka.transaction_coordinator import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_REQUEST,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
    Markers,
    TransactionCoordinator,
    TransactionCoordinatorStateError,
    TxnState,
    fenced_error_for,
)

TIMEOUT_MS = 60_000
T1 = ("t", 0)
T2 = ("t", 1)


def _coordinator() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(lambda: next(ids))


def _init(coordinator: TransactionCoordinator, txn_id: str = "app", now_ms: int = 0) -> tuple[int, int]:
    answer = coordinator.init_producer_id(txn_id, TIMEOUT_MS, now_ms)
    assert answer.error == NONE
    return answer.producer_id, answer.epoch


def test_a_new_transactional_id_gets_a_producer_id_at_epoch_0_and_each_new_instance_the_next_epoch() -> None:
    coordinator = _coordinator()
    assert _init(coordinator) == (1000, 0)
    assert _init(coordinator) == (1000, 1)
    assert _init(coordinator, "other") == (1001, 0)


def test_requests_are_checked_as_kafka_checks_them() -> None:
    coordinator = _coordinator()
    assert coordinator.init_producer_id("", TIMEOUT_MS, 0).error == INVALID_REQUEST
    assert coordinator.init_producer_id("app", 0, 0).error == INVALID_TRANSACTION_TIMEOUT
    assert coordinator.init_producer_id("app", 900_001, 0).error == INVALID_TRANSACTION_TIMEOUT
    producer_id, epoch = _init(coordinator)
    assert coordinator.add_partitions("unknown", producer_id, epoch, [T1], 0) == INVALID_PRODUCER_ID_MAPPING
    assert coordinator.add_partitions("app", producer_id + 1, epoch, [T1], 0) == INVALID_PRODUCER_ID_MAPPING
    assert coordinator.add_partitions("app", producer_id, epoch + 1, [T1], 0) == PRODUCER_FENCED
    assert coordinator.end_txn("app", producer_id, epoch, commit=True) == (INVALID_TXN_STATE, None)  # none open
    assert coordinator.end_txn("app", producer_id, epoch, commit=False) == (INVALID_TXN_STATE, None)


def test_commit_names_every_partition_and_group_then_a_retry_is_answered_alike() -> None:
    coordinator = _coordinator()
    producer_id, epoch = _init(coordinator)
    assert coordinator.add_partitions("app", producer_id, epoch, [T1], 10) == NONE
    assert coordinator.add_partitions("app", producer_id, epoch, [T1, T2], 20) == NONE
    assert coordinator.add_offsets("app", producer_id, epoch, "g", 30) == NONE
    assert coordinator.check_offset_commit("app", producer_id, epoch, "g") == NONE
    assert coordinator.check_offset_commit("app", producer_id, epoch, "not-added") == INVALID_TXN_STATE
    error, markers = coordinator.end_txn("app", producer_id, epoch, commit=True)
    assert error == NONE
    assert markers == Markers("app", producer_id, epoch, True, frozenset((T1, T2)), frozenset(("g",)))
    # Until the markers are written, the transaction is being ended: the client waits and retries
    # (an AddPartitionsToTxn is told so whatever producer it names; an EndTxn of another is fenced).
    assert coordinator.end_txn("app", producer_id, epoch, commit=True) == (CONCURRENT_TRANSACTIONS, None)
    assert coordinator.end_txn("app", producer_id, epoch, commit=False) == (CONCURRENT_TRANSACTIONS, None)
    assert coordinator.end_txn("app", producer_id, epoch - 1, commit=False) == (PRODUCER_FENCED, None)
    assert coordinator.add_partitions("app", producer_id, epoch, [T1], 40) == CONCURRENT_TRANSACTIONS
    assert coordinator.add_partitions("app", producer_id + 1, epoch, [T1], 40) == CONCURRENT_TRANSACTIONS
    assert coordinator.add_partitions("app", producer_id, epoch - 1, [T1], 40) == CONCURRENT_TRANSACTIONS
    assert coordinator.init_producer_id("app", TIMEOUT_MS, 40).error == CONCURRENT_TRANSACTIONS
    coordinator.complete("app")
    assert coordinator.transactions["app"].state is TxnState.COMPLETE_COMMIT
    assert coordinator.end_txn("app", producer_id, epoch, commit=True) == (NONE, None)  # a retry
    assert coordinator.end_txn("app", producer_id, epoch, commit=False) == (INVALID_TXN_STATE, None)
    # The next transaction starts empty.
    assert coordinator.add_partitions("app", producer_id, epoch, [T2], 50) == NONE
    assert coordinator.end_txn("app", producer_id, epoch, commit=False)[1] == Markers(
        "app", producer_id, epoch, False, frozenset((T2,)), frozenset()
    )


def test_a_new_instance_fences_the_zombie_and_aborts_its_open_transaction() -> None:
    coordinator = _coordinator()
    producer_id, zombie_epoch = _init(coordinator)
    assert coordinator.add_partitions("app", producer_id, zombie_epoch, [T1], 0) == NONE
    answer = coordinator.init_producer_id("app", TIMEOUT_MS, 5)
    assert answer.error == CONCURRENT_TRANSACTIONS
    assert answer.markers == Markers("app", producer_id, zombie_epoch + 1, False, frozenset((T1,)), frozenset())
    # The zombie is fenced at once, before the abort is written.
    assert coordinator.end_txn("app", producer_id, zombie_epoch, commit=True) == (PRODUCER_FENCED, None)
    assert coordinator.add_partitions("app", producer_id, zombie_epoch, [T1], 5) == CONCURRENT_TRANSACTIONS
    coordinator.complete("app")
    # The retry gets an epoch above the one the abort was written with: no zombie ever held it.
    assert _init(coordinator, now_ms=6) == (producer_id, zombie_epoch + 2)
    assert coordinator.add_partitions("app", producer_id, zombie_epoch, [T1], 7) == PRODUCER_FENCED


def test_a_client_that_names_its_producer_keeps_it_and_a_lost_answer_is_given_again() -> None:
    """KIP-360: InitProducerId with the (producer id, epoch) a producer held bumps that epoch; a retry
    naming the same pair (its answer lost) gets the same answer; a pair of another producer is fenced."""
    coordinator = _coordinator()
    producer_id, epoch = _init(coordinator)
    answer = coordinator.init_producer_id("app", TIMEOUT_MS, 0, expected=(producer_id, epoch))
    assert (answer.error, answer.producer_id, answer.epoch) == (NONE, producer_id, epoch + 1)
    again = coordinator.init_producer_id("app", TIMEOUT_MS, 0, expected=(producer_id, epoch))
    assert (again.error, again.producer_id, again.epoch) == (NONE, producer_id, epoch + 1)
    assert coordinator.init_producer_id("app", TIMEOUT_MS, 0, expected=(producer_id + 7, 0)).error == PRODUCER_FENCED
    assert coordinator.init_producer_id("app", TIMEOUT_MS, 0, expected=(producer_id, 30)).error == PRODUCER_FENCED


def test_an_exhausted_epoch_moves_the_transactional_id_to_a_new_producer_id() -> None:
    coordinator = _coordinator()
    producer_id, _ = _init(coordinator)
    coordinator.transactions["app"].epoch = 2**15 - 2
    new_id, epoch = _init(coordinator)
    assert (new_id != producer_id, epoch) == (True, 0)
    # The retry of that InitProducerId, naming the old producer, is given the new one.
    retry = coordinator.init_producer_id("app", TIMEOUT_MS, 0, expected=(producer_id, 2**15 - 2))
    assert (retry.error, retry.producer_id, retry.epoch) == (NONE, new_id, 0)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    coordinator = _coordinator()
    producer_id, epoch = _init(coordinator)
    assert coordinator.next_deadline_ms() is None
    assert coordinator.add_partitions("app", producer_id, epoch, [T1], 1_000) == NONE
    assert coordinator.next_deadline_ms() == 1_000 + TIMEOUT_MS
    assert coordinator.timed_out(1_000 + TIMEOUT_MS) == []
    (markers,) = coordinator.timed_out(1_001 + TIMEOUT_MS)
    assert markers == Markers("app", producer_id, epoch + 1, False, frozenset((T1,)), frozenset())
    coordinator.complete("app")
    assert coordinator.end_txn("app", producer_id, epoch, commit=True) == (PRODUCER_FENCED, None)
    assert coordinator.timed_out(10**9) == []


def test_recovery_carries_out_answered_decisions_and_aborts_open_transactions() -> None:
    coordinator = _coordinator()
    for txn_id in ("committing", "aborting", "open", "done"):
        producer_id, epoch = _init(coordinator, txn_id)
        assert coordinator.add_partitions(txn_id, producer_id, epoch, [T1], 0) == NONE
        assert coordinator.add_offsets(txn_id, producer_id, epoch, "g", 0) == NONE
    coordinator.end_txn("committing", coordinator.transactions["committing"].producer_id, 0, commit=True)
    coordinator.end_txn("aborting", coordinator.transactions["aborting"].producer_id, 0, commit=False)
    coordinator.end_txn("done", coordinator.transactions["done"].producer_id, 0, commit=True)
    coordinator.complete("done")
    stored = json.loads(json.dumps(coordinator.to_json()))  # what the state file holds

    restarted = _coordinator()
    restarted.load_json(stored)
    assert restarted.to_json() == stored
    plans = {m.transactional_id: (m.commit, m.epoch, m.partitions, m.groups) for m in restarted.recover()}
    assert plans == {
        "committing": (True, 0, frozenset((T1,)), frozenset(("g",))),
        "aborting": (False, 0, frozenset((T1,)), frozenset(("g",))),
        "open": (False, 1, frozenset((T1,)), frozenset(("g",))),  # fenced: its producer cannot commit it
    }
    for txn_id in plans:
        restarted.complete(txn_id)
    assert restarted.recover() == []


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ([], "not version 1"),
        ({"version": 2, "transactions": {}}, "not version 1"),
        ({"version": 1}, "no 'transactions'"),
        ({"version": 1, "transactions": {"app": {"producer_id": 1}}}, "'app' is damaged"),
        (
            {
                "version": 1,
                "transactions": {
                    "app": {
                        "producer_id": True,
                        "epoch": 0,
                        "timeout_ms": 1,
                        "state": "Empty",
                        "partitions": [],
                        "groups": [],
                        "started_ms": -1,
                        "last_producer_id": -1,
                        "last_epoch": -1,
                    }
                },
            },
            "'app' is damaged",
        ),
    ],
)
def test_damaged_state_is_refused_with_what_is_wrong(state: object, message: str) -> None:
    with pytest.raises(TransactionCoordinatorStateError, match=message):
        _coordinator().load_json(state)


def test_older_requests_are_told_invalid_producer_epoch_for_a_fence() -> None:
    assert fenced_error_for(PRODUCER_FENCED, request_has_producer_fenced=False) == INVALID_PRODUCER_EPOCH
    assert fenced_error_for(PRODUCER_FENCED, request_has_producer_fenced=True) == PRODUCER_FENCED
    assert fenced_error_for(NONE, request_has_producer_fenced=False) == NONE
