"""AddPartitionsToTxn (key 24): partitions a transactional producer is about to write to.

Versions 0-3 are the client's (one transaction); 4 and later carry several transactions and are
sent by brokers to one another, so they are not served. The transaction coordinator
(``_transactions.py``) decides for all the partitions at once: every partition gets the same error
code, as Kafka answers, except a topic or partition that does not exist, which gets
UNKNOWN_TOPIC_OR_PARTITION while the others get OPERATION_NOT_ATTEMPTED.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, nested, register, respond
from .._topics import check_topic_name
from .._transactions import transactions_of
from ..transaction_coordinator import fenced_error_for
from ._common import NO_THROTTLE

__all__ = ["add_partitions_to_txn"]

_PRODUCER_FENCED_FROM: Final = 2


def _exists(context: RequestContext, topic: str, partition: int) -> bool:
    topics = context.gateway.topics
    try:
        check_topic_name(topic)
        return topics.exists(topic) and 0 <= partition < topics.partition_count(topic)
    except Exception:
        return False


@register(24, "AddPartitionsToTxn", min_version=0, max_version=3)
async def add_partitions_to_txn(context: RequestContext, request: Any) -> Any:
    """Add every partition, or none, to the producer's transaction."""
    asked = [(topic.name, partition) for topic in request.v3_and_below_topics for partition in topic.partitions]
    missing = {key for key in asked if not _exists(context, *key)}
    codes: dict[tuple[str, int], ErrorCode]
    if missing:
        codes = {
            key: ErrorCode.unknown_topic_or_partition if key in missing else ErrorCode.operation_not_attempted
            for key in asked
        }
    else:
        error = await transactions_of(context.gateway).add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            asked,
        )
        code = ErrorCode(fenced_error_for(error, request.__version__ >= _PRODUCER_FENCED_FROM))
        codes = dict.fromkeys(asked, code)
    return respond(
        request,
        "AddPartitionsToTxnResponse",
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            nested(
                request,
                "AddPartitionsToTxnTopicResult",
                name=topic.name,
                results_by_partition=tuple(
                    nested(
                        request,
                        "AddPartitionsToTxnPartitionResult",
                        partition_index=partition,
                        partition_error_code=codes[topic.name, partition],
                    )
                    for partition in topic.partitions
                ),
            )
            for topic in request.v3_and_below_topics
        ),
    )
