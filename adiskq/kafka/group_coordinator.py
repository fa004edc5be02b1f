"""The classic Kafka group protocol as a state machine: joins, syncs, heartbeats, leaves, timeouts.

Sans-IO: no sockets, no clock and no tasks. Every call takes ``now`` (monotonic seconds); the server
calls ``expire(now)`` when ``next_deadline()`` passes and after every call that may have moved it.
A JoinGroup or SyncGroup that must wait for the rest of the group returns a ``Pending`` whose result
is filled in (and its ``waker`` called) by a later call; the server awaits that.

The coordinator never assigns partitions: it elects a leader among the members that joined, hands it
every member's protocol metadata (the client's own assignor runs there: range, roundrobin,
cooperative-sticky) and forwards the leader's assignments on SyncGroup. A group moves through
Kafka's states::

    Empty --join--> PreparingRebalance --all joined / rebalance timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable --join with new metadata, leave, expiry--> PreparingRebalance

A member's session ends ``session_timeout_ms`` after its last request (a JoinGroup or SyncGroup it
waits on keeps it alive); an expired member is removed and the rest rebalance.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final, Generic, TypeVar

from . import group_errors as err

__all__ = [
    "DEFAULT_INITIAL_REBALANCE_DELAY_MS",
    "DEFAULT_MAX_SESSION_TIMEOUT_MS",
    "DEFAULT_MIN_SESSION_TIMEOUT_MS",
    "GroupCoordinator",
    "GroupDescription",
    "GroupState",
    "JoinResult",
    "JoinedMember",
    "MemberDescription",
    "Pending",
    "SyncResult",
]

# Kafka's broker defaults (group.min/max.session.timeout.ms, group.initial.rebalance.delay.ms): an
# empty group waits 3 s for more members before its first generation, so consumers started together
# get their share in one generation instead of a rebalance a member.
DEFAULT_MIN_SESSION_TIMEOUT_MS: Final = 6_000
DEFAULT_MAX_SESSION_TIMEOUT_MS: Final = 1_800_000
DEFAULT_INITIAL_REBALANCE_DELAY_MS: Final = 3_000

T = TypeVar("T")


class Pending(Generic[T]):
    """A response that a later event completes; the server sets ``waker`` and awaits it."""

    __slots__ = ("result", "waker")

    def __init__(self, result: T | None = None) -> None:
        self.result = result
        self.waker: Callable[[], None] | None = None

    def resolve(self, result: T) -> None:
        """Fill in the response (once; later calls are ignored) and wake whoever waits."""
        if self.result is not None:
            return
        self.result = result
        if self.waker is not None:
            self.waker()


class GroupState(Enum):
    """Kafka's names, as DescribeGroups and ListGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader's JoinGroup response lists it."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    """A JoinGroup response; ``members`` is filled for the leader only."""

    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    """A SyncGroup response."""

    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class MemberDescription:
    """A member as DescribeGroups shows it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    """A group as DescribeGroups shows it."""

    group_id: str
    state: GroupState
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


@dataclass(slots=True)
class _Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_deadline: float
    assignment: bytes = b""
    join: Pending[JoinResult] | None = None
    sync: Pending[SyncResult] | None = None

    def metadata(self, protocol: str) -> bytes:
        return next(meta for name, meta in self.protocols if name == protocol)

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        return list(protocols) == self.protocols


@dataclass(slots=True)
class _Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, _Member] = field(default_factory=dict)  # in join order
    static: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    # KIP-394: ids handed out with MEMBER_ID_REQUIRED, not members until they join with them.
    pending_ids: dict[str, float] = field(default_factory=dict)  # id -> deadline
    rebalance_deadline: float | None = None
    initial_delay: bool = False  # the rebalance waits out its deadline even when everyone joined


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics a member's "consumer" protocol metadata subscribes to (Kafka's
    ConsumerProtocolSubscription: int16 version, then int32 count and int16-length topic names, in
    every version); [] for metadata of another shape."""
    if len(metadata) < 6:
        return []
    count = int.from_bytes(metadata[2:6], "big", signed=True)
    topics, position = [], 6
    for _ in range(max(0, count)):
        if position + 2 > len(metadata):
            return []
        size = int.from_bytes(metadata[position : position + 2], "big", signed=True)
        position += 2
        if size < 0 or position + size > len(metadata):
            return []
        try:
            topics.append(metadata[position : position + size].decode())
        except UnicodeDecodeError:
            return []
        position += size
    return topics


def _fenced(group: _Group, member_id: str, group_instance_id: str | None) -> bool:
    """True if a request names a static member's instance id with an id that no longer holds it."""
    if group_instance_id is None:
        return False
    current = group.static.get(group_instance_id)
    return current is not None and current != member_id


