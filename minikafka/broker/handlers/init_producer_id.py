"""InitProducerId (key 22): a producer id for idempotent and transactional producers.

Without a transactional id the answer is always a brand-new producer id with epoch 0. With one,
the transaction coordinator answers (same producer id, epoch + 1; fencing an open transaction;
KIP-360 checks of the v3+ producer_id/producer_epoch): see
:meth:`minikafka.broker.transactions.TransactionCoordinator.init_producer_id`. PRODUCER_FENCED
only exists from v4; older versions get INVALID_PRODUCER_EPOCH instead (``docs/semantics.md#txn-init``).
"""

from __future__ import annotations

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    version = ctx.api_version
    Response = InitProducerIdResponse[version]
    pid_in = getattr(request, "producer_id", -1) if version >= 3 else -1
    epoch_in = getattr(request, "producer_epoch", -1) if version >= 3 else -1
    if (pid_in == -1) != (epoch_in == -1):
        return Response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
    if request.transactional_id is not None:
        coordinator = ctx.services.transactions
        error, pid, epoch = await coordinator.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, pid_in, epoch_in)
        if error == ErrorCode.PRODUCER_FENCED and version < 4:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        return Response(throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch)
    pid = ctx.services.producer_ids.allocate()
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
