"""ListOffsets (key 2): a partition's earliest or latest offset, or the first at or after a time.

Timestamp -2 asks for the earliest offset still kept, -1 for the latest (the next offset to be
written); a time in milliseconds for the first message stamped at or after it, found through the
partition's time index (Kafka answers offset -1 when there is none). Version 7's -3 (the offset of
the largest timestamp) is not offered.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for

__all__ = ["list_offsets"]

_LATEST: Final = -1
_EARLIEST: Final = -2


@register(2, "ListOffsets", min_version=1, max_version=6)
async def list_offsets(context: RequestContext, request: Any) -> Any:
    """The offset each partition's timestamp names."""
    topics = context.gateway.topics
    answers = []
    for topic in request.topics:
        partitions = []
        for asked in topic.partitions:
            offset = timestamp_ms = -1
            error = ErrorCode.none
            try:
                check_topic_name(topic.name)
                reader = topics.reader(topic.name).partition(asked.partition_index)
                oldest, next_offset = reader.bounds()
                if asked.timestamp == _LATEST:
                    offset = next_offset
                elif asked.timestamp == _EARLIEST:
                    offset = oldest
                elif asked.timestamp >= 0:
                    found = reader.offset_for_time(asked.timestamp * 1_000_000)
                    if found < next_offset:
                        offset = found
                        timestamp_ms = reader.read_one(found).timestamp_ns // 1_000_000
                else:
                    error = ErrorCode.invalid_request
            except Exception as failure:
                error = error_code_for(failure)
            partitions.append(
                nested(
                    request,
                    "ListOffsetsPartitionResponse",
                    partition_index=asked.partition_index,
                    error_code=error,
                    old_style_offsets=(),
                    timestamp=timestamp_ms,
                    offset=offset,
                    leader_epoch=0 if offset >= 0 else -1,
                )
            )
        answers.append(nested(request, "ListOffsetsTopicResponse", name=topic.name, partitions=tuple(partitions)))
    return respond(request, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=tuple(answers))
