"""SaslHandshake (key 17): the client names its SASL mechanism; the answer lists those offered.

After version 1 the tokens travel in SaslAuthenticate requests; after version 0 (which librdkafka
looks for before it uses SASL at all) as bare size-prefixed frames, answered the same way
(``_security.raw_sasl_answer``). On a gateway without SASL every mechanism is unsupported and none
is listed.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from .._security import expect_raw_sasl, sasl_server

__all__ = ["sasl_handshake"]


@register(17, "SaslHandshake", min_version=0, max_version=1)
async def sasl_handshake(context: RequestContext, request: Any) -> Any:
    """Accept the mechanism if it is offered."""
    server = sasl_server(context.gateway, context.connection)
    if server is None:
        return respond(request, "SaslHandshakeResponse", error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=())
    error = server.handshake(request.mechanism)
    if error == ErrorCode.none and request.__version__ == 0:
        expect_raw_sasl(context.connection)
    return respond(request, "SaslHandshakeResponse", error_code=ErrorCode(error), mechanisms=server.mechanisms)
