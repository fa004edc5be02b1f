"""Metadata (key 3): the one broker, and the topics with their partitions; creates missing topics.

A topic asked for by name that does not exist is created with the gateway's default partition count
when the gateway auto-creates and the request allows it (``allow_auto_topic_creation``, v4+; always
before v4), as Kafka does with ``auto.create.topics.enable``. Every partition's leader, replica and
in-sync replica is this broker (id 0).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ..._errors import StreamNotFoundError
from .._core import CLUSTER_ID, NODE_ID
from .._registry import RequestContext, nested, register, respond
from .._topics import InvalidTopicError, check_topic_name
from ._common import NO_THROTTLE, error_code_for

__all__ = ["metadata"]

logger = logging.getLogger("adiskq.kafka")


@register(3, "Metadata", min_version=0, max_version=13)
async def metadata(context: RequestContext, request: Any) -> Any:
    """The broker list (this gateway) and the topics asked for (all when none is named)."""
    gateway = context.gateway
    topics = gateway.topics
    requested = request.topics
    if requested is None or (request.__version__ == 0 and not requested):
        names: list[str | None] = list(topics.names())
        create = False
    else:
        names = [topic.name for topic in requested]
        create = gateway.auto_create and getattr(request, "allow_auto_topic_creation", True)
    answers = [await _describe(context, request, name, create) for name in names]
    broker = nested(
        request, "MetadataResponseBroker", node_id=NODE_ID, host=gateway.advertised_host, port=gateway.advertised_port
    )
    return respond(
        request,
        "MetadataResponse",
        throttle_time=NO_THROTTLE,
        brokers=(broker,),
        cluster_id=CLUSTER_ID,
        controller_id=NODE_ID,
        topics=tuple(answers),
        error_code=ErrorCode.none,  # v13+
    )


async def _describe(context: RequestContext, request: Any, name: str | None, create: bool) -> Any:
    gateway = context.gateway
    topics = gateway.topics

    def topic(error: ErrorCode, partitions: tuple[Any, ...] = ()) -> Any:
        return nested(
            request,
            "MetadataResponseTopic",
            error_code=error,
            name=name,
            topic_id=gateway.topic_id(name or ""),
            is_internal=False,
            partitions=partitions,
        )

    if name is None:
        return topic(ErrorCode.unknown_topic_id)
    try:
        check_topic_name(name)
        if not topics.exists(name):
            if not create:
                return topic(ErrorCode.unknown_topic_or_partition)
            if await topics.ensure(name):
                logger.info("adiskq: created topic %s with %d partitions", name, topics.default_partitions)
        count = topics.partition_count(name, fresh=True)
    except (InvalidTopicError, StreamNotFoundError, OSError, ValueError) as error:
        return topic(error_code_for(error))
    partitions = tuple(
        nested(
            request,
            "MetadataResponsePartition",
            error_code=ErrorCode.none,
            partition_index=index,
            leader_id=NODE_ID,
            leader_epoch=0,
            replica_nodes=(NODE_ID,),
            isr_nodes=(NODE_ID,),
            offline_replicas=(),
        )
        for index in range(count)
    )
    return topic(ErrorCode.none, partitions)
