"""OffsetFetch (key 9): a group's committed offsets (-1 where none), with their metadata strings and
leader epochs (-1 where none was committed).

Versions 1-7 ask for one group, 8+ for several; a null topic list (v2+) asks for every topic the
group has committed in. The offsets are read from disk each time, so offsets moved with
``adiskq offsets --reset-to`` while the group was stopped are what the group resumes from.

A request with ``require_stable`` (v7+, sent by ``read_committed`` consumers) gets
UNSTABLE_OFFSET_COMMIT (retriable) for a partition whose offset an open transaction is committing
(TxnOffsetCommit), as Kafka answers: the consumer asks again once the transaction has ended.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._groups import groups_of, valid_group_id
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from .._transactions import transactions_of
from ..group_offsets import NO_LEADER_EPOCH
from ._common import NO_THROTTLE, error_code_for

__all__ = ["offset_fetch"]


async def _group_topics(
    context: RequestContext, request: Any, group_id: str, asked: Any, *, names: tuple[str, str, str]
) -> tuple[ErrorCode, list[Any]]:
    """(group error, topic answers) for one group; ``names`` are the nested classes of this version."""
    topic_class, partition_class, _ = names
    service = groups_of(context.gateway)
    if not valid_group_id(group_id):
        return ErrorCode.invalid_group_id, []
    if asked is None:
        wanted: list[tuple[str, list[int] | None]] = [(t, None) for t in await service.committed_topics(group_id)]
    else:
        wanted = [(topic.name, list(topic.partition_indexes)) for topic in asked]
    answers = []
    stable = getattr(request, "require_stable", False)
    transactions = transactions_of(context.gateway)
    for topic, partitions in wanted:
        rows: list[tuple[int, int, str, int, ErrorCode]] = []
        try:
            check_topic_name(topic)
            if not context.gateway.topics.exists(topic):
                rows = [(p, -1, "", NO_LEADER_EPOCH, ErrorCode.none) for p in partitions or ()]  # Kafka: no error
            else:
                found = await service.fetch(group_id, topic, partitions)
                rows = [(p, c.offset, c.metadata, c.leader_epoch, ErrorCode.none) for p, c in found.items()]
        except Exception as failure:
            code = error_code_for(failure)
            if code is ErrorCode.unknown_server_error or partitions is None:
                return code, []
            rows = [(p, -1, "", NO_LEADER_EPOCH, code) for p in partitions]
        if stable:
            rows = [
                (p, -1, "", NO_LEADER_EPOCH, ErrorCode.unstable_offset_commit)
                if transactions.has_pending_offsets(group_id, topic, p)
                else row
                for row in rows
                for p in (row[0],)
            ]
        answers.append(
            nested(
                request,
                topic_class,
                name=topic,
                partitions=tuple(
                    nested(
                        request,
                        partition_class,
                        partition_index=index,
                        committed_offset=offset,
                        committed_leader_epoch=epoch,
                        metadata=metadata,
                        error_code=error,
                    )
                    for index, offset, metadata, epoch, error in rows
                ),
            )
        )
    return ErrorCode.none, answers


@register(9, "OffsetFetch", min_version=1, max_version=9)
async def offset_fetch(context: RequestContext, request: Any) -> Any:
    """Read the committed offsets."""
    if request.__version__ >= 8:
        groups = []
        for group in request.groups:
            error, topics = await _group_topics(
                context,
                request,
                group.group_id,
                group.topics,
                names=("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", ""),
            )
            groups.append(
                nested(
                    request,
                    "OffsetFetchResponseGroup",
                    group_id=group.group_id,
                    topics=tuple(topics),
                    error_code=error,
                )
            )
        return respond(request, "OffsetFetchResponse", throttle_time=NO_THROTTLE, groups=tuple(groups))
    error, topics = await _group_topics(
        context,
        request,
        request.group_id,
        request.topics,
        names=("OffsetFetchResponseTopic", "OffsetFetchResponsePartition", ""),
    )
    if error and request.__version__ < 2:
        # Versions 0-1 have no group-level error: each partition carries it.
        topics = [
            nested(
                request,
                "OffsetFetchResponseTopic",
                name=topic.name,
                partitions=tuple(
                    nested(
                        request,
                        "OffsetFetchResponsePartition",
                        partition_index=index,
                        committed_offset=-1,
                        metadata="",
                        error_code=error,
                    )
                    for index in topic.partition_indexes
                ),
            )
            for topic in request.topics
        ]
    return respond(request, "OffsetFetchResponse", throttle_time=NO_THROTTLE, topics=tuple(topics), error_code=error)
