"""InitProducerId (key 22): a producer id and epoch for an idempotent or transactional producer.

A new idempotent producer gets a fresh id at epoch 0. One that sends its current id and epoch (v3+,
KIP-360: it lost track of a sequence) keeps its id with the next epoch, and its sequences start
again from 0. A transactional producer (a transactional id) is answered by the transaction
coordinator (``_transactions.py``): the id's producer id with its epoch bumped, which fences every
older instance; an open transaction of an older instance is aborted first (the answer is then
CONCURRENT_TRANSACTIONS, and the client asks again). Versions before 4 get INVALID_PRODUCER_EPOCH
where newer ones get PRODUCER_FENCED, as Kafka answers them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from .._transactions import transactions_of
from ..transaction_coordinator import fenced_error_for
from ._common import NO_THROTTLE

__all__ = ["init_producer_id"]

_MAX_EPOCH: Final = 2**15 - 1
_PRODUCER_FENCED_FROM: Final = 4  # the first version whose clients know PRODUCER_FENCED
_MILLISECOND: Final = dt.timedelta(milliseconds=1)


@register(22, "InitProducerId", min_version=0, max_version=4)
async def init_producer_id(context: RequestContext, request: Any) -> Any:
    """A producer id and epoch."""
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if request.transactional_id is not None:
        expected = (producer_id, epoch) if producer_id >= 0 else None
        answer = await transactions_of(context.gateway).init_producer_id(
            request.transactional_id, request.transaction_timeout // _MILLISECOND, expected
        )
        return respond(
            request,
            "InitProducerIdResponse",
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode(fenced_error_for(answer.error, request.__version__ >= _PRODUCER_FENCED_FROM)),
            producer_id=answer.producer_id,
            producer_epoch=answer.epoch,
        )
    if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
        epoch += 1
    else:
        producer_id, epoch = context.gateway.producer_ids.new(), 0
    return respond(
        request,
        "InitProducerIdResponse",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
