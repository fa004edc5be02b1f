"""LeaveGroup (key 13): members leave at once (not after their session timeout); the rest rebalance.

Versions 0-2 name one member; 3+ a list, each by member id or by ``group_instance_id``.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._groups import groups_of
from .._registry import RequestContext, nested, register, respond
from ._common import NO_THROTTLE

__all__ = ["leave_group"]


@register(13, "LeaveGroup", min_version=0, max_version=5)
async def leave_group(context: RequestContext, request: Any) -> Any:
    """Remove the members."""
    service = groups_of(context.gateway)
    if request.__version__ < 3:
        error = service.leave(request.group_id, request.member_id, None)
        return respond(request, "LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode(error))
    answers = tuple(
        nested(
            request,
            "MemberResponse",
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            error_code=ErrorCode(service.leave(request.group_id, member.member_id, member.group_instance_id)),
        )
        for member in request.members
    )
    return respond(request, "LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none, members=answers)
