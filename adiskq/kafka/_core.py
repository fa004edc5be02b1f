"""The gateway's shared state (``GatewayCore``) and one connection's (``Connection``).

Handlers see both through their ``RequestContext``. Nothing here does network I/O.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Final, Literal

import anyio

from .._async import wakeup
from ._fetching import FetchSession
from ._idempotence import ProducerIds, Sequences
from ._topics import Topics

__all__ = ["CLUSTER_ID", "NODE_ID", "Connection", "GatewayCore"]

NODE_ID: Final = 0  # the one broker's id, leader of every partition
CLUSTER_ID: Final = "adiskq"
_TOPIC_IDS: Final = uuid.UUID("6a1d57c0-8a5e-4b3c-9f55-0a75ea5e0000")


class GatewayCore:
    """What every request handler of one gateway shares."""

    def __init__(
        self,
        root: str,
        *,
        partitions: int,
        flush: Literal["async", "sync"],
        auto_create: bool,
        shared: bool,
        advertised_host: str,
        advertised_port: int,
    ) -> None:
        self.topics = Topics(root, default_partitions=partitions, flush=flush, shared=shared)
        self.auto_create = auto_create
        self.advertised_host = advertised_host
        self.advertised_port = advertised_port
        self.producer_ids = ProducerIds()
        self.sequences = Sequences()
        self.connections: set[Connection] = set()
        self.closing = False  # set as the gateway shuts down: long polls answer at once
        # Whatever a handler module keeps for the whole gateway (the group coordinator, credentials).
        self.extensions: dict[str, object] = {}
        self._partition_locks: dict[tuple[str, int], anyio.Lock] = {}

    def partition_lock(self, topic: str, partition: int) -> anyio.Lock:
        """The lock an idempotent or transactional write holds from its checks to its write, and a
        transaction's marker while it is written: so no marker comes between a batch's check
        against its transaction and the batch, and no two batches of a producer race their sequences."""
        lock = self._partition_locks.get((topic, partition))
        if lock is None:
            lock = self._partition_locks[topic, partition] = anyio.Lock()
        return lock

    @staticmethod
    def topic_id(name: str) -> uuid.UUID:
        """A stable id for a topic name (Kafka's Metadata v10+ carries one)."""
        return uuid.uuid5(_TOPIC_IDS, name)

    def wake_fetches(self) -> None:
        """End every long poll now (the gateway is closing)."""
        for connection in self.connections:
            connection.fetches.waiter.wake()


@dataclasses.dataclass(eq=False)
class Connection:
    """One client connection's state."""

    peer: str
    fetches: FetchSession
    # What a handler keeps for this connection (a SASL exchange's progress, the authenticated user).
    state: dict[str, object] = dataclasses.field(default_factory=dict)
    # No whole request received yet: the wait for the first is short (``first_request_timeout``), so a
    # socket that never speaks holds its file descriptor and connection slot only that long.
    silent: bool = True

    @classmethod
    def open(cls, peer: str, topics: Topics) -> Connection:
        """The state of a connection that has just been accepted."""
        return cls(peer, FetchSession(topics, wakeup.Waiter()))

    def close(self) -> None:
        """Release the connection's readers and watches."""
        self.fetches.close()
