"""DeleteTopics (key 20): delete topics' stream folders (their producer closed first).

Versions 1 to 5 name topics; version 6's topic ids are not offered. Readers of another process that
have the files open keep reading what they hold; the folder is gone for everyone else.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from ..._errors import StreamNotFoundError
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from .._transactions import transactions_of
from ._common import NO_THROTTLE, error_code_for, error_message_for

__all__ = ["delete_topics"]

logger = logging.getLogger("adiskq.kafka")


@register(20, "DeleteTopics", min_version=1, max_version=5)
async def delete_topics(context: RequestContext, request: Any) -> Any:
    """Delete each topic; an error code per topic."""
    gateway = context.gateway
    results = []
    for name in request.topic_names:
        code = ErrorCode.none
        message = None
        try:
            check_topic_name(name)
            await gateway.topics.delete(name)
            gateway.sequences.forget_topic(name)
            transactions_of(gateway).open.forget_topic(name)
            logger.info("adiskq: deleted topic %s", name)
        except StreamNotFoundError:
            code, message = ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
        except Exception as error:
            code, message = error_code_for(error), error_message_for(context.gateway, error)
        results.append(nested(request, "DeletableTopicResult", name=name, error_code=code, error_message=message))
    return respond(request, "DeleteTopicsResponse", throttle_time=NO_THROTTLE, responses=tuple(results))
