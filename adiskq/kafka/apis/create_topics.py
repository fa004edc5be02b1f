"""CreateTopics (key 19): new streams under ROOT, with their partition counts.

``num_partitions`` -1 takes the gateway's default; a replication factor other than 1 (or -1, the
default) is refused with INVALID_REPLICATION_FACTOR: this is one broker. Topic configs are refused
with INVALID_CONFIG (a stream's settings are set through adiskq), and replica assignments with
INVALID_REPLICA_ASSIGNMENT.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, nested, register, respond
from .._topics import InvalidTopicError, TopicExistsError, check_topic_name
from ._common import NO_THROTTLE, error_code_for, error_message_for

__all__ = ["create_topics"]

logger = logging.getLogger("adiskq.kafka")


@register(19, "CreateTopics", min_version=2, max_version=7)
async def create_topics(context: RequestContext, request: Any) -> Any:
    """Create each topic; an error code and message per topic."""
    results = []
    for topic in request.topics:
        code, message, partitions = await _create(context, request, topic)
        results.append(
            nested(
                request,
                "CreatableTopicResult",
                name=topic.name,
                topic_id=context.gateway.topic_id(topic.name),
                error_code=code,
                error_message=message,
                num_partitions=partitions if code == ErrorCode.none else -1,
                replication_factor=1 if code == ErrorCode.none else -1,
                configs=() if code == ErrorCode.none else None,
            )
        )
    return respond(request, "CreateTopicsResponse", throttle_time=NO_THROTTLE, topics=tuple(results))


async def _create(context: RequestContext, request: Any, topic: Any) -> tuple[ErrorCode, str | None, int]:
    topics = context.gateway.topics
    partitions = topics.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    try:
        check_topic_name(topic.name)
    except InvalidTopicError as error:
        return ErrorCode.invalid_topic_exception, str(error), partitions
    if topic.replication_factor not in (-1, 1):
        return (
            ErrorCode.invalid_replication_factor,
            f"replication factor {topic.replication_factor}: this gateway is one broker, so 1 is the only one",
            partitions,
        )
    if topic.assignments:
        return (
            ErrorCode.invalid_replica_assignment,
            "this gateway is one broker: give no replica assignment",
            partitions,
        )
    if topic.configs:
        names = ", ".join(config.name for config in topic.configs)
        return (
            ErrorCode.invalid_config,
            f"topic configs ({names}) are not taken: set a stream's retention and sizes through adiskq",
            partitions,
        )
    if partitions < 1:
        return ErrorCode.invalid_partitions, f"{partitions} partitions: a topic has at least 1", partitions
    if topics.exists(topic.name):
        return ErrorCode.topic_already_exists, f"topic {topic.name!r} already exists", partitions
    if request.validate_only:
        return ErrorCode.none, None, partitions
    try:
        await topics.create(topic.name, partitions)
    except TopicExistsError as error:
        return ErrorCode.topic_already_exists, error_message_for(context.gateway, error), partitions
    except Exception as error:
        return error_code_for(error), error_message_for(context.gateway, error), partitions
    logger.info("adiskq: created topic %s with %d partitions", topic.name, partitions)
    return ErrorCode.none, None, partitions
