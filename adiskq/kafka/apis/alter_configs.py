"""AlterConfigs (key 33): replace a topic's configs, as Kafka does: the configs given are set, every
other one returns to its default. They map onto the stream's settings (``_topic_configs.py``);
one adiskq cannot honour is refused with INVALID_CONFIG and nothing changes. Broker configs are
fixed here (INVALID_CONFIG); other resource types are not served (INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..._storage.settings import StreamSettings
from .._registry import RequestContext, nested, register, respond
from .._topic_configs import InvalidConfigError, replaced
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for

__all__ = ["TOPIC", "alter_answer", "alter_configs", "alter_each"]

TOPIC: Final = 2
_BROKER: Final = 4


def alter_answer(request: Any, resource: Any, code: ErrorCode, message: str | None) -> Any:
    """One resource's answer (AlterConfigs' and IncrementalAlterConfigs' have the same fields)."""
    return nested(
        request,
        "AlterConfigsResourceResponse",
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def refused_resource(resource: Any) -> tuple[ErrorCode, str] | None:
    """Why a resource's configs cannot be altered here (None: a topic, which can)."""
    if resource.resource_type == _BROKER:
        return ErrorCode.invalid_config, "the broker's configs are fixed here: start the gateway with other options"
    if resource.resource_type != TOPIC:
        return ErrorCode.invalid_request, f"resource type {resource.resource_type} has no configs here"
    return None


async def alter_each(
    context: RequestContext,
    request: Any,
    settings_of: Callable[[Any, StreamSettings], dict[str, object]],
) -> tuple[Any, ...]:
    """Each resource's answer, its topic given ``settings_of(resource, current settings)`` unless
    the request only validates (AlterConfigs' and IncrementalAlterConfigs' shared loop)."""
    topics = context.gateway.topics
    answers = []
    for resource in request.resources:
        refused = refused_resource(resource)
        code, message = refused if refused is not None else (ErrorCode.none, None)
        if refused is None:
            try:
                check_topic_name(resource.resource_name)
                settings = settings_of(resource, topics.reader(resource.resource_name).refresh())
                if not request.validate_only:
                    await topics.reconfigure(resource.resource_name, **settings)
            except InvalidConfigError as error:
                code, message = ErrorCode.invalid_config, str(error)
            except Exception as error:
                code, message = error_code_for(error), str(error)
        answers.append(alter_answer(request, resource, code, message))
    return tuple(answers)


@register(33, "AlterConfigs", min_version=0, max_version=2)
async def alter_configs(context: RequestContext, request: Any) -> Any:
    """Set each topic's configs (checked first; ``validate_only``: only checked)."""
    answers = await alter_each(
        context, request, lambda resource, current: replaced({c.name: c.value for c in resource.configs}, current)
    )
    return respond(request, "AlterConfigsResponse", throttle_time=NO_THROTTLE, responses=answers)
