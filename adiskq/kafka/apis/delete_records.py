"""DeleteRecords (key 21): raise partitions' log start offsets, as Kafka's ``kafka-delete-records``.

Each partition's records below the offset given (-1: the high watermark, every record) are no
longer served: its log start offset is stored durably beside its segments
(``adiskq/_storage/log_start.py``) before the answer, which carries it as the low watermark; Fetch,
ListOffsets, the library's readers and ``adiskq stats`` start there, and the segments wholly below
it are vacuumed. An offset past the high watermark is OFFSET_OUT_OF_RANGE, as in Kafka; an offset
below the current log start changes nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from ._common import NO_THROTTLE, error_code_for

__all__ = ["delete_records"]


@register(21, "DeleteRecords", min_version=0, max_version=2)
async def delete_records(context: RequestContext, request: Any) -> Any:
    """Raise each partition's log start offset; its low watermark after, or an error."""
    topics = context.gateway.topics
    answers = []
    for topic in request.topics:
        asked = {p.partition_index: p.offset for p in topic.partitions}
        results: dict[int, int | BaseException] = {}
        topic_error: ErrorCode | None = None
        try:
            check_topic_name(topic.name)
            if topics.exists(topic.name):
                results = await topics.delete_records(topic.name, asked)
            else:
                topic_error = ErrorCode.unknown_topic_or_partition
        except Exception as error:
            topic_error = error_code_for(error)
        partitions = []
        for index in asked:
            found = results.get(index)
            if topic_error is not None:
                code, low = topic_error, -1
            elif isinstance(found, int):
                code, low = ErrorCode.none, found
            else:
                code, low = error_code_for(found or KeyError(index)), -1
            partitions.append(
                nested(
                    request,
                    "DeleteRecordsPartitionResult",
                    partition_index=index,
                    low_watermark=low,
                    error_code=code,
                )
            )
        answers.append(nested(request, "DeleteRecordsTopicResult", name=topic.name, partitions=tuple(partitions)))
    return respond(request, "DeleteRecordsResponse", throttle_time=NO_THROTTLE, topics=tuple(answers))
