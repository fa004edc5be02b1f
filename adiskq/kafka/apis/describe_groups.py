"""DescribeGroups (key 15): a group's state, protocol and members (with metadata and assignment when
Stable, as Kafka). A group unknown here is Empty if it has committed offsets (with the protocol type
its members last had), else Dead. An Empty group keeps its protocol type, as in Kafka."""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import groups_of
from .._registry import RequestContext, nested, register, respond
from ..group_coordinator import GroupState
from ._common import NO_THROTTLE

__all__ = ["describe_groups"]

_OPERATIONS_NOT_ASKED: Final = -(2**31)  # Kafka's "authorized operations were not requested"


@register(15, "DescribeGroups", min_version=0, max_version=5)
async def describe_groups(context: RequestContext, request: Any) -> Any:
    """Describe each group."""
    service = groups_of(context.gateway)
    stored: dict[str, str] | None = None
    answers = []
    for group_id in request.groups:
        description = service.coordinator.describe(group_id)
        state = description.state
        protocol_type = description.protocol_type
        if state is GroupState.DEAD:
            if stored is None:
                stored = await service.stored_groups()
            if group_id in stored:
                state, protocol_type = GroupState.EMPTY, stored[group_id]
        answers.append(
            nested(
                request,
                "DescribedGroup",
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=state.value,
                protocol_type=protocol_type,
                protocol_data=description.protocol,
                members=tuple(
                    nested(
                        request,
                        "DescribedGroupMember",
                        member_id=member.member_id,
                        group_instance_id=member.group_instance_id,
                        client_id=member.client_id,
                        client_host=member.client_host,
                        member_metadata=member.metadata,
                        member_assignment=member.assignment,
                    )
                    for member in description.members
                ),
                authorized_operations=_OPERATIONS_NOT_ASKED,
            )
        )
    return respond(request, "DescribeGroupsResponse", throttle_time=NO_THROTTLE, groups=tuple(answers))
