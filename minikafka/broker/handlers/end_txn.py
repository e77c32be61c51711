"""EndTxn (key 26): commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort and the answer goes out at once; the markers
and CompleteCommit/CompleteAbort follow. v0-v4 are served (v5 would switch the coordinator to
KIP-890 part 2, an epoch bump per transaction, which minikafka does not implement).
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2 (``docs/semantics.md#txn-end``).
"""

from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    version = ctx.api_version
    coordinator = ctx.services.transactions
    error = await coordinator.end_transaction(request.transactional_id, request.producer_id,
                                              request.producer_epoch, bool(request.committed))
    if error == ErrorCode.PRODUCER_FENCED and version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse[version](throttle_time_ms=0, error_code=error)
