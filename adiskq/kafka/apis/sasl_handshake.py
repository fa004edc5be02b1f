"""SaslHandshake (key 17): the client names its SASL mechanism; the answer lists those offered.

Only version 1 is offered (its tokens then travel in SaslAuthenticate requests); version 0's raw
tokens, which Kafka 4 no longer takes either, are not. On a gateway without SASL every mechanism is
unsupported and none is listed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from .._security import sasl_server

__all__ = ["sasl_handshake"]


@register(17, "SaslHandshake", min_version=1, max_version=1)
async def sasl_handshake(context: RequestContext, request: Any) -> Any:
    """Accept the mechanism if it is offered."""
    server = sasl_server(context.gateway, context.connection)
    if server is None:
        return respond(request, "SaslHandshakeResponse", error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=())
    error = server.handshake(request.mechanism)
    return respond(request, "SaslHandshakeResponse", error_code=ErrorCode(error), mechanisms=server.mechanisms)
