"""CreatePartitions (key 37): more partitions for a topic (never fewer, as in Kafka).

The topic's producer reopens with the new count; a stream written by another producer at the same
time cannot grow (adiskq refuses while another producer is open) and gets an error saying so. An
assignment of the new partitions may name broker 0, the only one; a count the gateway's open-files
limit could not hold is refused with POLICY_VIOLATION.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._core import NODE_ID
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for, error_message_for

__all__ = ["create_partitions"]


@register(37, "CreatePartitions", min_version=0, max_version=3)
async def create_partitions(context: RequestContext, request: Any) -> Any:
    """Grow each topic to its requested partition count."""
    topics = context.gateway.topics
    results = []
    for topic in request.topics:
        code = ErrorCode.none
        message = None
        try:
            check_topic_name(topic.name)
            current = topics.partition_count(topic.name, fresh=True)
            if topic.assignments and any(list(a.broker_ids) != [NODE_ID] for a in topic.assignments):
                code = ErrorCode.invalid_replica_assignment
                message = f"this gateway is one broker, id {NODE_ID}: assign each new partition to [{NODE_ID}]"
            elif topic.assignments and len(topic.assignments) != topic.count - current:
                code = ErrorCode.invalid_replica_assignment
                message = f"{len(topic.assignments)} assignments for {topic.count - current} new partitions"
            elif topic.count <= current:
                code = ErrorCode.invalid_partitions
                message = f"topic {topic.name!r} has {current} partitions; the count can only grow"
            else:
                topics.budget.check_partitions(topic.name, topic.count, shared=topics.shared)
                if not request.validate_only:
                    await topics.grow(topic.name, topic.count)
        except Exception as error:
            code, message = error_code_for(error), error_message_for(context.gateway, error)
        results.append(
            nested(request, "CreatePartitionsTopicResult", name=topic.name, error_code=code, error_message=message)
        )
    return respond(request, "CreatePartitionsResponse", throttle_time=NO_THROTTLE, results=tuple(results))
