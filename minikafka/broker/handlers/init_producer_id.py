"""InitProducerId (key 22) for idempotent producers (reference §2.3).

Without a transactional id the answer is always a brand-new producer id with epoch 0; the
producer_id/producer_epoch inputs of v3+ only matter for transactions, which minikafka does
not coordinate.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import InitProducerIdResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    Response = InitProducerIdResponse[version]
    pid_in = getattr(request, "producer_id", -1) if version >= 3 else -1
    epoch_in = getattr(request, "producer_epoch", -1) if version >= 3 else -1
    if (pid_in == -1) != (epoch_in == -1):
        return Response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        # "" is invalid in Kafka. A real transactional id needs a transaction coordinator, which
        # minikafka does not have: answer with an error clients treat as fatal rather than one they
        # would retry until their timeout.
        error = (
            ErrorCode.INVALID_REQUEST
            if request.transactional_id == ""
            else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )
        return Response(throttle_time_ms=0, error_code=error, producer_id=-1, producer_epoch=-1)
    assert ctx.broker.producer_ids is not None
    pid = ctx.broker.producer_ids.allocate()
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
