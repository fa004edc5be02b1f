"""ApiVersions (key 18): the APIs and versions this gateway answers, exactly as registered.

A request in a version newer than the gateway knows is answered by the server layer
(``_server.py``), as Kafka does: UNSUPPORTED_VERSION in the version-0 layout, with the ranges, so
the client retries with a version it finds there.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import API_TABLE, RequestContext, nested, register, respond
from ._common import NO_THROTTLE

__all__ = ["api_versions", "supported_versions"]


def supported_versions(request: Any) -> tuple[Any, ...]:
    """Every registered API's version range, as the response version of ``request`` spells it."""
    return tuple(
        nested(request, "ApiVersion", api_key=api.key, min_version=api.min_version, max_version=api.max_version)
        for api in sorted(API_TABLE.values())
    )


@register(18, "ApiVersions", min_version=0, max_version=4)
async def api_versions(context: RequestContext, request: Any) -> Any:
    """The version ranges of every API the gateway answers."""
    return respond(
        request,
        "ApiVersionsResponse",
        error_code=ErrorCode.none,
        api_keys=supported_versions(request),
        throttle_time=NO_THROTTLE,
    )
