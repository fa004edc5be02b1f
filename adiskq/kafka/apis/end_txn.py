"""EndTxn (key 26): commit or abort the producer's transaction.

Answered once the transaction has ended: its commit or abort marker is on disk in every partition
it wrote, and on commit the offsets it sent with TxnOffsetCommit are the groups' committed offsets
(``_transactions.py``). The retry of an ending already done gets the same answer; ending a
transaction that is not open is INVALID_TXN_STATE. Version 5 (transaction version 2, KIP-890)
bumps the producer's epoch at every ending and answers the new producer id and epoch; its abort of a
transaction that is not open is allowed.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from .._registry import RequestContext, register, respond
from .._transactions import transactions_of
from ..transaction_coordinator import fenced_error_for
from ._common import NO_THROTTLE

__all__ = ["end_txn"]

_PRODUCER_FENCED_FROM: Final = 2
_TRANSACTION_VERSION_2_FROM: Final = 5  # EndTxn v5: the epoch bumped at every ending, the new one answered


@register(26, "EndTxn", min_version=0, max_version=5)
async def end_txn(context: RequestContext, request: Any) -> Any:
    """Commit or abort, and answer when the transaction has ended."""
    transactions = transactions_of(context.gateway)
    bump_epoch = request.__version__ >= _TRANSACTION_VERSION_2_FROM
    error = await transactions.end_txn(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        request.committed,
        bump_epoch=bump_epoch,
    )
    producer_id, epoch = transactions.current(request.transactional_id) if bump_epoch and not error else (-1, -1)
    return respond(
        request,
        "EndTxnResponse",
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(fenced_error_for(error, request.__version__ >= _PRODUCER_FENCED_FROM)),
        producer_id=producer_id,
        producer_epoch=epoch,
    )
