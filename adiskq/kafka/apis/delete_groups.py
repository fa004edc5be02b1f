"""DeleteGroups (key 42): delete Empty groups, their committed offsets in every topic with them.

As in Kafka: a group with members is refused with NON_EMPTY_GROUP (here also while a library
``ConsumerGroup`` of that name runs), a group that is nowhere with GROUP_ID_NOT_FOUND, a group id
that cannot be one with INVALID_GROUP_ID.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._groups import groups_of, valid_group_id
from .._registry import RequestContext, nested, register, respond
from ._common import NO_THROTTLE, error_code_for

__all__ = ["delete_groups"]


@register(42, "DeleteGroups", min_version=0, max_version=2)
async def delete_groups(context: RequestContext, request: Any) -> Any:
    """Delete each group; an error code a group."""
    service = groups_of(context.gateway)
    results = []
    for group_id in request.groups_names:
        if not valid_group_id(group_id):
            code = ErrorCode.invalid_group_id
        else:
            try:
                code = ErrorCode(await service.delete_group(group_id))
            except Exception as error:
                code = error_code_for(error)
        results.append(nested(request, "DeletableGroupResult", group_id=group_id, error_code=code))
    return respond(request, "DeleteGroupsResponse", throttle_time=NO_THROTTLE, results=tuple(results))
