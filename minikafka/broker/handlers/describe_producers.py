"""DescribeProducers (key 61): a partition's idempotent-producer state, for admin clients."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import per_partition
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    logs = ctx.services.storage
    Response = DescribeProducersResponse[ctx.api_version]
    Topic = Response.TopicResponse
    Partition = Topic.PartitionResponse
    State = Partition.ProducerState

    def answer(topic: str, index: int) -> Any:
        partition_log = logs.get_log(topic, index)
        if partition_log is None:
            return Partition(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             error_message=None, active_producers=[])
        active = []
        for pid, entry in sorted(partition_log.producers().items()):
            last_seq = entry.batches[-1].last_seq if entry.batches else -1
            active.append(State(producer_id=pid, producer_epoch=entry.epoch, last_sequence=last_seq,
                                last_timestamp=entry.last_timestamp,
                                coordinator_epoch=entry.coordinator_epoch,
                                current_txn_start_offset=entry.current_txn_first_offset))
        return Partition(partition_index=index, error_code=0, error_message=None, active_producers=active)

    return Response(throttle_time_ms=0, topics=per_partition(Topic, request.topics, answer, "partition_indexes"))
