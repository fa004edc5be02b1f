"""IncrementalAlterConfigs (key 44): change some of a topic's configs. SET gives a config a value,
DELETE returns it to its default; the others keep theirs. APPEND and SUBTRACT (for list configs)
have nothing to work on here: INVALID_CONFIG. The configs map onto the stream's settings
(``_topic_configs.py``); one adiskq cannot honour is refused with INVALID_CONFIG and nothing changes.
"""

from __future__ import annotations

from typing import Any, Final

from .._registry import RequestContext, register, respond
from .._topic_configs import InvalidConfigError, settings_for
from ._common import NO_THROTTLE
from .alter_configs import alter_each

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
    answers = await alter_each(
        context, request, lambda resource, current: settings_for(_changes(resource.configs), current)
    )
    return respond(request, "IncrementalAlterConfigsResponse", throttle_time=NO_THROTTLE, responses=answers)
