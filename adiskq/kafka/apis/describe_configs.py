"""DescribeConfigs (key 32): a topic's (or the broker's) settings, in Kafka's names.

A topic reports what its stream keeps (``_topic_configs.py``): ``retention.ms`` and
``retention.bytes`` (-1 for no limit), ``segment.bytes``, ``max.message.bytes`` (which AlterConfigs
and IncrementalAlterConfigs change; a value other than adiskq's default is described as the topic's
own, DYNAMIC_TOPIC_CONFIG), and the fixed ``cleanup.policy=delete``,
``message.timestamp.type=CreateTime``, ``compression.type=producer``; the broker a few read-only
facts (``num.partitions``, ``auto.create.topics.enable``, ``default.replication.factor=1``).
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, nested, register, respond
from .._topic_configs import DEFAULTS, FIXED, describe_topic
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for, error_message_for

__all__ = ["describe_configs"]

_TOPIC: Final = 2
_BROKER: Final = 4
_SOURCE_TOPIC: Final = 1  # DYNAMIC_TOPIC_CONFIG
_SOURCE_DEFAULT: Final = 5  # DEFAULT_CONFIG


def _topic_configs(context: RequestContext, name: str) -> dict[str, str]:
    check_topic_name(name)
    return describe_topic(context.gateway.topics.reader(name).refresh())


def _broker_configs(context: RequestContext) -> dict[str, str]:
    gateway = context.gateway
    return {
        "auto.create.topics.enable": "true" if gateway.auto_create else "false",
        "default.replication.factor": "1",
        "num.partitions": str(gateway.topics.default_partitions),
    }


@register(32, "DescribeConfigs", min_version=1, max_version=4)
async def describe_configs(context: RequestContext, request: Any) -> Any:
    """Each resource's settings (only the keys asked for, when some are named)."""
    results = []
    for resource in request.resources:
        code = ErrorCode.none
        message = None
        configs: dict[str, str] = {}
        source = _SOURCE_TOPIC
        try:
            if resource.resource_type == _TOPIC:
                configs = _topic_configs(context, resource.resource_name)
            elif resource.resource_type == _BROKER:
                configs, source = _broker_configs(context), _SOURCE_DEFAULT
            else:
                code, message = (
                    ErrorCode.invalid_request,
                    f"resource type {resource.resource_type} is not described here",
                )
        except Exception as error:
            code, message = error_code_for(error), error_message_for(context.gateway, error)
        wanted = resource.configuration_keys
        entries = tuple(
            nested(
                request,
                "DescribeConfigsResourceResult",
                name=name,
                value=value,
                read_only=source == _SOURCE_DEFAULT or name in FIXED,
                is_default=source == _SOURCE_DEFAULT or DEFAULTS.get(name) == value,
                config_source=_SOURCE_DEFAULT if DEFAULTS.get(name) == value else source,
                is_sensitive=False,
                synonyms=(),
                config_type=0,
                documentation=None,
            )
            for name, value in sorted(configs.items())
            if wanted is None or name in wanted
        )
        results.append(
            nested(
                request,
                "DescribeConfigsResult",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=entries,
            )
        )
    return respond(request, "DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=tuple(results))
