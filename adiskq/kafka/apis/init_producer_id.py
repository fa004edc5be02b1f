"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

A new producer gets a fresh id at epoch 0. A producer that sends its current id and epoch (v3+,
KIP-360: it lost track of a sequence) keeps its id with the next epoch, and its sequences start
again from 0. Transactions are not served: a request with a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients take as final at once (FindCoordinator refuses
the transaction coordinator the same way, with a message saying why).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from ._common import NO_THROTTLE

__all__ = ["init_producer_id"]

_MAX_EPOCH = 2**15 - 1


@register(22, "InitProducerId", min_version=0, max_version=4)
async def init_producer_id(context: RequestContext, request: Any) -> Any:
    """A producer id and epoch."""
    if request.transactional_id is not None:
        return respond(
            request,
            "InitProducerIdResponse",
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
        )
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
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
