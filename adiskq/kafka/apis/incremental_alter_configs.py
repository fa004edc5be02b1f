"""IncrementalAlterConfigs (key 44): change some of a topic's configs. SET gives a config a value,
DELETE returns it to its default; the others keep theirs. APPEND and SUBTRACT (for list configs)
have nothing to work on here: INVALID_CONFIG. The configs map onto the stream's settings
(``_topic_configs.py``); one adiskq cannot honour is refused with INVALID_CONFIG and nothing changes.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from .._topic_configs import InvalidConfigError, settings_for
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for
from .alter_configs import alter_answer, refused_resource

__all__ = ["incremental_alter_configs"]

_SET: Final = 0
_DELETE: Final = 1


def _changes(configs: Any) -> dict[str, str | None]:
    """Config name -> its new value (None: back to the default)."""
    changes: dict[str, str | None] = {}
    for config in configs:
        if config.config_operation == _SET:
            changes[config.name] = config.value
        elif config.config_operation == _DELETE:
            changes[config.name] = None
        else:
            raise InvalidConfigError(
                f"{config.name}: operation {config.config_operation} (APPEND or SUBTRACT) applies to list configs, "
                "which a topic has none of here; use SET"
            )
    return changes


@register(44, "IncrementalAlterConfigs", min_version=0, max_version=1)
async def incremental_alter_configs(context: RequestContext, request: Any) -> Any:
    """Change each topic's named configs (checked first; ``validate_only``: only checked)."""
    topics = context.gateway.topics
    answers = []
    for resource in request.resources:
        refused = refused_resource(resource)
        code, message = refused if refused is not None else (ErrorCode.none, None)
        if refused is None:
            try:
                check_topic_name(resource.resource_name)
                current = topics.reader(resource.resource_name).refresh()
                settings = settings_for(_changes(resource.configs), current)
                if not request.validate_only:
                    await topics.reconfigure(resource.resource_name, **settings)
            except InvalidConfigError as error:
                code, message = ErrorCode.invalid_config, str(error)
            except Exception as error:
                code, message = error_code_for(error), str(error)
        answers.append(alter_answer(request, resource, code, message))
    return respond(request, "IncrementalAlterConfigsResponse", throttle_time=NO_THROTTLE, responses=tuple(answers))