def _fail_waiting(member: _Member, error: int) -> None:
    """Answer the member's waiting JoinGroup and SyncGroup with ``error``."""
    join, sync = member.join, member.sync
    member.join = member.sync = None
    if join is not None:
        join.resolve(JoinResult(error, member_id=member.member_id))
    if sync is not None:
        sync.resolve(SyncResult(error))


class GroupCoordinator:
    """Every consumer group of one gateway: the classic (pre-KIP-848) group protocol."""

    def __init__(
        self,
        *,
        min_session_timeout_ms: int = DEFAULT_MIN_SESSION_TIMEOUT_MS,
        max_session_timeout_ms: int = DEFAULT_MAX_SESSION_TIMEOUT_MS,
        initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    ) -> None:
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._groups: dict[str, _Group] = {}
        # Called after every change of a group's membership (the server's lock files follow it).
        self.on_membership: Callable[[str, bool], None] | None = None

    # -- queries -------------------------------------------------------------------------------

    def state(self, group_id: str) -> GroupState:
        """The group's state (EMPTY for a group this gateway has no member of)."""
        group = self._groups.get(group_id)
        return GroupState.EMPTY if group is None else group.state

    def groups(self) -> list[tuple[str, str, GroupState]]:
        """``(group id, protocol type, state)`` of every group with members or a generation."""
        return [(g.group_id, g.protocol_type or "", g.state) for g in self._groups.values()]

    def forget(self, group_id: str) -> bool:
        """Drop an Empty group (DeleteGroups); False (nothing done) while it has members."""
        group = self._groups.get(group_id)
        if group is not None and group.members:
            return False
        self._groups.pop(group_id, None)
        return True

    def subscribed_topics(self, group_id: str) -> set[str] | None:
        """The topics the members of a live consumer group subscribe to (from their "consumer"
        protocol metadata); None when the group has no members."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return None
        topics: set[str] = set()
        for member in group.members.values():
            for _name, metadata in member.protocols:
                topics.update(subscription_topics(metadata))
        return topics

    def describe(self, group_id: str) -> GroupDescription:
        """The group as DescribeGroups shows it (metadata and assignments only when Stable, as Kafka)."""
        group = self._groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD, "", "", [])
        stable = group.state is GroupState.STABLE
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol) if stable and group.protocol else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        protocol = group.protocol or "" if group.state is not GroupState.PREPARING_REBALANCE else ""
        return GroupDescription(group_id, group.state, group.protocol_type or "", protocol, members)

    def next_deadline(self) -> float | None:
        """The earliest time ``expire`` has something to do, or None."""
        deadlines: list[float] = []
        for group in self._groups.values():
            deadlines.extend(m.session_deadline for m in group.members.values() if m.join is None and m.sync is None)
            deadlines.extend(group.pending_ids.values())
            if group.rebalance_deadline is not None:
                deadlines.append(group.rebalance_deadline)
        return min(deadlines, default=None)

    # -- requests ------------------------------------------------------------------------------

    def join(
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
        now: float,
        skip_assignment_known: bool = False,
    ) -> Pending[JoinResult]:
        """A JoinGroup request; the result comes when the rebalance completes.

        ``skip_assignment_known``: the client reads JoinGroup's SkipAssignment (version 9 on, KIP-814),
        which a static leader's restart without a rebalance uses."""
        if not group_id:
            return Pending(JoinResult(err.INVALID_GROUP_ID, member_id=member_id))
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return Pending(JoinResult(err.INVALID_SESSION_TIMEOUT, member_id=member_id))
        if not protocol_type or not protocols:
            return Pending(JoinResult(err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _Group(group_id)
        if group.members and (
            protocol_type != group.protocol_type or not set(self._candidates(group)) & {name for name, _ in protocols}
        ):
            return Pending(JoinResult(err.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
        protocols = list(protocols)
        if not member_id:
            new_id = f"{group_instance_id or client_id}-{uuid.uuid4()}"
            if group_instance_id is not None:
                return self._join_static(
                    group, new_id, group_instance_id, protocol_type, protocols,
                    session_timeout_ms, rebalance_timeout_ms, client_id, client_host, now,
                    skip_assignment_known,
                )  # fmt: skip
            if require_known_member_id:
                # KIP-394: the member must come back with this id, so a client that retries a join
                # whose answer it lost does not leave an unknown member behind.
                group.pending_ids[new_id] = now + session_timeout_ms / 1000
                return Pending(JoinResult(err.MEMBER_ID_REQUIRED, member_id=new_id))
            member_id = new_id
        elif _fenced(group, member_id, group_instance_id):
            return Pending(JoinResult(err.FENCED_INSTANCE_ID, member_id=member_id))
        elif member_id in group.pending_ids:
            del group.pending_ids[member_id]
        elif member_id not in group.members:
            return Pending(JoinResult(err.UNKNOWN_MEMBER_ID, member_id=member_id))
        else:
            member = group.members[member_id]
            if member.group_instance_id != group_instance_id:
                return Pending(JoinResult(err.FENCED_INSTANCE_ID, member_id=member_id))
            return self._join_known(group, member, protocols, session_timeout_ms, rebalance_timeout_ms, now)
        member = _Member(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            now + session_timeout_ms / 1000,
        )
        return self._add_and_rebalance(group, member, now)

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Sequence[tuple[str, bytes]],
        now: float,
    ) -> Pending[SyncResult]:
        """A SyncGroup request; followers wait for the leader's assignments."""
        group = self._groups.get(group_id)
        if group is not None and _fenced(group, member_id, group_instance_id):
            return Pending(SyncResult(err.FENCED_INSTANCE_ID))
        if group is None or member_id not in group.members:
            return Pending(SyncResult(err.UNKNOWN_MEMBER_ID))
        member = group.members[member_id]
        if member.group_instance_id != group_instance_id:
            return Pending(SyncResult(err.FENCED_INSTANCE_ID))
        if generation_id != group.generation_id:
            return Pending(SyncResult(err.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol
        ):
            return Pending(SyncResult(err.INCONSISTENT_GROUP_PROTOCOL))
        member.session_deadline = now + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return Pending(SyncResult(err.REBALANCE_IN_PROGRESS))
        if group.state is GroupState.STABLE:
            return Pending(self._sync_result(group, member))
        # CompletingRebalance: wait for the leader's assignments.
        if member.sync is not None:
            member.sync.resolve(SyncResult(err.REBALANCE_IN_PROGRESS))
        pending: Pending[SyncResult] = Pending()
        member.sync = pending
        if member_id == group.leader:
            given = dict(assignments)
            for other in group.members.values():
                other.assignment = given.get(other.member_id, b"")
            group.state = GroupState.STABLE
            for other in group.members.values():
                if other.sync is not None:
                    waiting, other.sync = other.sync, None
                    other.session_deadline = now + other.session_timeout_ms / 1000
                    waiting.resolve(self._sync_result(group, other))
        return pending

    def heartbeat(
        self, group_id: str, member_id: str, generation_id: int, *, group_instance_id: str | None, now: float
    ) -> int:
        """A Heartbeat request: its error code (REBALANCE_IN_PROGRESS tells the member to rejoin)."""
        group = self._groups.get(group_id)
        if group is not None and _fenced(group, member_id, group_instance_id):
            return err.FENCED_INSTANCE_ID
        if group is None or member_id not in group.members:
            return err.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        if member.group_instance_id != group_instance_id:
            return err.FENCED_INSTANCE_ID
        if generation_id != group.generation_id:
            return err.ILLEGAL_GENERATION
        member.session_deadline = now + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return err.REBALANCE_IN_PROGRESS
        return err.NONE

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None, *, now: float) -> int:
        """One member of a LeaveGroup request (by member id, or by instance id when that is ``""``)."""
        group = self._groups.get(group_id)
        if group is None:
            return err.UNKNOWN_MEMBER_ID
        if group_instance_id is not None:
            known = group.static.get(group_instance_id)
            if known is None:
                return err.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return err.FENCED_INSTANCE_ID
            member_id = known
        if member_id in group.pending_ids:
            del group.pending_ids[member_id]
            return err.NONE
        member = group.members.get(member_id)
        if member is None:
            return err.UNKNOWN_MEMBER_ID
        self._remove(group, member, now)
        return err.NONE

    def check_commit(self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None) -> int:
        """May this OffsetCommit store offsets? Its error code (as Kafka's classic groups decide)."""
        group = self._groups.get(group_id)
        if generation_id < 0 and (group is None or group.state is GroupState.EMPTY):
            return err.NONE  # a consumer that commits without joining (manual assignment)
        if group is None:
            return err.ILLEGAL_GENERATION  # a generation of a group that has none, as Kafka answers
        if _fenced(group, member_id, group_instance_id):
            return err.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return err.UNKNOWN_MEMBER_ID
        if group.members[member_id].group_instance_id != group_instance_id:
            return err.FENCED_INSTANCE_ID
        if generation_id != group.generation_id:
            return err.ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            return err.REBALANCE_IN_PROGRESS
        return err.NONE

    def is_member(self, group_id: str, member_id: str) -> bool:
        """True while ``member_id`` belongs to the group (for OffsetFetch's member check)."""
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    def expire(self, now: float) -> None:
        """Apply every timeout due by ``now``: sessions, KIP-394 ids, rebalance deadlines."""
        for group in list(self._groups.values()):
            for pending_id, deadline in list(group.pending_ids.items()):
                if deadline <= now:
                    del group.pending_ids[pending_id]
            for member in list(group.members.values()):
                if member.join is None and member.sync is None and member.session_deadline <= now:
                    self._remove(group, member, now)
            if group.rebalance_deadline is not None and group.rebalance_deadline <= now:
                self._complete_join(group, now, timed_out=True)
            if group.state is GroupState.EMPTY and not group.members and not group.pending_ids:
                del self._groups[group.group_id]

    def close(self) -> None:
        """The gateway is stopping: every waiting JoinGroup and SyncGroup is answered NOT_COORDINATOR
        at once (the client looks for the coordinator again), instead of holding the shutdown."""
        for group in self._groups.values():
            for member in group.members.values():
                _fail_waiting(member, err.NOT_COORDINATOR)

    # -- internals -----------------------------------------------------------------------------

    def _join_static(
        self,
        group: _Group,
        new_id: str,
        instance_id: str,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        now: float,
        skip_assignment_known: bool,
    ) -> Pending[JoinResult]:
        """A static member (``group.instance.id``) joins with no member id: a restart of a known one
        takes the old member's place (fencing the old id) without a rebalance when nothing changed,
        the leader's too (KIP-345).

        A restarted leader must not compute a new assignment, which a Stable group would not hand
        out: as Kafka answers it, a client that reads SkipAssignment (KIP-814) is told it leads, with
        the members, and to skip the assignment; an older one is named the old leader id (no longer
        its own), so it takes the follower's part and syncs for the assignment it had."""
        member = _Member(
            new_id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            now + session_timeout_ms / 1000,
        )
        old_id = group.static.get(instance_id)
        old = group.members.get(old_id) if old_id is not None else None
        if old is None:
            group.static[instance_id] = new_id
            return self._add_and_rebalance(group, member, now)
        # Replace the old member in place (keeping the join order), fencing its id.
        member.assignment = old.assignment
        group.members = {
            (new_id if key == old_id else key): (member if key == old_id else m) for key, m in group.members.items()
        }
        group.static[instance_id] = new_id
        _fail_waiting(old, err.FENCED_INSTANCE_ID)
        was_leader = group.leader == old_id
        if was_leader:
            group.leader = new_id
        if group.state is GroupState.STABLE and old.matches(protocols):
            if not was_leader:
                return Pending(self._join_result(group, member, with_members=False))
            if skip_assignment_known:
                result = self._join_result(group, member, with_members=True)
                return Pending(replace(result, skip_assignment=True))
            assert old_id is not None
            return Pending(replace(self._join_result(group, member, with_members=False), leader=old_id))
        return self._rejoin(group, member, now)

    def _join_known(
        self,
        group: _Group,
        member: _Member,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: float,
    ) -> Pending[JoinResult]:
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_deadline = now + session_timeout_ms / 1000
        if group.state is GroupState.COMPLETING_REBALANCE and member.matches(protocols):
            # It lost the answer to its join: the same answer again.
            return Pending(self._join_result(group, member, with_members=member.member_id == group.leader))
        if group.state is GroupState.STABLE and member.member_id != group.leader and member.matches(protocols):
            return Pending(self._join_result(group, member, with_members=False))
        member.protocols = protocols
        return self._rejoin(group, member, now)

    def _rejoin(self, group: _Group, member: _Member, now: float) -> Pending[JoinResult]:
        if member.join is not None:
            member.join.resolve(JoinResult(err.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        pending: Pending[JoinResult] = Pending()
        member.join = pending
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now)
        self._maybe_complete_join(group, now)
        return pending

    def _add_and_rebalance(self, group: _Group, member: _Member, now: float) -> Pending[JoinResult]:
        was_empty = not group.members
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static[member.group_instance_id] = member.member_id
        if was_empty:
            group.protocol_type = member.protocol_type
            if self.on_membership is not None:
                self.on_membership(group.group_id, True)
        pending: Pending[JoinResult] = Pending()
        member.join = pending
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, now, initial=was_empty)
        self._maybe_complete_join(group, now)
        return pending

    def _prepare_rebalance(self, group: _Group, now: float, *, initial: bool = False) -> None:
        # Members waiting on a sync of the generation being abandoned rejoin.
        for member in group.members.values():
            if member.sync is not None:
                waiting, member.sync = member.sync, None
                waiting.resolve(SyncResult(err.REBALANCE_IN_PROGRESS))
        group.state = GroupState.PREPARING_REBALANCE
        group.initial_delay = initial and self.initial_rebalance_delay_ms > 0
        if group.initial_delay:
            group.rebalance_deadline = now + self.initial_rebalance_delay_ms / 1000
        else:
            timeout_ms = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
            group.rebalance_deadline = now + timeout_ms / 1000

    def _maybe_complete_join(self, group: _Group, now: float) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.initial_delay and group.rebalance_deadline is not None and group.rebalance_deadline > now:
            return  # the initial delay collects the consumers that start together into one generation
        if all(m.join is not None for m in group.members.values()):
            self._complete_join(group, now, timed_out=False)

    def _complete_join(self, group: _Group, now: float, *, timed_out: bool) -> None:
        group.rebalance_deadline = None
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if timed_out:
            # Dynamic members that did not rejoin in time are gone; static ones keep their place
            # until their session ends.
            for member in list(group.members.values()):
                if member.join is None and member.group_instance_id is None:
                    self._drop(group, member)
        joined = [m for m in group.members.values() if m.join is not None]
        group.generation_id += 1
        if not joined:
            group.state = GroupState.EMPTY
            group.protocol = None
            group.leader = None
            # An Empty group keeps its protocol type, as Kafka's does (ListGroups and DescribeGroups
            # still show a consumer group); the next first member sets it anew.
            if not group.members and self.on_membership is not None:
                self.on_membership(group.group_id, False)
            return
        group.protocol = self._select_protocol(group)
        if group.leader not in group.members or group.members[group.leader].join is None:
            group.leader = joined[0].member_id
        group.state = GroupState.COMPLETING_REBALANCE
        for member in group.members.values():
            member.assignment = b""
            if member.join is not None:
                waiting, member.join = member.join, None
                member.session_deadline = now + member.session_timeout_ms / 1000
                waiting.resolve(self._join_result(group, member, with_members=member.member_id == group.leader))

    def _join_result(self, group: _Group, member: _Member, *, with_members: bool) -> JoinResult:
        protocol = group.protocol or ""
        members = (
            tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(protocol)) for m in group.members.values())
            if with_members
            else ()
        )
        return JoinResult(
            err.NONE,
            group.generation_id,
            group.protocol_type,
            protocol,
            group.leader or "",
            member.member_id,
            members,
        )

    def _sync_result(self, group: _Group, member: _Member) -> SyncResult:
        return SyncResult(err.NONE, member.assignment, group.protocol_type, group.protocol)

    @staticmethod
    def _candidates(group: _Group) -> list[str]:
        """Protocols every member supports, in the first member's order of preference."""
        members = list(group.members.values())
        common = {name for name, _ in members[0].protocols}
        for member in members[1:]:
            common &= {name for name, _ in member.protocols}
        return [name for name, _ in members[0].protocols if name in common]

    def _select_protocol(self, group: _Group) -> str:
        """Kafka's vote: each member votes for the first common protocol it prefers; most votes win."""
        candidates = self._candidates(group)
        votes = dict.fromkeys(candidates, 0)
        for member in group.members.values():
            choice = next(name for name, _ in member.protocols if name in votes)
            votes[choice] += 1
        return max(candidates, key=lambda name: votes[name])

    def _drop(self, group: _Group, member: _Member) -> None:
        del group.members[member.member_id]
        if member.group_instance_id is not None and group.static.get(member.group_instance_id) == member.member_id:
            del group.static[member.group_instance_id]
        _fail_waiting(member, err.UNKNOWN_MEMBER_ID)
        if group.leader == member.member_id:
            group.leader = None

    def _remove(self, group: _Group, member: _Member, now: float) -> None:
        """A member left or its session ended: the others rebalance without it."""
        self._drop(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if group.members:
                self._prepare_rebalance(group, now)
            else:
                group.generation_id += 1
                group.state = GroupState.EMPTY
                group.protocol = None
                group.rebalance_deadline = None
                if self.on_membership is not None:
                    self.on_membership(group.group_id, False)
                return
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.members:
                self._maybe_complete_join(group, now)
            else:
                self._complete_join(group, now, timed_out=False)
