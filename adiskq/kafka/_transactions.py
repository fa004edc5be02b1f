"""The gateway's transactions: the sans-IO ``TransactionCoordinator`` with its state on disk, the
markers that end each transaction written to its partitions, and the offsets it commits.

``TransactionService`` is what the handlers (``apis/init_producer_id.py``, ``add_partitions_to_txn``,
``add_offsets_to_txn``, ``txn_offset_commit``, ``end_txn``, ``produce``) use. Its rules:

- Every change of the coordinator's state is stored before the request that made it is answered
  (but a Complete state, below)
  (``kafka-transactions.json`` in the gateway's root folder, replaced atomically: a temporary file
  written and fsynced, renamed over the old, the folder fsynced), so a restart finds every decision
  a client was told.
- A transaction ends in three steps: its Prepare state is stored; a commit or abort marker is
  written to each of its partitions (``partition_writes.write_marker`` returns once the marker is on
  disk) and, on commit, the group offsets it holds are stored as the groups' committed offsets;
  then it is Complete. A crash before the Complete state is stored leaves a Prepare state, which the
  next start carries out (``recover``): writing a marker again is harmless (readers take the first
  marker after a transaction's records as its ending), so EndTxn is answered once the markers are on
  disk, and the Complete state is stored with the next change of the state (or within a second by
  ``run``, or at the gateway's stop) — but at once for a commit that held group offsets, whose
  offsets must not be stored again over a later commit. A client that is told its transaction
  committed can read all of it at once.
- Offsets a TxnOffsetCommit sends are pending, kept with the coordinator's state (so a Prepare
  Commit found at the start still commits them), and become the group's committed offsets only with
  the commit; an abort drops them.
- A transaction older than its timeout (``transaction.timeout.ms``) is aborted by the service's own
  task (``run``), which sleeps until the next deadline; its producer is fenced. The gateway's start
  aborts every transaction left open (no client can still be waiting to commit it), so readers never
  wait behind one for longer than the gateway is down. When the state file is missing (lost, or a
  root the gateway never stored a transaction in), the start finds the transactions left open in
  the topics' data instead (``partition_writes.open_transactions``) and aborts each, then stores
  the (empty) state so that the next start need not look again.
- Markers that could not be written (a full disk, a failing write) leave the transaction in its
  Prepare state, answered CONCURRENT_TRANSACTIONS (retriable) meanwhile; ``run`` tries again every
  second until they are written. A state that could not be stored is stored again before any
  marker is written (an EndTxn is answered CONCURRENT_TRANSACTIONS meanwhile; another request whose
  change could not be stored fails, closing the connection, and the client retries it).

The state file (``kafka-transactions.json``)::

    {"version": 1,
     "coordinator": <TransactionCoordinator.to_json()>,
     "offsets": {TRANSACTIONAL_ID: {GROUP: {TOPIC: {PARTITION: [offset, metadata, leader_epoch]}}}}}
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Final

import anyio
import anyio.to_thread

from .._async import partition_writes
from .._storage.files import atomic_write_json, fsync_dir, read_json
from .._storage.partition_reader import PartitionReader
from .._storage.transaction_outcomes import OpenTransactions as OpenTransactionsInData
from ._core import GatewayCore
from ._groups import groups_of
from ._search_progress import SearchProgress
from ._transactional_fetch import OpenTransactions
from .group_offsets import Committed
from .transaction_coordinator import (
    CONCURRENT_TRANSACTIONS,
    NONE,
    InitAnswer,
    Markers,
    TransactionCoordinator,
    TransactionCoordinatorStateError,
    TxnState,
)

__all__ = [
    "STATE_FILE",
    "MarkerWriter",
    "OffsetStore",
    "TransactionService",
    "install_transactions",
    "start_transactions",
    "transactions_of",
]

logger = logging.getLogger("adiskq.kafka")

STATE_FILE: Final = "kafka-transactions.json"
_FILE_VERSION: Final = 1
_RETRY_SECONDS: Final = 1.0  # how soon markers that failed to be written are tried again
# How long a Complete state may wait for the next save before ``run`` stores it itself: a restart
# before then finds the Prepare state and writes the markers again, which is all it costs.
_COMPLETE_SAVE_SECONDS: Final = 1.0
_KEY: Final = "transactions"
# Kafka's coordinator epoch (the leader epoch of its transaction log's partition) fences markers of
# a coordinator that lost its leadership; the gateway is the one coordinator there ever is.
COORDINATOR_EPOCH: Final = 0

# Writes the marker of ``markers`` to one partition, durably: (topic, partition, markers).
MarkerWriter = Callable[[str, int, Markers], Awaitable[None]]
# Stores a group's committed offsets of one topic, durably: (group, topic, {partition: Committed}).
OffsetStore = Callable[[str, str, Mapping[int, Committed]], Awaitable[None]]

# transactional id -> group -> topic -> partition -> offset
PendingOffsets = dict[str, dict[str, dict[str, dict[int, Committed]]]]


def now_ms() -> int:
    """The wall clock in milliseconds: a transaction's start is stored, and compared after a restart."""
    return time.time_ns() // 1_000_000


class TransactionService:
    """One gateway's transaction coordinator, its state file, and the endings of its transactions."""

    def __init__(
        self,
        root: str,
        coordinator: TransactionCoordinator,
        write_marker: MarkerWriter,
        store_offsets: OffsetStore,
        *,
        clock: Callable[[], int] = now_ms,
        abort_open_in_data: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.path = os.path.join(root, STATE_FILE)
        self.state_found = False  # whether ``load`` found a state file
        self._abort_open_in_data = abort_open_in_data
        self.coordinator = coordinator
        self.clock = clock
        self.pending: PendingOffsets = {}
        self._write_marker = write_marker
        self._store_offsets = store_offsets
        self._save_lock = anyio.Lock()
        self._unfinished: dict[str, Markers] = {}  # endings whose markers failed, tried again by ``run``
        self.open = OpenTransactions()  # what a Fetch needs: the LSO, and the aborted transactions
        self._deadline_moved: anyio.Event | None = None
        self._dirty = False  # the last save failed: what is in memory is not stored yet
        self._complete_since: float | None = None  # when a Complete state not stored yet was reached

    # -- the state file ------------------------------------------------------------------------

    def load(self) -> None:
        """Read the state file (none: no transaction yet); TransactionCoordinatorStateError when it
        is not one this gateway writes."""
        try:
            data = read_json(self.path)
        except FileNotFoundError:
            return
        except ValueError as error:
            raise TransactionCoordinatorStateError(f"{self.path} is not JSON ({error})") from None
        if not isinstance(data, dict) or data.get("version") != _FILE_VERSION:
            raise TransactionCoordinatorStateError(
                f"{self.path} is not version {_FILE_VERSION} of the gateway's transaction state"
            )
        self.coordinator.load_json(data.get("coordinator"))
        self.pending = _pending_from_json(data.get("offsets"), self.path)
        self.state_found = True

    def _snapshot(self) -> dict[str, object]:
        return {
            "version": _FILE_VERSION,
            "coordinator": self.coordinator.to_json(),
            "offsets": {
                transactional_id: {
                    group: {
                        topic: {str(p): [c.offset, c.metadata, c.leader_epoch] for p, c in partitions.items()}
                        for topic, partitions in topics.items()
                    }
                    for group, topics in groups.items()
                }
                for transactional_id, groups in self.pending.items()
            },
        }

    async def save(self) -> None:
        """Store the state as it is now, durably (before a request that changed it is answered)."""
        async with self._save_lock:
            snapshot = self._snapshot()  # taken under the lock: a later save never stores an older state
            self._complete_since = None  # this save stores every Complete state reached so far
            try:
                await anyio.to_thread.run_sync(self._write, snapshot)
            except OSError:
                self._dirty = True  # ``run`` stores it again (and no marker is written before it is)
                self._poke()
                raise
            self._dirty = False

    def _write(self, snapshot: dict[str, object]) -> None:
        folder = os.path.dirname(self.path)
        if not os.path.isdir(folder):  # a root folder no topic was created in yet
            os.makedirs(folder, exist_ok=True)
            fsync_dir(os.path.dirname(os.path.abspath(folder)))
        atomic_write_json(self.path, snapshot)

    # -- the requests --------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitAnswer:
        """InitProducerId of a transactional producer; an open transaction of an older instance is
        aborted before the answer (CONCURRENT_TRANSACTIONS: the client asks again)."""
        answer = self.coordinator.init_producer_id(transactional_id, timeout_ms, self.clock(), expected)
        if answer.markers is not None:
            if await self._prepared([answer.markers]):
                await self._finish(answer.markers)
        else:
            await self.save()
        self._poke()
        return answer

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> int:
        """AddPartitionsToTxn: the error code for all the partitions."""
        error = self.coordinator.add_partitions(transactional_id, producer_id, epoch, partitions, self.clock())
        if error == NONE:
            await self.save()
            self._poke()
        return error

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> int:
        """AddOffsetsToTxn: the error code."""
        error = self.coordinator.add_offsets(transactional_id, producer_id, epoch, group, self.clock())
        if error == NONE:
            await self.save()
            self._poke()
        return error

    async def commit_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group: str,
        offsets: Mapping[str, Mapping[int, Committed]],
    ) -> int:
        """TxnOffsetCommit: keep the offsets pending in the transaction; the error code."""
        error = self.coordinator.check_offset_commit(transactional_id, producer_id, epoch, group)
        if error != NONE:
            return error
        topics = self.pending.setdefault(transactional_id, {}).setdefault(group, {})
        for topic, partitions in offsets.items():
            topics.setdefault(topic, {}).update(partitions)
        await self.save()
        return NONE

    async def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, *, bump_epoch: bool = False
    ) -> int:
        """EndTxn: the error code, once the transaction has ended (or CONCURRENT_TRANSACTIONS when
        its markers could not be written yet: they are tried again, and the client retries).
        ``bump_epoch``: transaction version 2's EndTxn, the epoch bumped (``current``, after it)."""
        if bump_epoch:
            error, markers = self.coordinator.end_txn_bumping(transactional_id, producer_id, epoch, commit)
        else:
            error, markers = self.coordinator.end_txn(transactional_id, producer_id, epoch, commit)
        if markers is None:
            return error
        if not await self._prepared([markers]):
            return CONCURRENT_TRANSACTIONS  # ``run`` ends it once its Prepare state is stored; the client retries
        return NONE if await self._finish(markers) else CONCURRENT_TRANSACTIONS

    def current(self, transactional_id: str) -> tuple[int, int]:
        """The transactional id's producer id and epoch now."""
        txn = self.coordinator.transactions[transactional_id]
        return txn.producer_id, txn.epoch

    async def add_implicitly(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> int:
        """Transaction version 2: a Produce of a partition not in the producer's transaction adds it
        (beginning the transaction if none is open); the error code."""
        txn = self.coordinator.transactions.get(transactional_id)
        if (
            txn is not None
            and txn.state is TxnState.ONGOING
            and (topic, partition) in txn.partitions
            and (producer_id, epoch) == (txn.producer_id, txn.epoch)
        ):
            return NONE  # added already: nothing to store
        return await self.add_partitions(transactional_id, producer_id, epoch, [(topic, partition)])

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int) -> int:
        """May a Produce of this transactional producer write to (topic, partition)? Its error code."""
        return self.coordinator.check_produce(transactional_id, producer_id, epoch, (topic, partition))

    def has_pending_offsets(self, group: str, topic: str, partition: int) -> bool:
        """Whether an open transaction holds an offset of the group's partition (OffsetFetch with
        require_stable answers UNSTABLE_OFFSET_COMMIT for it, as Kafka does)."""
        return any(partition in groups.get(group, {}).get(topic, {}) for groups in self.pending.values())

    # -- endings -------------------------------------------------------------------------------

    async def _prepared(self, endings: list[Markers]) -> bool:
        """Store the Prepare states of ``endings`` before any of their markers is written; False
        (each left to ``run``, which stores the state first) when the state could not be stored."""
        try:
            await self.save()
        except OSError as error:
            logger.warning("adiskq: the transaction state could not be stored (%s); trying again", error)
            for markers in endings:
                self._unfinished[markers.transactional_id] = markers
            return False
        return True

    async def _finish(self, markers: Markers) -> bool:
        """Write the markers, commit or drop the offsets, store the Complete state; False (the
        transaction left in its Prepare state, for ``run`` to finish) when a write failed."""
        try:
            if self._dirty:
                await self.save()  # the Prepare state first: a marker never precedes its decision on disk

            # Each partition's marker is written and fsynced on its own: their syncs overlap.
            async def write(topic: str, partition: int) -> None:
                await self._write_marker(topic, partition, markers)

            async with anyio.create_task_group() as writing:
                for topic, partition in sorted(markers.partitions):
                    writing.start_soon(write, topic, partition)
            held = self.pending.get(markers.transactional_id, {})
            if markers.commit:
                for group in sorted(markers.groups):
                    for topic, offsets in sorted(held.get(group, {}).items()):
                        await self._store_offsets(group, topic, offsets)
        except Exception as error:
            # The markers' task group raises an ExceptionGroup: name what failed inside it.
            reasons = error.exceptions if isinstance(error, ExceptionGroup) else (error,)
            logger.warning(
                "adiskq: the %s markers of transaction %r could not be written (%s); trying again",
                "commit" if markers.commit else "abort",
                markers.transactional_id,
                "; ".join(str(reason) for reason in reasons),
            )
            self._unfinished[markers.transactional_id] = markers
            self._poke()
            return False
        self._unfinished.pop(markers.transactional_id, None)
        self.pending.pop(markers.transactional_id, None)
        self.coordinator.complete(markers.transactional_id)
        # The markers are durable, so the Complete state need not be stored before the answer: the
        # next save stores it (any request that changes the state saves), or ``run`` within
        # _COMPLETE_SAVE_SECONDS, or the gateway's stop. A restart before then finds the Prepare
        # state and writes the markers again, which readers take as the same ending. An ending that
        # committed group offsets is stored at once: writing them again after a restart could move
        # back an offset a consumer committed since, outside any transaction.
        if markers.commit and markers.groups:
            with contextlib.suppress(OSError):  # a failed save is stored again by ``run``
                await self.save()
        elif self._complete_since is None:
            self._complete_since = time.monotonic()
            self._poke()
        return True

    async def store_deferred(self) -> None:
        """Store a Complete state not stored yet (at the gateway's stop); a failure is logged."""
        if self._complete_since is None and not self._dirty:
            return
        try:
            await self.save()
        except OSError as error:
            logger.warning("adiskq: the transaction state could not be stored (%s)", error)

    async def recover(self) -> None:
        """At the start: carry out every decision stored in a Prepare state and abort every open
        transaction (a failed write is left to ``run``). Without a state file, the transactions the
        data holds open are aborted instead (a topic that cannot be searched, or a marker that cannot
        be written, stops the start: TransactionCoordinatorStateError saying what to do), and the
        state is stored so that the next start need not look again, unless no topic could hold a
        transaction (a root with no such topic is left as it was)."""
        if not self.state_found and self._abort_open_in_data is not None:
            if await self._abort_open_in_data():
                try:
                    await self.save()
                except OSError as error:  # the next start looks in the data again, which is just slower
                    logger.warning("adiskq: the transaction state could not be stored (%s)", error)
            self.state_found = True
        endings = self.coordinator.recover()
        if endings and await self._prepared(endings):
            for markers in endings:
                await self._finish(markers)

    async def run(self) -> None:
        """Abort transactions as they time out, and finish endings whose markers failed, until cancelled."""
        while True:
            self._deadline_moved = anyio.Event()
            deadline = self.coordinator.next_deadline_ms()
            delay = math.inf if deadline is None else max(0.0, (deadline - self.clock() + 1) / 1000)
            if self._unfinished or self._dirty:
                delay = min(delay, _RETRY_SECONDS)
            if self._complete_since is not None:
                delay = min(delay, max(0.0, self._complete_since + _COMPLETE_SAVE_SECONDS - time.monotonic()))
            with anyio.move_on_after(delay):
                await self._deadline_moved.wait()
            timed_out = self.coordinator.timed_out(self.clock())
            for markers in timed_out:
                logger.info("adiskq: transaction %r timed out; aborted", markers.transactional_id)
            if timed_out and not await self._prepared(timed_out):
                continue
            for markers in [*timed_out, *list(self._unfinished.values())]:
                await self._finish(markers)
            overdue = self._complete_since is not None and (
                time.monotonic() >= self._complete_since + _COMPLETE_SAVE_SECONDS
            )
            if self._dirty or overdue:
                with contextlib.suppress(OSError):
                    await self.save()

    def _poke(self) -> None:
        if self._deadline_moved is not None:
            self._deadline_moved.set()


