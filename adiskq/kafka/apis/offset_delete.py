"""OffsetDelete (key 47): forget a group's committed offsets of some partitions.

As in Kafka: the group must exist (GROUP_ID_NOT_FOUND otherwise); while it has members, the
partitions of topics they subscribe to are refused with GROUP_SUBSCRIBED_TO_TOPIC and the others
deleted (a group with members whose protocol is not "consumer" is refused whole, NON_EMPTY_GROUP); a
topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION for its partitions.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import groups_of, valid_group_id
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for

__all__ = ["offset_delete"]

_CONSUMER: Final = "consumer"


@register(47, "OffsetDelete", min_version=0, max_version=0)
async def offset_delete(context: RequestContext, request: Any) -> Any:
    """Delete the offsets of each partition the group may let go of."""
    service = groups_of(context.gateway)
    group_id = request.group_id
    error = ErrorCode.none
    subscribed: set[str] = set()
    if not valid_group_id(group_id):
        error = ErrorCode.invalid_group_id
    else:
        description = service.coordinator.describe(group_id)
        if description.members:
            if description.protocol_type != _CONSUMER:
                error = ErrorCode.non_empty_group
            subscribed = service.coordinator.subscribed_topics(group_id) or set()
        elif group_id not in {name for name, _type, _state in service.coordinator.groups()} and not (
            await service.committed_topics(group_id)
        ):
            error = ErrorCode.group_id_not_found
    if error:
        return respond(request, "OffsetDeleteResponse", error_code=error, throttle_time=NO_THROTTLE, topics=())
    topics = []
    for topic in request.topics:
        indexes = [p.partition_index for p in topic.partitions]
        codes = dict.fromkeys(indexes, ErrorCode.none)
        try:
            check_topic_name(topic.name)
            if not context.gateway.topics.exists(topic.name):
                codes = dict.fromkeys(indexes, ErrorCode.unknown_topic_or_partition)
            elif topic.name in subscribed:
                codes = dict.fromkeys(indexes, ErrorCode.group_subscribed_to_topic)
            else:
                await service.delete_offsets(group_id, topic.name, indexes)
        except Exception as failure:
            codes = dict.fromkeys(indexes, error_code_for(failure))
        topics.append(
            nested(
                request,
                "OffsetDeleteResponseTopic",
                name=topic.name,
                partitions=tuple(
                    nested(request, "OffsetDeleteResponsePartition", partition_index=index, error_code=code)
                    for index, code in codes.items()
                ),
            )
        )
    return respond(
        request, "OffsetDeleteResponse", error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=tuple(topics)
    )
