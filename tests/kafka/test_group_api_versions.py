"""Every advertised version of the group APIs, spoken with kafka-python's codec (generated from Kafka's
own message schemas): a whole group life per round, each API at the round's version."""

from __future__ import annotations

import pathlib
import socket
import struct
import warnings
from typing import Any

import pytest
from confluent_kafka import Producer
from group_support import bootstrap, running_gateway

# kafka-python loads its schemas with importlib.resources' deprecated read_text and open_text.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin.groups import (
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse


from adiskq.kafka._registry import API_TABLE

TOPIC = "versions"
MEMBER_ID_REQUIRED = 79


class Wire:
    """One connection: a request of kafka-python's classes out, its response decoded back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation_id = 0

    def call(self, request: Any, response_class: Any, version: int) -> Any:
        self.correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation_id, client_id="versions")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", self.sock.recv(4, socket.MSG_WAITALL))
        data = self.sock.recv(size, socket.MSG_WAITALL)
        response = response_class[version].decode(data, header=True)
        assert response._header.correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


def version_of(api_key: int, round_number: int) -> int:
    """The round's version of an API: its lowest advertised one plus the round, at most its highest."""
    api = API_TABLE[api_key]
    return min(api.min_version + round_number, api.max_version)


ROUNDS = (
    max(
        api.max_version - api.min_version for key, api in API_TABLE.items() if key in (8, 9, 10, 11, 12, 13, 14, 15, 16)
    )
    + 1
)


def group_life(wire: Wire, port: int, round_number: int) -> None:
    """FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, DescribeGroups,
    ListGroups and LeaveGroup for a group of one member, each API in this round's version."""
    group = f"round-{round_number}"
    v = {key: version_of(key, round_number) for key in (8, 9, 10, 11, 12, 13, 14, 15, 16)}

    found = wire.call(
        FindCoordinatorRequest(key=group, key_type=0, coordinator_keys=[group]), FindCoordinatorResponse, v[10]
    )
    coordinator = found.coordinators[0] if v[10] >= 4 else found
    assert (coordinator.error_code, coordinator.port) == (0, port)

    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"subscription")
    join = JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        group_instance_id=None, protocol_type="consumer", protocols=[protocol], reason=None,
    )  # fmt: skip
    joined = wire.call(join, JoinGroupResponse, v[11])
    if v[11] >= 4:
        assert joined.error_code == MEMBER_ID_REQUIRED
        join.member_id = joined.member_id
        joined = wire.call(join, JoinGroupResponse, v[11])
    assert joined.error_code == 0
    member, generation = joined.member_id, joined.generation_id
    assert joined.leader == member
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"subscription")]

    assignment = SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"assignment")
    synced = wire.call(
        SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member, group_instance_id=None,
            protocol_type="consumer", protocol_name="range", assignments=[assignment],
        ),
        SyncGroupResponse,
        v[14],
    )  # fmt: skip
    assert (synced.error_code, synced.assignment) == (0, b"assignment")

    beat = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member, group_instance_id=None)
    assert wire.call(beat, HeartbeatResponse, v[12]).error_code == 0

    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=3, committed_leader_epoch=-1, commit_timestamp=-1,
        committed_metadata=f"metadata {round_number}",
    )  # fmt: skip
    commit = OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member, group_instance_id=None,
        retention_time_ms=-1, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=TOPIC, partitions=[partition])],
    )  # fmt: skip
    committed = wire.call(commit, OffsetCommitResponse, v[8])
    assert [p.error_code for t in committed.topics for p in t.partitions] == [0]

    if v[9] >= 8:
        topics = [
            OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])
        ]
        request_group = OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, member_id=None, member_epoch=-1, topics=topics
        )
        fetch = OffsetFetchRequest(groups=[request_group], require_stable=False)
        fetched = wire.call(fetch, OffsetFetchResponse, v[9])
        (answer,) = [p for g in fetched.groups for t in g.topics for p in t.partitions]
    else:
        topic = OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])
        fetched = wire.call(
            OffsetFetchRequest(group_id=group, topics=[topic], require_stable=False), OffsetFetchResponse, v[9]
        )
        (answer,) = [p for t in fetched.topics for p in t.partitions]
    assert (answer.error_code, answer.committed_offset, answer.metadata) == (0, 3, f"metadata {round_number}")

    described = wire.call(
        DescribeGroupsRequest(groups=[group], include_authorized_operations=False), DescribeGroupsResponse, v[15]
    )
    (description,) = described.groups
    assert (description.group_state, description.protocol_data) == ("Stable", "range")
    assert [m.member_assignment for m in description.members] == [b"assignment"]

    listed = wire.call(ListGroupsRequest(states_filter=[], types_filter=[]), ListGroupsResponse, v[16])
    assert group in [g.group_id for g in listed.groups]

    leave = LeaveGroupRequest(
        group_id=group, member_id=member,
        members=[LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None, reason=None)],
    )  # fmt: skip
    left = wire.call(leave, LeaveGroupResponse, v[13])
    assert left.error_code == 0
    assert all(m.error_code == 0 for m in getattr(left, "members", []) or [])
    described = wire.call(
        DescribeGroupsRequest(groups=[group], include_authorized_operations=False), DescribeGroupsResponse, v[15]
    )
    assert described.groups[0].group_state == "Empty"


@pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_advertised_group_api_version(tmp_path: pathlib.Path, backend: str) -> None:
    """A group's whole life works in every version the gateway advertises for each group API."""
    with running_gateway(str(tmp_path), backend, partitions=1) as gateway:
        producer = Producer({"bootstrap.servers": bootstrap(gateway)})
        producer.produce(TOPIC, b"x")
        assert producer.flush(30) == 0
        wire = Wire(gateway.port)
        try:
            for round_number in range(ROUNDS):
                group_life(wire, gateway.port, round_number)
        finally:
            wire.close()
