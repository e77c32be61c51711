"""AddPartitionsToTxn (key 24): partitions join the producer's transaction before it writes there.

Clients send v0-v3 (one transaction per request), which minikafka serves. v4+ is the batched
broker-to-coordinator form and needs CLUSTER_ACTION, which no client holds: minikafka advertises
it as Kafka does and answers a v4+ request CLUSTER_AUTHORIZATION_FAILED, as Kafka does for a client.

Order of checks (Kafka's): per partition, internal topics are never authorized here
(TOPIC_AUTHORIZATION_FAILED) and unknown partitions are UNKNOWN_TOPIC_OR_PARTITION; if any
partition failed, the others get OPERATION_NOT_ATTEMPTED and nothing is added. Otherwise the
coordinator's one answer (INVALID_REQUEST, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED —
INVALID_PRODUCER_EPOCH before v2 —, CONCURRENT_TRANSACTIONS, NONE) applies to every partition
(``docs/semantics.md#txn-add``).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import cluster_topics
from minikafka.broker.topics import is_internal
from minikafka.errors import ErrorCode
from minikafka.storage.disk_format import TopicPartition


def partition_errors(ctx: RequestContext, wanted: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Per-partition errors before the coordinator is asked (empty when every partition is fine)."""
    topics = cluster_topics(ctx.services)
    errors: dict[TopicPartition, int] = {}
    for topic, partition in wanted:
        info = topics.get(topic)
        if is_internal(topic):
            errors[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None or not 0 <= partition < info.partitions:
            errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if errors:
        for tp in wanted:
            errors.setdefault(tp, ErrorCode.OPERATION_NOT_ATTEMPTED)
    return errors


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    version = ctx.api_version
    Response = AddPartitionsToTxnResponse[version]
    Topic = Response.AddPartitionsToTxnTopicResult
    Partition = Topic.AddPartitionsToTxnPartitionResult
    if version >= 4:
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        results_by_transaction=[])
    # a partition named twice is answered once, as Kafka's map of results does
    wanted = list(dict.fromkeys((t.name, p) for t in request.v3_and_below_topics for p in t.partitions))
    errors = partition_errors(ctx, wanted)
    if not errors:
        coordinator = ctx.services.transactions
        error = await coordinator.add_partitions(request.v3_and_below_transactional_id,
                                                 request.v3_and_below_producer_id,
                                                 request.v3_and_below_producer_epoch, wanted)
        if error == ErrorCode.PRODUCER_FENCED and version < 2:
            error = ErrorCode.INVALID_PRODUCER_EPOCH
        errors = dict.fromkeys(wanted, error)
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in wanted:
        by_topic.setdefault(topic, []).append(
            Partition(partition_index=partition, partition_error_code=errors[(topic, partition)]))
    return Response(throttle_time_ms=0, results_by_topic_v3_and_below=[
        Topic(name=name, results_by_partition=parts) for name, parts in by_topic.items()
    ])
