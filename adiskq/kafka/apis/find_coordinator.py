"""FindCoordinator (key 10): which broker coordinates a group or a transactional id — always this one.

Versions 0-3 ask for one key, 4+ for several. Any group id is served: one that is not a plain
folder name is stored under an encoded folder name (``naming.group_folder``); only an empty one, or
one too long for a folder name, is refused with INVALID_GROUP_ID and a message saying why. A
transactional id (key type 1) is served by the gateway's transaction coordinator
(``_transactions.py``); an empty one is refused with INVALID_REQUEST, as Kafka refuses it. Another
key type (Kafka 4's share groups) is refused with INVALID_REQUEST too.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._core import NODE_ID
from .._groups import group_id_refusal
from .._registry import RequestContext, nested, register, respond
from ._common import NO_THROTTLE

__all__ = ["find_coordinator"]

_GROUP: Final = 0
_TRANSACTION: Final = 1
_NO_TRANSACTIONAL_ID: Final = "give a non-empty transactional id"
_BAD_GROUP: Final = "group id {!r} cannot be stored: {}"


def _answer(context: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    gateway = context.gateway
    if key_type == _TRANSACTION:
        if not key:
            return ErrorCode.invalid_request, _NO_TRANSACTIONAL_ID, -1, "", -1
        return ErrorCode.none, None, NODE_ID, gateway.advertised_host, gateway.advertised_port
    if key_type != _GROUP:
        return (
            ErrorCode.invalid_request,
            f"key type {key_type} is not served: 0 (a group) or 1 (a transaction)",
            -1,
            "",
            -1,
        )
    refusal = group_id_refusal(key)
    if refusal is not None:
        return ErrorCode.invalid_group_id, _BAD_GROUP.format(key[:60], refusal), -1, "", -1
    return ErrorCode.none, None, NODE_ID, gateway.advertised_host, gateway.advertised_port


@register(10, "FindCoordinator", min_version=0, max_version=4)
async def find_coordinator(context: RequestContext, request: Any) -> Any:
    """This broker, for every group and transactional id."""
    key_type = getattr(request, "key_type", _GROUP)
    if request.__version__ >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = _answer(context, key, key_type)
            coordinators.append(
                nested(
                    request,
                    "Coordinator",
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=message,
                )
            )
        return respond(request, "FindCoordinatorResponse", throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))
    error, message, node_id, host, port = _answer(context, request.key, key_type)
    return respond(
        request,
        "FindCoordinatorResponse",
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )
