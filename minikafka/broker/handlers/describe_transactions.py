"""DescribeTransactions (key 65, v0): the coordinator's view of transactional ids (KIP-664).

Per id: INVALID_REQUEST for an empty id, TRANSACTIONAL_ID_NOT_FOUND for an unknown one, else its
state name, timeout, start time (-1 without a transaction), producer id/epoch and partitions.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

from minikafka.broker.context import RequestContext


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = ctx.services.transactions
    Response = DescribeTransactionsResponse[ctx.api_version]
    State = Response.TransactionState
    Topic = State.TopicData
    out = []
    for txn_id in request.transactional_ids:
        error, meta = coordinator.describe(txn_id)
        if meta is None:
            out.append(State(error_code=error, transactional_id=txn_id, transaction_state="",
                             transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                             producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out.append(State(error_code=error, transactional_id=txn_id, transaction_state=meta.state.display,
                         transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
                         producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                         topics=[Topic(topic=t, partitions=p) for t, p in by_topic.items()]))
    return Response(throttle_time_ms=0, transaction_states=out)
