"""Kafka's transaction coordinator (KIP-98) as a state machine: producer ids and epochs of
transactional ids, the partitions and groups of each open transaction, how it ends, and its timeout.

Sans-IO: no files, no sockets, no clock. Every call takes ``now_ms``; an answer that needs markers
written (an EndTxn, the abort of a fenced or timed-out transaction, recovery) carries ``Markers``
that the caller writes to every partition and group of the transaction, durably, before it calls
``complete``: until then the transaction is in a Prepare state, and requests for it are answered
CONCURRENT_TRANSACTIONS (retriable), as Kafka answers them. The caller also stores ``to_json()``
durably after every call that changed something and before it answers (``changed`` says which), so
that ``from_json`` after a crash finds every decision that was answered; ``recover`` then says which
transactions to finish: a Prepare state's decision is carried out, an open (Ongoing) transaction is
aborted with its producer fenced, since no client can still be waiting for it to commit.

A transactional id moves through Kafka's states::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit / PrepareAbort
    PrepareCommit / PrepareAbort --complete (markers written)--> CompleteCommit / CompleteAbort
    Complete* --AddPartitions/AddOffsets--> Ongoing
    Ongoing --InitProducerId (a new instance), timeout, recovery--> PrepareAbort with the epoch bumped

Epochs fence zombies: InitProducerId bumps the epoch (a new producer id, epoch 0, once the epoch
nears 32767), and a request with another producer id is answered INVALID_PRODUCER_ID_MAPPING, one
with another epoch PRODUCER_FENCED. An InitProducerId that finds an Ongoing transaction fences it
(epoch + 1), aborts it and answers CONCURRENT_TRANSACTIONS; the client's retry then bumps the epoch
once more, so the epoch it gets is one no zombie ever held.

Errors are Kafka's (``group_errors``-style integers, below), in the order Apache Kafka 4.4 gives them
(observed with the same requests): while a transaction's markers are written, AddPartitionsToTxn
and AddOffsetsToTxn are answered CONCURRENT_TRANSACTIONS before the producer is looked at, EndTxn
after its producer id and epoch are checked; the gateway's handlers send them as they are. Requests
of older versions that predate PRODUCER_FENCED get INVALID_PRODUCER_EPOCH instead
(``fenced_error_for``).

Transaction version 1 has the client add partitions and groups explicitly. Version 2 (KIP-890, for
clients that find the finalized feature ``transaction.version`` at 2 in ApiVersions) adds them
implicitly (a Produce v12 or a TxnOffsetCommit v5 of a partition or group not in the transaction:
``add_partitions`` / ``add_offsets`` on its behalf), and ``end_txn(..., bump_epoch=True)`` (EndTxn
v5) bumps the epoch at every ending: the markers carry the new epoch, the answer hands it to the
client (a new producer id at epoch 0 once the epoch is exhausted; the markers then carry the old
id), the retry of an ending already done, with the epoch before the bump, gets the same answer,
and aborting a transaction that is not open is allowed (it bumps the epoch and writes no marker).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Final, NamedTuple

__all__ = [
    "CONCURRENT_TRANSACTIONS",
    "DEFAULT_MAX_TIMEOUT_MS",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_PRODUCER_ID_MAPPING",
    "INVALID_REQUEST",
    "INVALID_TRANSACTION_TIMEOUT",
    "INVALID_TXN_STATE",
    "NONE",
    "PRODUCER_FENCED",
    "InitAnswer",
    "Markers",
    "Transaction",
    "TransactionCoordinator",
    "TransactionCoordinatorStateError",
    "TxnState",
    "fenced_error_for",
]

NONE: Final = 0
INVALID_REQUEST: Final = 42
INVALID_PRODUCER_EPOCH: Final = 47
INVALID_TXN_STATE: Final = 48
INVALID_PRODUCER_ID_MAPPING: Final = 49
INVALID_TRANSACTION_TIMEOUT: Final = 50
CONCURRENT_TRANSACTIONS: Final = 51
PRODUCER_FENCED: Final = 90

# Kafka's transaction.max.timeout.ms default: a producer asking for longer is refused.
DEFAULT_MAX_TIMEOUT_MS: Final = 900_000
NO_PRODUCER_ID: Final = -1
NO_EPOCH: Final = -1
_MAX_EPOCH: Final = 2**15 - 1  # a producer epoch is an int16
_STATE_VERSION: Final = 1


class TransactionCoordinatorStateError(ValueError):
    """The stored coordinator state is not what ``to_json`` writes: it says what is wrong."""


class TxnState(enum.Enum):
    """Kafka's transaction states (their names as Kafka's DescribeTransactions gives them)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