def _pending_from_json(stored: object, path: str) -> PendingOffsets:
    if stored is None:
        return {}
    try:
        assert isinstance(stored, dict)
        return {
            str(transactional_id): {
                str(group): {
                    str(topic): {
                        int(partition): Committed(int(offset), str(metadata), int(leader_epoch))
                        for partition, (offset, metadata, leader_epoch) in partitions.items()
                    }
                    for topic, partitions in topics.items()
                }
                for group, topics in groups.items()
            }
            for transactional_id, groups in stored.items()
        }
    except (AssertionError, AttributeError, TypeError, ValueError) as error:
        raise TransactionCoordinatorStateError(f"the pending offsets in {path} are damaged ({error!r})") from None


def install_transactions(gateway: GatewayCore, service: TransactionService) -> TransactionService:
    """Give the gateway its transaction service."""
    gateway.extensions[_KEY] = service
    return service


def transactions_of(gateway: GatewayCore) -> TransactionService:
    """The gateway's transaction service (the server installs it at its start)."""
    service = gateway.extensions.get(_KEY)
    assert isinstance(service, TransactionService), "the gateway's transaction service is not installed"
    return service


def start_transactions(gateway: GatewayCore) -> TransactionService:
    """The gateway's transaction service, its state read from the root folder (not yet recovered:
    ``await service.recover()`` next, before the gateway answers)."""
    topics = gateway.topics

    async def write_marker(topic: str, partition: int, markers: Markers) -> None:
        if not topics.exists(topic):
            return  # the topic was deleted with the transaction's records: nothing is left to end
        async with gateway.partition_lock(topic, partition), topics.writing(topic, partition) as producer:
            await partition_writes.write_marker(
                producer, partition, markers.producer_id, markers.epoch, markers.commit, COORDINATOR_EPOCH
            )
            service.open.ended(topic, partition, markers.producer_id)

    async def store_offsets(group: str, topic: str, offsets: Mapping[int, Committed]) -> None:
        if topics.exists(topic):
            await groups_of(gateway).commit(group, topic, offsets)

    @contextlib.contextmanager
    def searching(topic: str) -> Iterator[None]:
        """A failure to search ``topic`` stops the start, saying what to do."""
        try:
            yield
        except Exception as error:
            raise TransactionCoordinatorStateError(
                f"{os.path.join(topics.root, STATE_FILE)} is missing, so the start looks for transactions "
                f"left open in every topic's data, and topic {topic!r} could not be searched ({error}); "
                "repair the topic (`adiskq check --repair`) or move its folder out of the root, then start again"
            ) from error

    def partitions_to_search(topic: str) -> list[tuple[int, PartitionReader, int, int]] | None:
        """Each partition of ``topic`` with a reader, its oldest offset and its end; None if its
        format holds no transactions."""
        if not topics.reader(topic).settings.holds_transactions:
            return None  # a format before transactions holds none
        found = []
        for partition in range(topics.partition_count(topic, fresh=True)):
            # Searched through a reader: the topic's writer is opened only to end what is found
            # (another process may hold the stream, as a library producer beside the gateway does).
            reader = PartitionReader(topics.reader(topic).partition(partition).directory, partition)
            found.append((partition, reader, *reader.bounds()))
        return found

    async def abort_open_in_data() -> bool:
        # No coordinator state: any transaction the data holds open is one no client can still end.
        # True if a topic could hold one (its data was looked at).
        plan: list[tuple[str, list[tuple[int, PartitionReader, int, int]]]] = []
        for topic in topics.names():
            with searching(topic):
                partitions = await anyio.to_thread.run_sync(partitions_to_search, topic)
            if partitions is not None:
                plan.append((topic, partitions))
        progress = None
        if plan:
            sizes = [end - oldest for _topic, partitions in plan for _partition, _reader, oldest, end in partitions]
            progress = SearchProgress(STATE_FILE, len(plan), len(sizes), sum(sizes))
        for topic, partitions in plan:
            with searching(topic):
                await abort_open_in_topic(topic, partitions, progress)
        if progress is not None:
            progress.finished()
        return bool(plan)

    async def abort_open_in_topic(
        topic: str, partitions: list[tuple[int, PartitionReader, int, int]], progress: SearchProgress | None
    ) -> None:
        """Abort what ``topic``'s ``partitions`` hold open."""
        for partition, reader, oldest, _end in partitions:
            reached = oldest

            def step(position: int) -> None:
                nonlocal reached
                if progress is not None:
                    progress.advance(max(0, position - reached))
                reached = max(reached, position)

            search = OpenTransactionsInData(reader)
            if not await anyio.to_thread.run_sync(search.catch_up, step):
                continue
            async with gateway.partition_lock(topic, partition), topics.writing(topic) as producer:
                found = await anyio.to_thread.run_sync(
                    partition_writes.open_transactions_with_epochs, producer, partition
                )
                for producer_id, (first, epoch) in sorted(found.items()):
                    logger.warning(
                        "adiskq: no transaction state (%s) but a transaction of producer id %d open in "
                        "%s/%d from offset %d; aborted",
                        STATE_FILE,
                        producer_id,
                        topic,
                        partition,
                        first,
                    )
                    await partition_writes.write_marker(
                        producer, partition, producer_id, epoch, False, COORDINATOR_EPOCH
                    )
                    service.open.ended(topic, partition, producer_id)
                    if progress is not None:
                        progress.aborted += 1

    service = TransactionService(
        topics.root,
        TransactionCoordinator(gateway.producer_ids.new),
        write_marker,
        store_offsets,
        abort_open_in_data=abort_open_in_data,
    )
    service.load()
    return install_transactions(gateway, service)
