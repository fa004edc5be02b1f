"""SaslAuthenticate (key 36): one SASL token in, one out; a refusal closes the connection after it.

Sessions do not expire (``session_lifetime`` 0: no re-authentication is asked for). A PLAIN login's
key derivation runs in a worker thread, and a refusal is answered after Kafka's delay (``sasl_step``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from .._security import close_after_response, sasl_server, sasl_step

__all__ = ["sasl_authenticate"]


@register(36, "SaslAuthenticate", min_version=0, max_version=2)
async def sasl_authenticate(context: RequestContext, request: Any) -> Any:
    """Take the client's token; answer with the server's."""
    server = sasl_server(context.gateway, context.connection)
    if server is None:
        close_after_response(context.connection)
        return respond(
            request,
            "SaslAuthenticateResponse",
            error_code=ErrorCode.illegal_sasl_state,
            error_message="SASL is not enabled on this gateway",
            auth_bytes=b"",
            session_lifetime=dt.timedelta(0),
        )
    step = await sasl_step(context.gateway, server, request.auth_bytes)
    if step.error:
        close_after_response(context.connection)
    return respond(
        request,
        "SaslAuthenticateResponse",
        error_code=ErrorCode(step.error),
        error_message=step.message,
        auth_bytes=step.token,
        session_lifetime=dt.timedelta(0),
    )
