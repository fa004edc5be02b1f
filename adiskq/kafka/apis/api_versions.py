"""ApiVersions (key 18): the APIs and versions this gateway answers, exactly as registered.

A request in a version newer than the gateway knows is answered by the server layer
(``_server.py``), as Kafka does: UNSUPPORTED_VERSION in the version-0 layout, with the ranges, so
the client retries with a version it finds there. From version 3 on, the answer lists the feature
``transaction.version`` finalized at 2 (Kafka 4's transaction version 2, KIP-890), as Kafka 4.4 does.
"""

from __future__ import annotations

from typing import Any, Final

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


# Kafka's feature flags a client reads (v3+): transaction.version 2 (KIP-890) is what makes a
# client that knows it (the Java client 4.x) use transaction version 2 (``transaction_coordinator``).
_TRANSACTION_VERSION: Final = "transaction.version"
_TRANSACTION_VERSION_LEVEL: Final = 2
_FEATURES_EPOCH: Final = 1  # the finalized features never change while the gateway runs


def _features(request: Any) -> dict[str, Any]:
    if request.__version__ < _FEATURES_FROM:
        return {}
    return {
        "supported_features": (
            nested(request, "SupportedFeatureKey", name=_TRANSACTION_VERSION, min_version=0, max_version=2),
        ),
        "finalized_features_epoch": _FEATURES_EPOCH,
        "finalized_features": (
            nested(
                request,
                "FinalizedFeatureKey",
                name=_TRANSACTION_VERSION,
                max_version_level=_TRANSACTION_VERSION_LEVEL,
                min_version_level=_TRANSACTION_VERSION_LEVEL,
            ),
        ),
    }


_FEATURES_FROM: Final = 3


@register(18, "ApiVersions", min_version=0, max_version=4)
async def api_versions(context: RequestContext, request: Any) -> Any:
    """The version ranges of every API the gateway answers, and (v3+) its finalized features."""
    return respond(
        request,
        "ApiVersionsResponse",
        error_code=ErrorCode.none,
        api_keys=supported_versions(request),
        throttle_time=NO_THROTTLE,
        **_features(request),
    )
