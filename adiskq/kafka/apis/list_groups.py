"""ListGroups (key 16): every group with members here, and every group with committed offsets.

A group that only has offsets on disk (its consumers stopped, or a library ``ConsumerGroup``'s) is
listed Empty, with the protocol type its members last had ("consumer"), or none for a group that
only committed offsets, as Kafka lists them. Version
4's state filter and version 5's type filter (every group here is ``classic``) are applied.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import groups_of
from .._registry import RequestContext, nested, register, respond
from ..group_coordinator import GroupState
from ._common import NO_THROTTLE

__all__ = ["list_groups"]

GROUP_TYPE: Final = "classic"


@register(16, "ListGroups", min_version=0, max_version=5)
async def list_groups(context: RequestContext, request: Any) -> Any:
    """List the groups."""
    service = groups_of(context.gateway)
    listed = {group_id: (protocol_type, state) for group_id, protocol_type, state in service.coordinator.groups()}
    for group_id, protocol_type in (await service.stored_groups()).items():
        listed.setdefault(group_id, (protocol_type, GroupState.EMPTY))
    states = {state.lower() for state in getattr(request, "states_filter", ())}
    types = {kind.lower() for kind in getattr(request, "types_filter", ())}
    groups = tuple(
        nested(
            request,
            "ListedGroup",
            group_id=group_id,
            protocol_type=protocol_type,
            group_state=state.value,
            group_type=GROUP_TYPE,
        )
        for group_id, (protocol_type, state) in sorted(listed.items())
        if (not states or state.value.lower() in states) and (not types or GROUP_TYPE in types)
    )
    return respond(request, "ListGroupsResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)