_PREPARED: Final = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_AT_REST: Final = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


def _epoch_exhausted(epoch: int) -> bool:
    """Whether bumping ``epoch`` would leave no epoch for the fencing bump after it."""
    return epoch >= _MAX_EPOCH - 1


@dataclasses.dataclass(slots=True)
class Transaction:
    """What the coordinator keeps of one transactional id."""

    transactional_id: str
    producer_id: int
    epoch: int  # NO_EPOCH until the first InitProducerId is answered
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    groups: frozenset[str] = frozenset()
    started_ms: int = -1  # when it became Ongoing; -1 when it is not
    # The producer id and epoch a client held before the last bump: its retry of an InitProducerId
    # whose answer it lost names them, and gets the current ones instead of being fenced.
    last_producer_id: int = NO_PRODUCER_ID
    last_epoch: int = NO_EPOCH


class Markers(NamedTuple):
    """What ends a transaction: a commit or abort marker (with ``producer_id`` and ``epoch``) in each
    of ``partitions``, and the offsets it committed for ``groups`` made visible (commit) or dropped."""

    transactional_id: str
    producer_id: int
    epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]
    groups: frozenset[str]


class InitAnswer(NamedTuple):
    """The answer to InitProducerId: an error, or the producer id and epoch; ``markers`` when an
    Ongoing transaction of an older instance must be aborted first (the error is then
    CONCURRENT_TRANSACTIONS, and the client asks again)."""

    error: int
    producer_id: int
    epoch: int
    markers: Markers | None = None


class TransactionCoordinator:
    """Every transactional id's transaction (see the module's docstring)."""

    def __init__(self, new_producer_id: Callable[[], int], *, max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS) -> None:
        self._new_producer_id = new_producer_id
        self.max_timeout_ms = max_timeout_ms
        self.transactions: dict[str, Transaction] = {}

    # ---- InitProducerId ----

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, now_ms: int, expected: tuple[int, int] | None = None
    ) -> InitAnswer:
        """A producer id and epoch for a (new instance of a) transactional producer; ``expected`` is
        the (producer id, epoch) a v3+ client sends when it already had one (KIP-360)."""
        if not transactional_id:
            return InitAnswer(INVALID_REQUEST, NO_PRODUCER_ID, NO_EPOCH)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return InitAnswer(INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_EPOCH)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = Transaction(transactional_id, self._new_producer_id(), NO_EPOCH, timeout_ms)
            self.transactions[transactional_id] = txn
        if expected is not None and not self._is_this_producer(txn, expected):
            return InitAnswer(PRODUCER_FENCED, NO_PRODUCER_ID, NO_EPOCH)
        if txn.state in _PREPARED:
            return InitAnswer(CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_EPOCH)
        if txn.state is TxnState.ONGOING:
            markers = self._fence_and_abort(txn)
            return InitAnswer(CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_EPOCH, markers)
        expected_epoch = None if expected is None else expected[1]
        if _epoch_exhausted(txn.epoch) and expected_epoch in (None, txn.epoch):
            # No epoch left for a later fence: the next instance gets a new producer id.
            txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.epoch
            txn.producer_id, txn.epoch = self._new_producer_id(), 0
        elif expected_epoch is None or txn.epoch == NO_EPOCH or expected_epoch == txn.epoch:
            txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.epoch
            txn.epoch += 1
        elif expected_epoch != txn.last_epoch:
            return InitAnswer(PRODUCER_FENCED, NO_PRODUCER_ID, NO_EPOCH)
        # else: the retry of the InitProducerId answered last, whose answer the client lost: the same answer.
        txn.timeout_ms = timeout_ms
        return InitAnswer(NONE, txn.producer_id, txn.epoch)

    @staticmethod
    def _is_this_producer(txn: Transaction, expected: tuple[int, int]) -> bool:
        """Whether a client naming ``expected`` (producer id, epoch) may be this transactional id's
        instance (its epoch is checked when it is bumped): any other is a zombie and is fenced."""
        producer_id, epoch = expected
        return (
            txn.epoch == NO_EPOCH  # created just now: a client recovering from an unknown producer id
            or producer_id == txn.producer_id
            or (producer_id == txn.last_producer_id and _epoch_exhausted(epoch))  # a retry across a new producer id
        )

    # ---- AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit ----

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[int, Transaction | None]:
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if txn.epoch != epoch:
            return PRODUCER_FENCED, None
        return NONE, txn

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]], now_ms: int
    ) -> int:
        """Add partitions to the producer's transaction, beginning it if none is open."""
        return self._add(transactional_id, producer_id, epoch, frozenset(partitions), frozenset(), now_ms)

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str, now_ms: int) -> int:
        """Add a consumer group whose offsets the transaction commits (AddOffsetsToTxn)."""
        return self._add(transactional_id, producer_id, epoch, frozenset(), frozenset((group,)), now_ms)

    def _add(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: frozenset[tuple[str, int]],
        groups: frozenset[str],
        now_ms: int,
    ) -> int:
        if not transactional_id:
            return INVALID_REQUEST
        known = self.transactions.get(transactional_id)
        if known is not None and known.state in _PREPARED:
            # Kafka answers this before it looks at the producer: the client waits for the ending.
            return CONCURRENT_TRANSACTIONS
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state is not TxnState.ONGOING:
            txn.state, txn.started_ms = TxnState.ONGOING, now_ms
            txn.partitions, txn.groups = frozenset(), frozenset()
        txn.partitions |= partitions
        txn.groups |= groups
        return NONE

    def check_offset_commit(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> int:
        """Whether TxnOffsetCommit may store offsets of ``group`` in the producer's open transaction:
        the producer is current, and AddOffsetsToTxn added the group to an Ongoing transaction."""
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state is not TxnState.ONGOING or group not in txn.groups:
            return INVALID_TXN_STATE
        return NONE

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, partition: tuple[str, int]) -> int:
        """Whether a Produce of the producer may write to ``partition`` (topic, index): the producer
        is current and the partition is in its Ongoing transaction (INVALID_TXN_STATE otherwise, as
        Kafka's verification of a transactional write answers)."""
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        if txn.state is not TxnState.ONGOING or partition not in txn.partitions:
            return INVALID_TXN_STATE
        return NONE

    # ---- EndTxn, timeouts, completion ----

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> tuple[int, Markers | None]:
        """Commit or abort the producer's transaction: (NONE, markers to write) when it ends now;
        (NONE, None) for the retry of an end already done; an error otherwise."""
        if not transactional_id:
            return INVALID_REQUEST, None
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error, None
        state = txn.state
        if state is TxnState.ONGOING:
            txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return NONE, self._markers(txn, commit)
        if state in _PREPARED:  # either ending, while the markers are written: wait and retry
            return CONCURRENT_TRANSACTIONS, None
        if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return NONE, None  # the retry of an ending already done
        return INVALID_TXN_STATE, None

    def end_txn_bumping(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> tuple[int, Markers | None]:
        """EndTxn of transaction version 2: as ``end_txn``, the epoch bumped at the ending (the
        module's docstring); the new producer id and epoch are then the transaction's."""
        if not transactional_id:
            return INVALID_REQUEST, None
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return INVALID_PRODUCER_ID_MAPPING, None
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        previous = (producer_id, epoch) == (txn.last_producer_id, txn.last_epoch) or (
            producer_id == txn.producer_id and epoch == txn.epoch - 1
        )
        if previous and txn.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            # The epoch before the last ending's bump (or a timeout's): the retry of that ending gets
            # the same answer; the other ending (a commit after the coordinator aborted it) is
            # INVALID_TXN_STATE, as Kafka 4.4 answers it.
            return (NONE, None) if txn.state is done else (INVALID_TXN_STATE, None)
        if producer_id != txn.producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        if epoch != txn.epoch:
            return PRODUCER_FENCED, None
        if txn.state in _PREPARED:
            return CONCURRENT_TRANSACTIONS, None
        if txn.state is not TxnState.ONGOING and commit:
            return INVALID_TXN_STATE, None
        if txn.state is not TxnState.ONGOING:
            txn.partitions, txn.groups = frozenset(), frozenset()  # an abort of nothing: no marker to write
        txn.last_producer_id, txn.last_epoch = txn.producer_id, txn.epoch
        marker_producer, marker_epoch = txn.producer_id, txn.epoch + 1
        if _epoch_exhausted(txn.epoch):
            txn.producer_id, txn.epoch = self._new_producer_id(), 0
        else:
            txn.epoch += 1
        txn.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        return NONE, Markers(transactional_id, marker_producer, marker_epoch, commit, txn.partitions, txn.groups)

    def timed_out(self, now_ms: int) -> list[Markers]:
        """Abort every Ongoing transaction older than its timeout, fencing its producer (its epoch
        bumped: the producer's next request is answered PRODUCER_FENCED); the markers to write."""
        return [
            self._fence_and_abort(txn)
            for txn in self.transactions.values()
            if txn.state is TxnState.ONGOING and now_ms - txn.started_ms > txn.timeout_ms
        ]

    def next_deadline_ms(self) -> int | None:
        """When the first Ongoing transaction times out (ms, as ``now_ms``), or None."""
        deadlines = [t.started_ms + t.timeout_ms for t in self.transactions.values() if t.state is TxnState.ONGOING]
        return min(deadlines, default=None)

    def complete(self, transactional_id: str) -> None:
        """The transaction's markers are written: it is CompleteCommit or CompleteAbort."""
        txn = self.transactions[transactional_id]
        if txn.state not in _PREPARED:
            raise ValueError(f"transaction {transactional_id!r} is {txn.state.value}, not being ended")
        txn.state = TxnState.COMPLETE_COMMIT if txn.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        txn.partitions, txn.groups, txn.started_ms = frozenset(), frozenset(), -1

    def _fence_and_abort(self, txn: Transaction) -> Markers:
        """Bump an Ongoing transaction's epoch (no answer ever carries this epoch) and prepare its abort."""
        txn.last_producer_id, txn.last_epoch = NO_PRODUCER_ID, NO_EPOCH
        txn.epoch = min(txn.epoch + 1, _MAX_EPOCH)  # an exhausted epoch was rotated before it reached the last
        txn.state = TxnState.PREPARE_ABORT
        return self._markers(txn, commit=False)

    @staticmethod
    def _markers(txn: Transaction, commit: bool) -> Markers:
        return Markers(txn.transactional_id, txn.producer_id, txn.epoch, commit, txn.partitions, txn.groups)

    def recover(self) -> list[Markers]:
        """After a restart: the markers to write so that no transaction stays open. A Prepare state's
        decision was answered, so it is carried out; an Ongoing transaction is aborted and its
        producer fenced."""
        markers = []
        for txn in self.transactions.values():
            if txn.state in _PREPARED:
                markers.append(self._markers(txn, txn.state is TxnState.PREPARE_COMMIT))
            elif txn.state is TxnState.ONGOING:
                markers.append(self._fence_and_abort(txn))
        return markers

    # ---- durable state ----

    def to_json(self) -> dict[str, object]:
        """Every transactional id's state, as the coordinator's state file stores it."""
        return {
            "version": _STATE_VERSION,
            "transactions": {
                txn.transactional_id: {
                    "producer_id": txn.producer_id,
                    "epoch": txn.epoch,
                    "last_producer_id": txn.last_producer_id,
                    "last_epoch": txn.last_epoch,
                    "timeout_ms": txn.timeout_ms,
                    "state": txn.state.value,
                    "partitions": sorted([topic, partition] for topic, partition in txn.partitions),
                    "groups": sorted(txn.groups),
                    "started_ms": txn.started_ms,
                }
                for txn in self.transactions.values()
            },
        }

    def load_json(self, data: object) -> None:
        """Take the state ``to_json`` wrote; TransactionCoordinatorStateError names what is wrong."""
        if not isinstance(data, Mapping) or data.get("version") != _STATE_VERSION:
            raise TransactionCoordinatorStateError(
                f"the transaction state is not version {_STATE_VERSION} of the coordinator's state"
            )
        stored = data.get("transactions")
        if not isinstance(stored, Mapping):
            raise TransactionCoordinatorStateError("the transaction state has no 'transactions' object")
        transactions = {}
        for transactional_id, fields in stored.items():
            try:
                transactions[transactional_id] = Transaction(
                    transactional_id=str(transactional_id),
                    producer_id=_int(fields["producer_id"]),
                    epoch=_int(fields["epoch"]),
                    timeout_ms=_int(fields["timeout_ms"]),
                    state=TxnState(fields["state"]),
                    partitions=frozenset((str(topic), _int(partition)) for topic, partition in fields["partitions"]),
                    groups=frozenset(str(group) for group in fields["groups"]),
                    started_ms=_int(fields["started_ms"]),
                    last_producer_id=_int(fields["last_producer_id"]),
                    last_epoch=_int(fields["last_epoch"]),
                )
            except (KeyError, TypeError, ValueError) as error:
                raise TransactionCoordinatorStateError(
                    f"transactional id {transactional_id!r} is damaged in the transaction state ({error!r})"
                ) from None
        self.transactions = transactions


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    return value


def fenced_error_for(error: int, request_has_producer_fenced: bool) -> int:
    """PRODUCER_FENCED for requests of versions that know it, INVALID_PRODUCER_EPOCH for older ones
    (Kafka answers older clients so)."""
    if error == PRODUCER_FENCED and not request_has_producer_fenced:
        return INVALID_PRODUCER_EPOCH
    return error
