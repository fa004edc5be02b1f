"""TxnOffsetCommit (key 28): a consumer group's offsets, committed with the producer's transaction.

The offsets are kept pending in the transaction (``_transactions.py``): OffsetFetch does not see
them, and a commit makes them the group's committed offsets, an abort drops them. The group must
have been added with AddOffsetsToTxn first (INVALID_TXN_STATE otherwise). From version 3 on, a
member of a live group names its member id and generation, checked as OffsetCommit checks them
(generation -1 with no member id: not checked, as Kafka does not). Version 5 (transaction version
2, KIP-890) comes without AddOffsetsToTxn: it adds the group to the transaction itself.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import groups_of, valid_group_id
from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from .._transactions import transactions_of
from ..group_offsets import NO_LEADER_EPOCH, Committed
from ..transaction_coordinator import fenced_error_for
from ._common import NO_THROTTLE
from .offset_commit import MAX_METADATA_BYTES

__all__ = ["txn_offset_commit"]

_PRODUCER_FENCED_FROM: Final = 3
_TRANSACTION_VERSION_2_FROM: Final = 5


def _partition_error(context: RequestContext, topic: str, partition: Any) -> ErrorCode | None:
    topics = context.gateway.topics
    try:
        check_topic_name(topic)
        known = topics.exists(topic) and 0 <= partition.partition_index < topics.partition_count(topic)
    except Exception:
        known = False
    if not known:
        return ErrorCode.unknown_topic_or_partition
    if len((partition.committed_metadata or "").encode()) > MAX_METADATA_BYTES:
        return ErrorCode.offset_metadata_too_large
    if partition.committed_offset < 0:
        return ErrorCode.invalid_request
    return None


def _member_error(context: RequestContext, request: Any) -> int:
    """The generation check of a v3+ request naming its member (0 when there is nothing to check)."""
    member_id = getattr(request, "member_id", "")
    generation = getattr(request, "generation_id", -1)
    if not member_id and generation < 0:
        return 0
    return groups_of(context.gateway).coordinator.check_commit(
        request.group_id, member_id, generation, getattr(request, "group_instance_id", None)
    )


@register(28, "TxnOffsetCommit", min_version=0, max_version=5)
async def txn_offset_commit(context: RequestContext, request: Any) -> Any:
    """Keep the offsets pending in the transaction; each partition's error code."""
    codes: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[str, dict[int, Committed]] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            refused = _partition_error(context, topic.name, partition)
            if refused is not None:
                codes[topic.name, partition.partition_index] = refused
            else:
                epoch = getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH)
                committed = Committed(partition.committed_offset, partition.committed_metadata or "", epoch)
                offsets.setdefault(topic.name, {})[partition.partition_index] = committed
    if not valid_group_id(request.group_id):
        error: int = ErrorCode.invalid_group_id
    else:
        error = _member_error(context, request)
        transactions = transactions_of(context.gateway)
        if not error and offsets and request.__version__ >= _TRANSACTION_VERSION_2_FROM:
            # Transaction version 2: no AddOffsetsToTxn before, the group is added here
            error = await transactions.add_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
            )
        if not error and offsets:
            error = await transactions.commit_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch, request.group_id, offsets
            )
    code = ErrorCode(fenced_error_for(error, request.__version__ >= _PRODUCER_FENCED_FROM))
    return respond(
        request,
        "TxnOffsetCommitResponse",
        throttle_time=NO_THROTTLE,
        topics=tuple(
            nested(
                request,
                "TxnOffsetCommitResponseTopic",
                name=topic.name,
                partitions=tuple(
                    nested(
                        request,
                        "TxnOffsetCommitResponsePartition",
                        partition_index=p.partition_index,
                        error_code=codes.get((topic.name, p.partition_index), code),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )
