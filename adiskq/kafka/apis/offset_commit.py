"""OffsetCommit (key 8): store a group's committed offsets in each topic's ``groups/NAME/``.

The offsets go where the library's own groups keep theirs (``group_offsets.py``), durably, before
the answer. A member of a live group commits in its current generation (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS otherwise, as Kafka decides); a consumer that never joined
commits with generation -1 while the group has no members. The metadata string (at most 4096
bytes, Kafka's ``offset.metadata.max.bytes``) and the leader epoch (v6+) come back from OffsetFetch.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import groups_of, valid_group_id
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from ..group_offsets import NO_LEADER_EPOCH, Committed
from ._common import NO_THROTTLE, error_code_for

__all__ = ["offset_commit"]

MAX_METADATA_BYTES: Final = 4096


async def _commit_topic(context: RequestContext, group_id: str, topic: Any) -> dict[int, ErrorCode]:
    """Store one topic's commits; each partition's error code."""
    service = groups_of(context.gateway)
    topics = context.gateway.topics
    errors: dict[int, ErrorCode] = {}
    try:
        check_topic_name(topic.name)
        count = topics.partition_count(topic.name) if topics.exists(topic.name) else 0
    except Exception as failure:
        return {p.partition_index: error_code_for(failure) for p in topic.partitions}
    commits: dict[int, Committed] = {}
    for partition in topic.partitions:
        metadata = partition.committed_metadata or ""
        if not 0 <= partition.partition_index < count:
            errors[partition.partition_index] = ErrorCode.unknown_topic_or_partition
        elif len(metadata.encode()) > MAX_METADATA_BYTES:
            errors[partition.partition_index] = ErrorCode.offset_metadata_too_large
        elif partition.committed_offset < 0:
            errors[partition.partition_index] = ErrorCode.invalid_request
        else:
            epoch = getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH)  # v6+
            commits[partition.partition_index] = Committed(partition.committed_offset, metadata, epoch)
    if commits:
        try:
            await service.commit(group_id, topic.name, commits)
        except Exception as failure:
            code = error_code_for(failure)
            return {p.partition_index: errors.get(p.partition_index, code) for p in topic.partitions}
    return {p.partition_index: errors.get(p.partition_index, ErrorCode.none) for p in topic.partitions}


@register(8, "OffsetCommit", min_version=2, max_version=9)
async def offset_commit(context: RequestContext, request: Any) -> Any:
    """Check the member's generation, then store every partition's offset."""
    group_id = request.group_id
    if not valid_group_id(group_id):
        error: int = ErrorCode.invalid_group_id
    else:
        error = groups_of(context.gateway).coordinator.check_commit(
            group_id,
            request.member_id,
            request.generation_id_or_member_epoch,
            getattr(request, "group_instance_id", None),
        )
    answers = []
    for topic in request.topics:
        if error:
            codes = {p.partition_index: ErrorCode(error) for p in topic.partitions}
        else:
            codes = await _commit_topic(context, group_id, topic)
        answers.append(
            nested(
                request,
                "OffsetCommitResponseTopic",
                name=topic.name,
                partitions=tuple(
                    nested(request, "OffsetCommitResponsePartition", partition_index=index, error_code=code)
                    for index, code in codes.items()
                ),
            )
        )
    return respond(request, "OffsetCommitResponse", throttle_time=NO_THROTTLE, topics=tuple(answers))
