"""The gateway's consumer groups: the coordinator's timers, and Kafka groups' offsets on disk.

``GroupService`` wraps the sans-IO ``GroupCoordinator`` for the server: it runs the one task that
applies session and rebalance timeouts when they are due (woken early whenever a request moved a
deadline, never polling), stores and reads committed offsets in worker threads (they fsync), and
holds ``groups/NAME/kafka.lock`` in each topic a live Kafka group commits or fetches offsets in, so
``adiskq offsets --reset-to`` refuses to move a group in use. Handlers find it with ``groups_of``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import anyio
import anyio.to_thread

from .._errors import GroupInUseError
from .._sansio.naming import group_folder
from .._storage.group_api import delete_group
from .._storage.offsets import list_groups
from . import group_errors as err
from ._core import GatewayCore
from ._topics import Topics
from .group_coordinator import GroupCoordinator, GroupState, JoinResult, Pending, SyncResult
from .group_offsets import (
    Committed,
    GroupHold,
    delete_offsets,
    fetch_offsets,
    load_protocol_type,
    store_offsets,
    store_protocol_type,
)

__all__ = ["GroupService", "group_id_refusal", "groups_of", "install_groups", "valid_group_id"]

_KEY = "groups"
T = TypeVar("T")


def valid_group_id(group_id: str) -> bool:
    """True if the group id can be stored under ``groups/`` (where its offsets live): any Kafka group
    id but an empty one or one too long for a folder name (``naming.group_folder``)."""
    return group_id_refusal(group_id) is None


def group_id_refusal(group_id: str) -> str | None:
    """Why the group id cannot be stored, or None when it can."""
    if not group_id:
        return "give a non-empty group id"
    try:
        group_folder(group_id)
    except ValueError:
        return "it is too long for a folder name (at most 255 bytes, each byte outside A-Z a-z 0-9 _ . - taking 3)"
    return None


class GroupService:
    """One gateway's group coordinator and its Kafka groups' stored offsets."""

    def __init__(self, topics: Topics, coordinator: GroupCoordinator, *, durable: bool = True) -> None:
        self.topics = topics
        self.coordinator = coordinator
        self.durable = durable
        coordinator.on_membership = self._membership_changed
        self._holds: dict[str, dict[str, GroupHold]] = {}  # group -> topic -> hold
        self._store_locks: dict[tuple[str, str], anyio.Lock] = {}
        self._deadline_moved: anyio.Event | None = None

    # -- the timer task ------------------------------------------------------------------------

    async def run(self) -> None:
        """Apply timeouts as they fall due, until cancelled (the server runs this in its task group)."""
        while True:
            self._deadline_moved = anyio.Event()
            deadline = self.coordinator.next_deadline()
            delay = math.inf if deadline is None else max(0.0, deadline - anyio.current_time())
            with anyio.move_on_after(delay):
                await self._deadline_moved.wait()
            self.coordinator.expire(anyio.current_time())

    def _poke(self) -> None:
        if self._deadline_moved is not None:
            self._deadline_moved.set()

    # -- the group protocol --------------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        *,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        skip_assignment_known: bool = False,
    ) -> JoinResult:
        """A JoinGroup, answered when the rebalance completes."""
        pending = self.coordinator.join(
            group_id,
            member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            client_id=client_id,
            client_host=client_host,
            require_known_member_id=require_known_member_id,
            now=anyio.current_time(),
            skip_assignment_known=skip_assignment_known,
        )
        self._poke()
        return await _wait(pending)

    async def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Sequence[tuple[str, bytes]],
    ) -> SyncResult:
        """A SyncGroup, answered when the leader's assignments are in."""
        pending = self.coordinator.sync(
            group_id,
            member_id,
            generation_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            now=anyio.current_time(),
        )
        self._poke()
        return await _wait(pending)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None) -> int:
        """A Heartbeat's error code."""
        error = self.coordinator.heartbeat(
            group_id, member_id, generation_id, group_instance_id=group_instance_id, now=anyio.current_time()
        )
        self._poke()
        return error

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None) -> int:
        """One member of a LeaveGroup: its error code."""
        error = self.coordinator.leave(group_id, member_id, group_instance_id, now=anyio.current_time())
        self._poke()
        return error

    # -- offsets -------------------------------------------------------------------------------

    def _lock(self, group_id: str, topic: str) -> anyio.Lock:
        lock = self._store_locks.get((group_id, topic))
        if lock is None:
            lock = self._store_locks[(group_id, topic)] = anyio.Lock()
        return lock

    async def _hold(self, group_id: str, topic: str) -> None:
        """While the group has members, hold its lock file in this topic."""
        if self.coordinator.state(group_id) is GroupState.EMPTY:
            return
        holds = self._holds.setdefault(group_id, {})
        hold = holds.get(topic)
        if hold is None:
            hold = holds[topic] = GroupHold(self.topics.path(topic), group_id)
        if not hold.held:
            await anyio.to_thread.run_sync(hold.acquire)
            if self.coordinator.state(group_id) is GroupState.EMPTY:  # the last member left meanwhile
                self._release(group_id)

    async def commit(self, group_id: str, topic: str, commits: Mapping[int, Committed]) -> None:
        """Store a topic's commits (durably, unless the gateway's streams are flushed asynchronously),
        and the group's protocol type while it has members."""
        path = self.topics.path(topic)
        protocol_type = self.coordinator.describe(group_id).protocol_type

        def store() -> None:
            store_offsets(path, group_id, commits, durable=self.durable)
            store_protocol_type(path, group_id, protocol_type, durable=self.durable)

        async with self._lock(group_id, topic):
            await self._hold(group_id, topic)
            await anyio.to_thread.run_sync(store)

    async def delete_offsets(self, group_id: str, topic: str, partitions: Iterable[int]) -> None:
        """Forget a topic's commits of these partitions (OffsetDelete)."""
        path = self.topics.path(topic)
        chosen = list(partitions)
        async with self._lock(group_id, topic):
            await anyio.to_thread.run_sync(lambda: delete_offsets(path, group_id, chosen, durable=self.durable))

    async def delete_group(self, group_id: str) -> int:
        """Delete an Empty group (DeleteGroups): its folder in every topic (offsets, metadata) and the
        coordinator's record of it. Kafka's error code: NON_EMPTY_GROUP while it has members (here,
        or a library ConsumerGroup of that name running), GROUP_ID_NOT_FOUND for a group that is nowhere."""
        if self.coordinator.describe(group_id).members:
            return err.NON_EMPTY_GROUP
        known = group_id in {name for name, _type, _state in self.coordinator.groups()}
        topics = await self.committed_topics(group_id)
        if not known and not topics:
            return err.GROUP_ID_NOT_FOUND
        self.coordinator.forget(group_id)
        self._release(group_id)
        for topic in topics:
            path = self.topics.path(topic)
            async with self._lock(group_id, topic):
                try:
                    await anyio.to_thread.run_sync(delete_group, path, group_id)
                except GroupInUseError:
                    return err.NON_EMPTY_GROUP
        return err.NONE

    async def fetch(self, group_id: str, topic: str, partitions: Iterable[int] | None) -> dict[int, Committed]:
        """A topic's committed offsets for these partitions (None: all committed)."""
        path = self.topics.path(topic)
        chosen = None if partitions is None else list(partitions)
        await self._hold(group_id, topic)
        return await anyio.to_thread.run_sync(lambda: fetch_offsets(path, group_id, chosen))

    async def committed_topics(self, group_id: str) -> list[str]:
        """The topics in which the group has a folder (an OffsetFetch for all topics reads these)."""

        def find() -> list[str]:
            return [name for name in self.topics.names() if group_id in list_groups(self.topics.path(name))]

        return await anyio.to_thread.run_sync(find)

    async def stored_groups(self) -> dict[str, str]:
        """Every group with a folder in some topic, and the protocol type stored for it ("" if none)
        (ListGroups shows them, as Kafka shows groups that only have committed offsets)."""

        def find() -> dict[str, str]:
            found: dict[str, str] = {}
            for topic in self.topics.names():
                path = self.topics.path(topic)
                for name in list_groups(path):
                    if not found.get(name):
                        found[name] = load_protocol_type(path, name)
            return found

        return await anyio.to_thread.run_sync(find)

    # -- lock files ----------------------------------------------------------------------------

    def _membership_changed(self, group_id: str, live: bool) -> None:
        if not live:
            self._release(group_id)

    def _release(self, group_id: str) -> None:
        for hold in self._holds.pop(group_id, {}).values():
            hold.release()

    def aclose(self) -> None:
        """Drop every lock file (the gateway is closing; its groups' members are gone with it)."""
        for group_id in list(self._holds):
            self._release(group_id)


async def _wait(pending: Pending[T]) -> T:
    """The pending response, once a later event filled it in."""
    if pending.result is None:
        done = anyio.Event()
        pending.waker = done.set
        await done.wait()
    assert pending.result is not None
    return pending.result


def install_groups(gateway: GatewayCore, coordinator: GroupCoordinator) -> GroupService:
    """Give the gateway a group service around ``coordinator``."""
    service = gateway.extensions[_KEY] = GroupService(gateway.topics, coordinator)
    return service


def groups_of(gateway: GatewayCore) -> GroupService:
    """The gateway's group service (created with Kafka's defaults if none was installed)."""
    service = gateway.extensions.get(_KEY)
    if service is None:
        service = install_groups(gateway, GroupCoordinator())
    assert isinstance(service, GroupService)
    return service
