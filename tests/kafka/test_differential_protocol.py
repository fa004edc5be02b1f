"""The same bad or unusual requests, sent byte for byte to the gateway and to Apache Kafka
(differential.py), are answered with the same error codes: unknown partitions, offsets out of range,
a session timeout out of bounds, a member or generation the group does not know; an idempotent
producer's retried batch is answered with its first offset and a gap in its sequence is refused.

The requests are encoded with kio (Kafka's own message schemas), in versions both brokers serve.
"""

from __future__ import annotations

import datetime as dt
import socket
import struct
import time
from typing import Any

import pytest
from conftest import call, receive_exactly
from differential import Differential, Side
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.heartbeat.v3.request import HeartbeatRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import GroupId, TopicName

from adiskq.kafka.wire.batch import KafkaRecord, encode_batch

FIRST = 1_700_000_000_000


def create(side: Side, topic: str, partitions: int = 1) -> None:
    """Create ``topic`` (CreateTopics v5), asserting it was."""
    request = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName(topic), num_partitions=partitions, replication_factor=1, assignments=(), configs=()
            ),
        ),
        timeout=dt.timedelta(seconds=30),
        validate_only=False,
    )
    answer: Any = call(side.port, request)
    assert answer.topics[0].error_code.value == 0, answer
    led(side, topic, partitions)


def led(side: Side, topic: str, partitions: int) -> None:
    """Until every partition of ``topic`` answers ListOffsets as its leader: Kafka answers
    CreateTopics, and even lists the leader in Metadata, a moment before the broker serves the new
    partitions (NOT_LEADER_OR_FOLLOWER, which clients retry and these raw requests would not).
    Each try is a request, answered before the next is sent."""
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopic(
                name=TopicName(topic),
                partitions=tuple(ListOffsetsPartition(partition_index=p, timestamp=-1) for p in range(partitions)),
            ),
        ),
    )
    deadline = time.monotonic() + 30
    while True:
        answer: Any = call(side.port, request)
        errors = [partition.error_code.value for partition in answer.topics[0].partitions]
        if errors == [0] * partitions:
            return
        assert time.monotonic() < deadline, f"{topic}'s partitions are not served after 30 s: {answer}"


def batch(timestamp: int = FIRST, *, count: int = 1, producer: tuple[int, int] = (-1, -1), sequence: int = -1) -> bytes:
    """A record batch of ``count`` records (values ``sequence + i``), of a producer id and epoch."""
    records = [KafkaRecord(i, timestamp, b"k", b"%d" % (sequence + i), []) for i in range(count)]
    return encode_batch(
        base_offset=0,
        records=records,
        base_timestamp_ms=timestamp,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=sequence,
    )


def produce(side: Side, topic: str, records: bytes, partition: int = 0) -> tuple[int, int]:
    """Produce v9 with acks=all; (error code, base offset) of the partition's answer."""
    request = ProduceRequest(
        acks=-1,
        timeout=dt.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=TopicName(topic), partition_data=(PartitionProduceData(index=partition, records=records),)
            ),
        ),
    )
    answer: Any = call(side.port, request).responses[0].partition_responses[0]  # type: ignore[attr-defined]
    return answer.error_code.value, answer.base_offset


def test_error_codes_of_partition_requests(differential: Differential) -> None:
    """Produce to a partition the topic lacks, Fetch past the end, ListOffsets of a partition the
    topic lacks, and OffsetFetch of a group that never committed: the same answers."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        fetch = FetchRequest(
            max_wait=dt.timedelta(milliseconds=10),
            min_bytes=1,
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(FetchPartition(partition=0, fetch_offset=100, partition_max_bytes=1 << 20),),
                ),
            ),
            forgotten_topics_data=(),
        )
        listing = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic), partitions=(ListOffsetsPartition(partition_index=9, timestamp=-1),)
                ),
            ),
        )
        fetched: Any = call(side.port, fetch)
        listed: Any = call(side.port, listing)
        offsets: Any = call(
            side.port,
            OffsetFetchRequest(
                group_id=GroupId(side.name("g")),
                topics=(OffsetFetchRequestTopic(name=TopicName(topic), partition_indexes=(0,)),),
                require_stable=False,
            ),
        )
        committed = offsets.topics[0].partitions[0]
        return {
            "produce to a missing partition": produce(side, topic, batch(), partition=5)[0],
            "fetch past the end": fetched.responses[0].partitions[0].error_code.value,
            "list offsets of a missing partition": listed.topics[0].partitions[0].error_code.value,
            "offset fetch, never committed": (committed.committed_offset, committed.error_code.value),
            "offset fetch, group error": offsets.error_code.value,
        }

    differential.compare(scenario)


def test_error_codes_of_group_requests(differential: Differential) -> None:
    """JoinGroup with a session timeout under the broker's minimum (6 s), a Heartbeat and an
    OffsetCommit from a member the group does not know: the same error codes."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        group = GroupId(side.name("g"))
        joined: Any = call(
            side.port,
            JoinGroupRequest(
                group_id=group,
                session_timeout=dt.timedelta(milliseconds=1000),
                rebalance_timeout=dt.timedelta(seconds=10),
                member_id="",
                protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
            ),
        )
        beat: Any = call(side.port, HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody"))
        commit = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=3,
            member_id="nobody",
            topics=(
                OffsetCommitRequestTopic(
                    name=TopicName(topic),
                    partitions=(
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata=""),
                    ),
                ),
            ),
        )
        committed: Any = call(side.port, commit)
        return {
            "join, session timeout 1 s": joined.error_code.value,
            "heartbeat, unknown member": beat.error_code.value,
            "commit, unknown member": committed.topics[0].partitions[0].error_code.value,
        }

    differential.compare(scenario)


