"""CreateTopics (key 19): new streams under ROOT, with their partition counts and settings.

``num_partitions`` -1 takes the gateway's default; a replication factor other than 1 (or -1, the
default) is refused with INVALID_REPLICATION_FACTOR: this is one broker. A replica assignment may
name broker 0, the only one, once a partition (partitions 0..n-1; ``num_partitions`` and
``replication_factor`` then -1, as Kafka requires); any other is INVALID_REPLICA_ASSIGNMENT. Topic
configs become the stream's settings (``_topic_configs.py``); one adiskq cannot honour is
INVALID_CONFIG. A topic is created whole or not at all, and one the gateway's open-files limit could
not hold is refused with POLICY_VIOLATION (``_open_files.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ..._storage.settings import StreamSettings
from .._core import NODE_ID
from .._registry import RequestContext, nested, register, respond
from .._topic_configs import InvalidConfigError, settings_for
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


def assignment_refused(assignments: Any) -> str | None:
    """Why a replica assignment cannot be served by this one broker (None: it can: every partition
    0..n-1 once, each on broker 0 alone)."""
    indexes = sorted(assignment.partition_index for assignment in assignments)
    if indexes != list(range(len(indexes))):
        return f"the assignment names partitions {indexes}: name each of 0..{len(indexes) - 1} once"
    for assignment in assignments:
        if list(assignment.broker_ids) != [NODE_ID]:
            return (
                f"partition {assignment.partition_index} is assigned to brokers {list(assignment.broker_ids)}: "
                f"this gateway is one broker, id {NODE_ID}, so [{NODE_ID}] is the only assignment"
            )
    return None


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
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return (
                ErrorCode.invalid_request,
                "give either a replica assignment or num_partitions and replication_factor, not both",
                partitions,
            )
        refused = assignment_refused(topic.assignments)
        if refused is not None:
            return ErrorCode.invalid_replica_assignment, refused, partitions
        partitions = len(topic.assignments)
    try:
        settings = settings_for({c.name: c.value for c in topic.configs or ()}, StreamSettings())
    except InvalidConfigError as error:
        return ErrorCode.invalid_config, str(error), partitions
    if partitions < 1:
        return ErrorCode.invalid_partitions, f"{partitions} partitions: a topic has at least 1", partitions
    if topics.exists(topic.name):
        return ErrorCode.topic_already_exists, f"topic {topic.name!r} already exists", partitions
    try:
        topics.budget.check_partitions(topic.name, partitions, shared=topics.shared)
        if request.validate_only:
            return ErrorCode.none, None, partitions
        await topics.create(topic.name, partitions, **settings)
    except TopicExistsError as error:
        return ErrorCode.topic_already_exists, error_message_for(context.gateway, error), partitions
    except Exception as error:
        return error_code_for(error), error_message_for(context.gateway, error), partitions
    logger.info("adiskq: created topic %s with %d partitions", topic.name, partitions)
    return ErrorCode.none, None, partitions
