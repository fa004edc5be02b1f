"""AddOffsetsToTxn (key 25): a consumer group whose offsets the transaction will commit
(``send_offsets_to_transaction``); TxnOffsetCommit then sends the offsets themselves."""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._groups import valid_group_id
from .._registry import RequestContext, register, respond
from .._transactions import transactions_of
from ..transaction_coordinator import fenced_error_for
from ._common import NO_THROTTLE

__all__ = ["add_offsets_to_txn"]

_PRODUCER_FENCED_FROM: Final = 2


@register(25, "AddOffsetsToTxn", min_version=0, max_version=3)
async def add_offsets_to_txn(context: RequestContext, request: Any) -> Any:
    """Add the group to the producer's transaction."""
    if not valid_group_id(request.group_id):
        code = ErrorCode.invalid_group_id
    else:
        error = await transactions_of(context.gateway).add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
        code = ErrorCode(fenced_error_for(error, request.__version__ >= _PRODUCER_FENCED_FROM))
    return respond(request, "AddOffsetsToTxnResponse", throttle_time=NO_THROTTLE, error_code=code)
