"""The group protocol's state machine, without sockets: joins, syncs, heartbeats, leaves and timeouts."""

from __future__ import annotations

from adiskq.kafka import group_errors as err
from adiskq.kafka.group_coordinator import GroupCoordinator, GroupState, JoinResult, Pending, SyncResult

SESSION_MS = 10_000
REBALANCE_MS = 30_000


def join(
    coordinator: GroupCoordinator,
    member_id: str = "",
    *,
    now: float = 0.0,
    protocols: list[tuple[str, bytes]] | None = None,
    instance: str | None = None,
    require_known: bool = False,
    group: str = "g",
    skip_assignment_known: bool = False,
) -> Pending[JoinResult]:
    return coordinator.join(
        group,
        member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=protocols or [("range", b"meta")],
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        client_id="client",
        client_host="/127.0.0.1",
        require_known_member_id=require_known,
        now=now,
        skip_assignment_known=skip_assignment_known,
    )


def sync(
    coordinator: GroupCoordinator,
    result: JoinResult,
    assignments: dict[str, bytes] | None = None,
    *,
    now: float = 0.0,
    instance: str | None = None,
) -> Pending[SyncResult]:
    return coordinator.sync(
        "g",
        result.member_id,
        result.generation_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name=result.protocol_name,
        assignments=list((assignments or {}).items()),
        now=now,
    )


def done(pending: Pending[JoinResult]) -> JoinResult:
    assert pending.result is not None, "the join is still waiting"
    return pending.result


