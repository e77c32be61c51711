"""TxnOffsetCommit (key 28): a consume-transform-produce loop's offsets, inside its transaction.

Sent to the group coordinator. Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION; the
rest go to :meth:`GroupOffsets.commit_txn_offsets`, which checks the group, that the
transaction holds the group's offsets partition (AddOffsetsToTxn came first; the transaction
coordinator answers that, through the check this handler gives it), the member (v3+),
and appends the offsets as one transactional batch: they stay invisible until the transaction's
COMMIT marker. v0-v1 get COORDINATOR_NOT_AVAILABLE where later versions get
COORDINATOR_LOAD_IN_PROGRESS (old clients failed on the latter). Rules: ``docs/semantics.md#txn-offsets``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.offsets import TxnWriteCheck
from minikafka.broker.groups.records import CommittedOffset
from minikafka.broker.handlers.offset_commit import requested_offsets
from minikafka.broker.partition_answers import error_answers
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    transactions = ctx.services.transaction_coordinator_of(request.transactional_id)
    now = ctx.services.clock()

    def committed(p: Any) -> CommittedOffset:
        return CommittedOffset(offset=p.committed_offset,
                               leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                               metadata=p.committed_metadata or "", commit_timestamp=now)

    errors, offsets = requested_offsets(ctx, request.topics, committed)
    if offsets:
        if transactions is None:  # a cluster whose transaction coordinator's broker is down: retry
            txn_check: TxnWriteCheck = lambda tp: ErrorCode.COORDINATOR_NOT_AVAILABLE  # noqa: E731
        else:
            txn_check = partial(transactions.check_transactional_write, request.transactional_id,
                                request.producer_id, request.producer_epoch)
        results = await groups.offsets.commit_txn_offsets(
            txn_check, request.group_id, request.producer_id, request.producer_epoch,
            request.member_id or "" if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            request.generation_id if version >= 3 else -1,
            offsets, version,
        )
        if version < 2:
            results = {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE if e == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else e
                       for tp, e in results.items()}
        errors.update(results)
    Response = TxnOffsetCommitResponse[version]
    Topic = Response.TxnOffsetCommitResponseTopic
    Partition = Topic.TxnOffsetCommitResponsePartition
    return Response(throttle_time_ms=0, topics=error_answers(Topic, Partition, request.topics, errors))
