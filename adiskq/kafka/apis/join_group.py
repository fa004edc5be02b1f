"""JoinGroup (key 11): a member joins a group; answered when the rebalance completes.

The leader's answer lists every member with its protocol metadata, for the client's own assignor.
From version 4 a first join without a member id is answered MEMBER_ID_REQUIRED with the id to come
back with (KIP-394); from version 5 ``group_instance_id`` makes a static member. Version 0 has no
rebalance timeout: the session timeout serves as both, as in Kafka. A static leader that restarts
takes its place without a rebalance (``GroupCoordinator._join_static``).
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import groups_of, valid_group_id
from .._registry import RequestContext, nested, register, respond
from ..group_coordinator import JoinResult
from ..group_errors import INVALID_GROUP_ID
from ._common import NO_THROTTLE

__all__ = ["join_group"]

_SKIP_ASSIGNMENT_FROM: Final = 9  # KIP-814: a static leader's restart tells it to skip the assignment


def client_host(context: RequestContext) -> str:
    """The client's address as Kafka shows it (``/127.0.0.1``)."""
    host = context.connection.peer.rsplit(":", 1)[0].strip("[]")
    return "/" + host


@register(11, "JoinGroup", min_version=0, max_version=9)
async def join_group(context: RequestContext, request: Any) -> Any:
    """Join, then wait for the rebalance."""
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = session_ms if rebalance is None else int(rebalance.total_seconds() * 1000)
    if not valid_group_id(request.group_id):
        result = JoinResult(INVALID_GROUP_ID, member_id=request.member_id)
    else:
        result = await groups_of(context.gateway).join(
            request.group_id,
            request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=request.protocol_type,
            protocols=[(protocol.name, protocol.metadata) for protocol in request.protocols],
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            client_id=context.header.client_id or "",
            client_host=client_host(context),
            require_known_member_id=request.__version__ >= 4,
            skip_assignment_known=request.__version__ >= _SKIP_ASSIGNMENT_FROM,
        )
    nullable = request.__version__ >= 7
    return respond(
        request,
        "JoinGroupResponse",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type if nullable else result.protocol_type or "",
        protocol_name=result.protocol_name if nullable else result.protocol_name or "",
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            nested(
                request,
                "JoinGroupResponseMember",
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                metadata=member.metadata,
            )
            for member in result.members
        ),
    )