def stable_pair(coordinator: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    """Two members, a in generation 1 alone, then a and b in generation 2, both synced."""
    a = done(join(coordinator))
    sync(coordinator, a, {a.member_id: b"A"})
    waiting_b = join(coordinator)
    assert waiting_b.result is None
    assert coordinator.heartbeat("g", a.member_id, a.generation_id, group_instance_id=None, now=0) == (
        err.REBALANCE_IN_PROGRESS
    )
    a2 = done(join(coordinator, a.member_id))
    b2 = done(waiting_b)
    leader, follower = (a2, b2) if a2.members else (b2, a2)
    waiting = sync(coordinator, follower)
    assert waiting.result is None
    sync(coordinator, leader, {a2.member_id: b"A2", b2.member_id: b"B2"})
    assert waiting.result == SyncResult(err.NONE, b"B2" if follower is b2 else b"A2", "consumer", "range")
    return a2, b2


def test_first_member_becomes_leader_of_generation_one() -> None:
    """A lone member's join completes at once: generation 1, itself the leader, its metadata listed."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    result = done(join(coordinator))
    assert result.error == err.NONE
    assert result.generation_id == 1
    assert result.leader == result.member_id
    assert [(m.member_id, m.metadata) for m in result.members] == [(result.member_id, b"meta")]
    assert coordinator.state("g") is GroupState.COMPLETING_REBALANCE


def test_leader_sync_hands_every_member_its_assignment() -> None:
    """The leader's SyncGroup assignments reach each follower waiting on its own SyncGroup."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, b = stable_pair(coordinator)
    assert coordinator.state("g") is GroupState.STABLE
    assert a.generation_id == b.generation_id == 2
    again = sync(coordinator, b)
    assert again.result == SyncResult(err.NONE, b"B2", "consumer", "range")


def test_kip394_first_join_is_answered_member_id_required() -> None:
    """A join without a member id, where the version demands it, gets MEMBER_ID_REQUIRED and an id to rejoin with."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    first = done(join(coordinator, require_known=True))
    assert first.error == err.MEMBER_ID_REQUIRED
    assert first.member_id
    second = done(join(coordinator, first.member_id, require_known=True))
    assert second.error == err.NONE
    assert second.member_id == first.member_id


def test_unknown_member_id_is_refused() -> None:
    """A join naming a member id the coordinator never gave out is UNKNOWN_MEMBER_ID."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    assert done(join(coordinator, "made-up")).error == err.UNKNOWN_MEMBER_ID


def test_expired_session_removes_member_and_rebalances() -> None:
    """A member silent past its session timeout is removed; the survivor rejoins alone in a new generation."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, b = stable_pair(coordinator)
    deadline = coordinator.next_deadline()
    assert deadline == SESSION_MS / 1000
    assert coordinator.heartbeat("g", a.member_id, 2, group_instance_id=None, now=5) == err.NONE
    coordinator.expire(SESSION_MS / 1000 + 0.001)
    assert coordinator.heartbeat("g", a.member_id, 2, group_instance_id=None, now=10.1) == err.REBALANCE_IN_PROGRESS
    assert coordinator.heartbeat("g", b.member_id, 2, group_instance_id=None, now=10.1) == err.UNKNOWN_MEMBER_ID
    again = done(join(coordinator, a.member_id, now=10.2))
    assert again.generation_id == 3
    assert [m.member_id for m in again.members] == [a.member_id]


def test_member_that_does_not_rejoin_in_time_is_dropped() -> None:
    """When the rebalance timeout passes, members that did not rejoin are removed and the rest go on."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, b = stable_pair(coordinator)
    waiting_c = join(coordinator, now=1)
    waiting_a = join(coordinator, a.member_id, now=1)
    assert waiting_a.result is None
    assert waiting_c.result is None
    for second in range(2, 30, 5):  # b stays alive but never rejoins
        assert coordinator.heartbeat("g", b.member_id, 2, group_instance_id=None, now=second) == (
            err.REBALANCE_IN_PROGRESS
        )
    coordinator.expire(1 + REBALANCE_MS / 1000)
    c = done(waiting_c)
    assert c.error == err.NONE
    assert c.generation_id == 3
    assert {m.member_id for m in done(waiting_a).members} | {m.member_id for m in c.members} == {
        a.member_id,
        c.member_id,
    }
    assert coordinator.heartbeat("g", b.member_id, 3, group_instance_id=None, now=32) == err.UNKNOWN_MEMBER_ID


def test_leave_rebalances_the_rest() -> None:
    """LeaveGroup removes the member at once; the others are told to rejoin."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, b = stable_pair(coordinator)
    assert coordinator.leave("g", b.member_id, None, now=1) == err.NONE
    assert coordinator.heartbeat("g", a.member_id, 2, group_instance_id=None, now=1) == err.REBALANCE_IN_PROGRESS
    assert done(join(coordinator, a.member_id, now=1)).generation_id == 3


def test_last_member_leaving_empties_the_group() -> None:
    """A group whose members all left is Empty, and a commit without a generation is accepted again."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a = done(join(coordinator))
    sync(coordinator, a, {a.member_id: b""})
    assert coordinator.check_commit("g", "", -1, None) == err.UNKNOWN_MEMBER_ID
    assert coordinator.leave("g", a.member_id, None, now=1) == err.NONE
    assert coordinator.state("g") is GroupState.EMPTY
    assert coordinator.check_commit("g", "", -1, None) == err.NONE


def test_commit_checks_generation_and_member() -> None:
    """OffsetCommit from a member of an old generation is ILLEGAL_GENERATION, from a stranger UNKNOWN_MEMBER_ID."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, _ = stable_pair(coordinator)
    assert coordinator.check_commit("g", a.member_id, 2, None) == err.NONE
    assert coordinator.check_commit("g", a.member_id, 1, None) == err.ILLEGAL_GENERATION
    assert coordinator.check_commit("g", "stranger", 2, None) == err.UNKNOWN_MEMBER_ID


def test_commit_with_a_generation_to_a_group_that_has_none_is_illegal_generation() -> None:
    """OffsetCommit naming a generation of a group that does not exist is ILLEGAL_GENERATION, as
    Kafka answers (test_differential_protocol.py compares the two)."""
    coordinator = GroupCoordinator()
    assert coordinator.check_commit("nobody's", "stranger", 3, None) == err.ILLEGAL_GENERATION
    assert coordinator.check_commit("nobody's", "", -1, None) == err.NONE


def test_follower_rejoining_with_same_metadata_does_not_rebalance() -> None:
    """A Stable follower that rejoins unchanged gets the current generation back; nobody else rebalances."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, b = stable_pair(coordinator)
    follower = b if a.members else a
    again = done(join(coordinator, follower.member_id, now=1))
    assert again.generation_id == 2
    assert coordinator.state("g") is GroupState.STABLE


def test_changed_metadata_rebalances() -> None:
    """A member rejoining with new subscription metadata (as cooperative-sticky does) starts a rebalance."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a, b = stable_pair(coordinator)
    follower = b if a.members else a
    waiting = join(coordinator, follower.member_id, now=1, protocols=[("range", b"other")])
    assert waiting.result is None
    assert coordinator.state("g") is GroupState.PREPARING_REBALANCE


def test_protocol_is_chosen_by_vote_among_common_ones() -> None:
    """The group runs the protocol every member supports that most members prefer."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    first = done(join(coordinator, protocols=[("cooperative-sticky", b"c"), ("range", b"r")]))
    assert first.protocol_name == "cooperative-sticky"
    sync(coordinator, first, {first.member_id: b""})
    waiting = join(coordinator, protocols=[("range", b"r2")])
    again = done(join(coordinator, first.member_id, protocols=[("cooperative-sticky", b"c"), ("range", b"r")]))
    assert again.protocol_name == "range"
    assert done(waiting).protocol_name == "range"


def test_member_without_a_common_protocol_is_refused() -> None:
    """A join whose protocols share nothing with the group's is INCONSISTENT_GROUP_PROTOCOL."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    done(join(coordinator, protocols=[("range", b"")]))
    assert done(join(coordinator, protocols=[("roundrobin", b"")])).error == err.INCONSISTENT_GROUP_PROTOCOL


def test_session_timeout_outside_bounds_is_refused() -> None:
    """A session timeout below the gateway's minimum is INVALID_SESSION_TIMEOUT."""
    coordinator = GroupCoordinator(min_session_timeout_ms=SESSION_MS + 1)
    assert done(join(coordinator)).error == err.INVALID_SESSION_TIMEOUT


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    """A static member (group.instance.id) that restarts takes its old place and assignment; no rebalance."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    first = done(join(coordinator, instance="i-1"))
    sync(coordinator, first, {first.member_id: b"L"}, instance="i-1")
    waiting = join(coordinator, instance="i-2")
    leader = done(join(coordinator, first.member_id, instance="i-1"))
    second = done(waiting)
    assert leader.leader == first.member_id
    follower_sync = sync(coordinator, second, instance="i-2")
    sync(coordinator, leader, {first.member_id: b"L", second.member_id: b"S"}, instance="i-1")
    assert follower_sync.result is not None
    assert follower_sync.result.assignment == b"S"
    restarted = done(join(coordinator, instance="i-2", now=1))
    assert restarted.error == err.NONE
    assert restarted.member_id != second.member_id
    assert restarted.generation_id == second.generation_id
    assert coordinator.state("g") is GroupState.STABLE
    got = sync(coordinator, restarted, instance="i-2")
    assert got.result is not None
    assert got.result.assignment == b"S"
    assert coordinator.heartbeat("g", second.member_id, 2, group_instance_id="i-2", now=1) == err.FENCED_INSTANCE_ID


def stable_static_pair(coordinator: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    """Static members i-1 (the leader, assigned b"L") and i-2 (assigned b"S"), Stable in generation 2."""
    first = done(join(coordinator, instance="i-1"))
    sync(coordinator, first, {first.member_id: b"L"}, instance="i-1")
    waiting = join(coordinator, instance="i-2")
    leader = done(join(coordinator, first.member_id, instance="i-1"))
    follower = done(waiting)
    assert leader.leader == first.member_id
    follower_sync = sync(coordinator, follower, instance="i-2")
    sync(coordinator, leader, {first.member_id: b"L", follower.member_id: b"S"}, instance="i-1")
    assert follower_sync.result is not None
    assert coordinator.state("g") is GroupState.STABLE
    return leader, follower


def test_static_leader_restart_keeps_the_group_stable() -> None:
    """A static leader that restarts (KIP-345) takes its place without a rebalance: a client before
    JoinGroup v9 is named the old leader id, so it syncs as a follower for the assignment it had."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    leader, follower = stable_static_pair(coordinator)
    restarted = done(join(coordinator, instance="i-1", now=1))
    assert restarted.error == err.NONE
    assert restarted.member_id != leader.member_id
    assert restarted.generation_id == leader.generation_id
    assert restarted.leader == leader.member_id  # not its own id: it computes no assignment
    assert restarted.members == ()
    assert coordinator.state("g") is GroupState.STABLE
    got = sync(coordinator, restarted, instance="i-1", now=1)
    assert got.result is not None
    assert got.result.assignment == b"L"
    assert coordinator.heartbeat("g", follower.member_id, 2, group_instance_id="i-2", now=1) == err.NONE
    assert coordinator.heartbeat("g", restarted.member_id, 2, group_instance_id="i-1", now=1) == err.NONE
    assert coordinator.heartbeat("g", leader.member_id, 2, group_instance_id="i-1", now=1) == err.FENCED_INSTANCE_ID


def test_static_leader_restart_with_skip_assignment() -> None:
    """A restarted static leader that reads SkipAssignment (JoinGroup v9, KIP-814) is told it leads,
    with the members, and to skip the assignment; the group stays Stable."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    leader, follower = stable_static_pair(coordinator)
    restarted = done(join(coordinator, instance="i-1", now=1, skip_assignment_known=True))
    assert restarted.error == err.NONE
    assert restarted.skip_assignment
    assert restarted.leader == restarted.member_id
    assert [m.member_id for m in restarted.members] == [restarted.member_id, follower.member_id]
    assert restarted.generation_id == leader.generation_id
    got = sync(coordinator, restarted, instance="i-1", now=1)
    assert got.result is not None
    assert got.result.assignment == b"L"
    assert coordinator.state("g") is GroupState.STABLE
    assert coordinator.heartbeat("g", follower.member_id, 2, group_instance_id="i-2", now=1) == err.NONE


def test_old_static_member_id_is_fenced() -> None:
    """Requests under a static member's replaced id with its instance id are fenced."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    first = done(join(coordinator, instance="i-1"))
    sync(coordinator, first, {first.member_id: b""}, instance="i-1")
    restarted = done(join(coordinator, instance="i-1", now=1))
    assert restarted.member_id != first.member_id
    assert coordinator.leave("g", first.member_id, "i-1", now=1) == err.FENCED_INSTANCE_ID
    assert coordinator.leave("g", "", "i-1", now=1) == err.NONE


def test_empty_group_is_forgotten_after_it_expires() -> None:
    """A group whose last member's session ended goes Empty and leaves nothing due."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a = done(join(coordinator))
    sync(coordinator, a, {a.member_id: b""})
    coordinator.expire(SESSION_MS / 1000 + 1)
    assert coordinator.state("g") is GroupState.EMPTY
    assert coordinator.next_deadline() is None
    assert coordinator.describe("g").state is GroupState.DEAD


def test_membership_callback_follows_first_join_and_last_leave() -> None:
    """on_membership fires when a group gets its first member and when it loses its last."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    calls: list[tuple[str, bool]] = []
    coordinator.on_membership = lambda group, live: calls.append((group, live))
    a = done(join(coordinator))
    sync(coordinator, a, {a.member_id: b""})
    coordinator.leave("g", a.member_id, None, now=1)
    assert calls == [("g", True), ("g", False)]


def test_waker_is_called_when_a_pending_join_completes() -> None:
    """A JoinGroup that waits for the others wakes its waiter when the rebalance completes."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a = done(join(coordinator))
    sync(coordinator, a, {a.member_id: b""})
    waiting = join(coordinator)
    woken: list[bool] = []
    waiting.waker = lambda: woken.append(True)
    join(coordinator, a.member_id)
    assert woken == [True]
    assert done(waiting).generation_id == 2


def test_close_answers_waiting_joins_and_syncs() -> None:
    """Closing the coordinator answers every waiting JoinGroup and SyncGroup with NOT_COORDINATOR."""
    coordinator = GroupCoordinator(initial_rebalance_delay_ms=0)
    a = done(join(coordinator))
    sync(coordinator, a, {a.member_id: b""})
    waiting_b = join(coordinator)
    a2 = done(join(coordinator, a.member_id))
    b2 = done(waiting_b)
    follower = b2 if a2.members else a2
    waiting_sync = sync(coordinator, follower)
    assert waiting_sync.result is None
    coordinator.close()
    assert waiting_sync.result == SyncResult(err.NOT_COORDINATOR)
    waiting_join = join(coordinator)  # a third member: a rebalance the others have not joined yet
    assert waiting_join.result is None
    coordinator.close()
    assert done(waiting_join).error == err.NOT_COORDINATOR
