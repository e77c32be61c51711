"""ListTransactions (key 66, v0-v1): the transactional ids this broker coordinates (KIP-664).

Filters as Kafka applies them: state names matched exactly (unknown names are echoed back in
``unknown_state_filters``), producer ids, and from v1 ``duration_filter`` (only transactions
running longer than that many milliseconds). Empty filters match everything.
"""

from __future__ import annotations

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from minikafka.broker.context import RequestContext


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    version = ctx.api_version
    coordinator = ctx.services.transactions
    duration = request.duration_filter if version >= 1 else -1
    error, unknown, found = coordinator.list_transactions(request.state_filters or [],
                                                          request.producer_id_filters or [], duration)
    Response = ListTransactionsResponse[version]
    State = Response.TransactionState
    return Response(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown, transaction_states=[
        State(transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.display)
        for m in found
    ])
