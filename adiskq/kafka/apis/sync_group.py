"""SyncGroup (key 14): the leader hands in every member's assignment; each member gets its own.

The coordinator does not read assignments: they are the client assignor's bytes, forwarded as they
are. A follower's SyncGroup waits for the leader's.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._groups import groups_of
from .._registry import RequestContext, register, respond
from ._common import NO_THROTTLE

__all__ = ["sync_group"]


@register(14, "SyncGroup", min_version=0, max_version=5)
async def sync_group(context: RequestContext, request: Any) -> Any:
    """Forward the leader's assignments; answer each member with its own."""
    result = await groups_of(context.gateway).sync(
        request.group_id,
        request.member_id,
        request.generation_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments=[(given.member_id, given.assignment) for given in request.assignments],
    )
    return respond(
        request,
        "SyncGroupResponse",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
