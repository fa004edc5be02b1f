"""Heartbeat (key 12): a member is alive; REBALANCE_IN_PROGRESS tells it to join again."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._groups import groups_of
from .._registry import RequestContext, register, respond
from ._common import NO_THROTTLE

__all__ = ["heartbeat"]


@register(12, "Heartbeat", min_version=0, max_version=4)
async def heartbeat(context: RequestContext, request: Any) -> Any:
    """Renew the member's session."""
    error = groups_of(context.gateway).heartbeat(
        request.group_id, request.member_id, request.generation_id, getattr(request, "group_instance_id", None)
    )
    return respond(request, "HeartbeatResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode(error))