def init_producer(side: Side) -> tuple[int, int]:
    """A producer id and epoch (InitProducerId v4, no transactional id)."""
    answer: Any = call(
        side.port, InitProducerIdRequest(transactional_id=None, transaction_timeout=dt.timedelta(seconds=60))
    )
    assert answer.error_code.value == 0, answer
    return answer.producer_id, answer.producer_epoch


def test_idempotent_retries_and_gaps(differential: Differential) -> None:
    """An idempotent producer's batches: a retry of an earlier batch is answered with that batch's
    offset and not written again; a batch whose sequence skips ahead is refused
    (OUT_OF_ORDER_SEQUENCE_NUMBER); the partition then holds each record once."""

    def scenario(side: Side) -> dict[str, Any]:
        topic = side.name()
        create(side, topic)
        producer = init_producer(side)
        answers = [
            produce(side, topic, batch(count=3, producer=producer, sequence=0)),
            produce(side, topic, batch(count=2, producer=producer, sequence=3)),
            produce(side, topic, batch(count=2, producer=producer, sequence=3)),  # a retry of the last
            produce(side, topic, batch(count=1, producer=producer, sequence=9)),  # a gap
            produce(side, topic, batch(count=1, producer=producer, sequence=5)),
        ]
        listing = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=(
                ListOffsetsTopic(
                    name=TopicName(topic), partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),)
                ),
            ),
        )
        end: Any = call(side.port, listing)
        return {"answers": answers, "end": end.topics[0].partitions[0].offset}

    differential.compare(scenario)


def test_timestamps_kafka_stores(differential: Differential) -> None:
    """Records stamped in 1970, at 0, before 1970 and at the int64 millisecond furthest in the past
    (-9,223,372,036,855 ms, beyond what nanoseconds in an int64 hold) are stored, at offsets 0..4."""

    def scenario(side: Side) -> list[tuple[int, int]]:
        topic = side.name()
        create(side, topic)
        return [produce(side, topic, batch(stamp)) for stamp in (FIRST, 1, 0, -5, -9_223_372_036_855)]

    differential.compare(scenario)


def test_a_timestamp_far_in_the_future_is_refused_as_kafka_refuses_it(differential: Differential) -> None:
    """A record stamped 9,223,372,036,855 ms is refused with INVALID_TIMESTAMP (Kafka refuses any
    timestamp more than message.timestamp.after.max.ms, one hour by default, ahead of its clock),
    not with a retriable error that holds the producer for message.timeout.ms."""

    def scenario(side: Side) -> tuple[int, int]:
        topic = side.name()
        create(side, topic)
        return produce(side, topic, batch(9_223_372_036_855))

    differential.compare(scenario)


def test_any_group_id_kafka_accepts(differential: Differential) -> None:
    """FindCoordinator for group ids with ':', '/' and ',' is answered as for any other id."""

    def scenario(side: Side) -> list[int]:
        answers = []
        for group in ("app:billing", "team/svc", "roundrobin,range"):
            answer: Any = call(side.port, FindCoordinatorRequest(key=f"{side.prefix}-{group}"))
            answers.append(answer.error_code.value)
        return answers

    differential.compare(scenario)


def answered_or_closed(side: Side, api_key: int, api_version: int, body: bytes) -> str:
    """Send one raw request (v1 header); ``"closed"`` if the broker closes the connection instead of
    answering, else the answer's bytes after the correlation id, in hex."""
    header = struct.pack(">hhih", api_key, api_version, 7, 1) + b"t"
    with socket.create_connection(("127.0.0.1", side.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        try:
            size = struct.unpack(">i", receive_exactly(sock, 4))[0]
            return receive_exactly(sock, size)[4:].hex()
        except (ConnectionError, TimeoutError):
            return "closed"


def test_null_arrays_in_requests(differential: Differential, caplog: pytest.LogCaptureFixture) -> None:
    """Requests whose arrays are null (length -1) where Kafka's schema allows none: ListOffsets v1
    and DescribeGroups v1 are treated as Kafka treats them."""

    def scenario(side: Side) -> dict[str, str]:
        return {
            "list offsets v1": answered_or_closed(side, 2, 1, struct.pack(">ii", -1, -1)),
            "describe groups v1": answered_or_closed(side, 15, 1, struct.pack(">i", -1)),
        }

    differential.compare(scenario)
    failures = [record.getMessage() for record in caplog.records if record.exc_info is not None]
    assert not failures, f"the gateway failed on the requests instead of refusing them: {failures}"
