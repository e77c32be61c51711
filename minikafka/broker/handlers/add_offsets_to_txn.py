"""AddOffsetsToTxn (key 25): the group's ``__consumer_offsets`` partition joins the transaction.

The group coordinator is not consulted (Kafka does not check that the group exists). PRODUCER_FENCED
is INVALID_PRODUCER_EPOCH before v2.
"""

from __future__ import annotations

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    version = ctx.api_version
    coordinator = ctx.services.transactions
    error: int
    if request.group_id is None:
        error = ErrorCode.INVALID_GROUP_ID
    else:
        error = await coordinator.add_offsets(request.transactional_id, request.producer_id,
                                              request.producer_epoch, request.group_id)
    if error == ErrorCode.PRODUCER_FENCED and version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse[version](throttle_time_ms=0, error_code=error)
