"""What the Java client's happy path does not reach in the newer versions it speaks: a Fetch (v13+)
naming a topic id no topic has, and ListOffsets' newer specs on an empty partition and in a version
too old for them. The clients' own use is in ``test_java_client.py``."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from conftest import call
from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v6.request import ListOffsetsPartition as ListOffsetsPartitionV6
from kio.schema.list_offsets.v6.request import ListOffsetsRequest as ListOffsetsRequestV6
from kio.schema.list_offsets.v6.request import ListOffsetsTopic as ListOffsetsTopicV6
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from adiskq.kafka._core import GatewayCore

UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42


def fetch_by_id(port: int, topic_id: uuid.UUID, cluster_id: str | None = None) -> Any:
    """A Fetch v16 of partition 0 of the topic with that id, from offset 0, answered at once (with
    ``cluster_id``: that tagged field too)."""
    partition = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    request = FetchRequest(
        cluster_id=cluster_id,
        max_wait=dt.timedelta(0),
        min_bytes=0,
        topics=(FetchTopic(topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    return call(port, request)


def create(port: int, topic: str) -> None:
    """The topic, created by a Metadata request (auto-create)."""
    asked = (MetadataRequestTopic(topic_id=None, name=TopicName(topic)),)
    answer: Any = call(port, MetadataRequest(topics=asked, include_topic_authorized_operations=False))
    assert answer.topics[0].error_code == 0


def test_fetch_by_an_unknown_topic_id_answers_unknown_topic_id(gateway, topic: str) -> None:
    """A Fetch v16 naming an id no topic has gets UNKNOWN_TOPIC_ID for it, with the id; a topic's own
    id reads the topic."""
    create(gateway.gateway.port, topic)
    stranger = uuid.uuid4()
    answer = fetch_by_id(gateway.gateway.port, stranger)
    ((response,),) = [answer.responses]
    assert response.topic_id == stranger
    assert [p.error_code for p in response.partitions] == [UNKNOWN_TOPIC_ID]
    known = fetch_by_id(gateway.gateway.port, GatewayCore.topic_id(topic))
    ((response,),) = [known.responses]
    assert response.topic_id == GatewayCore.topic_id(topic)
    assert [(p.error_code, p.high_watermark) for p in response.partitions] == [(0, 0)]


def test_a_fetch_with_a_tagged_field_is_answered_as_one_without(gateway, topic: str) -> None:
    """A Fetch v16 carrying a tagged field (the cluster id a broker's Fetch names) reads the topic as
    the same Fetch without it does, and an unknown id in it still gets UNKNOWN_TOPIC_ID."""
    create(gateway.gateway.port, topic)
    with_tag = fetch_by_id(gateway.gateway.port, GatewayCore.topic_id(topic), cluster_id="adiskq")
    without = fetch_by_id(gateway.gateway.port, GatewayCore.topic_id(topic))
    assert with_tag == without
    ((response,),) = [with_tag.responses]
    assert [(p.error_code, p.high_watermark) for p in response.partitions] == [(0, 0)]
    stranger = uuid.uuid4()
    ((response,),) = [fetch_by_id(gateway.gateway.port, stranger, cluster_id="adiskq").responses]
    assert (response.topic_id, [p.error_code for p in response.partitions]) == (stranger, [UNKNOWN_TOPIC_ID])


def test_newer_offset_specs_on_an_empty_partition_and_in_an_older_version(gateway, topic: str) -> None:
    """On an empty partition the largest timestamp names no offset (-1); in v6, which predates it,
    asking for it is an INVALID_REQUEST."""
    create(gateway.gateway.port, topic)
    specs = (-3, -4, -5)  # largest timestamp, earliest local, latest tiered
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopic(
                name=TopicName(topic),
                partitions=tuple(ListOffsetsPartition(partition_index=0, timestamp=spec) for spec in specs),
            ),
        ),
    )
    answer: Any = call(gateway.gateway.port, request)
    got = [(p.error_code, p.offset, p.timestamp) for p in answer.topics[0].partitions]
    assert got == [(0, -1, -1), (0, 0, -1), (0, -1, -1)]
    old = ListOffsetsRequestV6(
        replica_id=-1,
        isolation_level=0,
        topics=(
            ListOffsetsTopicV6(
                name=TopicName(topic), partitions=(ListOffsetsPartitionV6(partition_index=0, timestamp=-3),)
            ),
        ),
    )
    answer = call(gateway.gateway.port, old)
    assert [p.error_code for p in answer.topics[0].partitions] == [INVALID_REQUEST]
