"""FindCoordinator (key 10): which broker coordinates a group — always this one.

Versions 0-3 ask for one key, 4+ for several. Any group id is served: one that is not a plain
folder name is stored under an encoded folder name (``naming.group_folder``); only an empty one, or
one too long for a folder name, is refused with INVALID_GROUP_ID and a message saying why.

Transaction coordinators (key type 1) are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and a
message saying transactions are not served. That is the answer Kafka gives a principal that may not
use the transactional id, and clients take it as final at once (librdkafka's ``init_transactions``
raises a fatal error, aiokafka's transactional producer fails to start), where a retriable
COORDINATOR_NOT_AVAILABLE left them asking again until their own timeout.
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
_NO_TRANSACTIONS: Final = (
    "transactions are not served by this gateway: use an idempotent producer (enable.idempotence=true) "
    "without transactional.id"
)
_BAD_GROUP: Final = "group id {!r} cannot be stored: {}"


def _answer(context: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, str | None, int, str, int]:
    """(error, message, node id, host, port) for one key."""
    gateway = context.gateway
    if key_type != _GROUP:
        return ErrorCode.transactional_id_authorization_failed, _NO_TRANSACTIONS, -1, "", -1
    refusal = group_id_refusal(key)
    if refusal is not None:
        return ErrorCode.invalid_group_id, _BAD_GROUP.format(key[:60], refusal), -1, "", -1
    return ErrorCode.none, None, NODE_ID, gateway.advertised_host, gateway.advertised_port


@register(10, "FindCoordinator", min_version=0, max_version=4)
async def find_coordinator(context: RequestContext, request: Any) -> Any:
    """This broker, for every group key."""
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
