"""DeleteRecords (key 21): move a partition's log start offset forward.

In a cluster only the partition's leader deletes (a follower, or a broker without a replica,
answers NOT_LEADER_OR_FOLLOWER; Kafka: ``ReplicaManager.deleteRecordsOnLocalLog``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/ReplicaManager.scala).
The answer does not wait for the followers' log starts (Kafka's low watermark), see docs/cluster.md.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import per_partition
from minikafka.broker.topics import is_internal
from minikafka.errors import ErrorCode, KafkaError


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    logs = ctx.services.storage
    Response = DeleteRecordsResponse[ctx.api_version]
    Topic = Response.DeleteRecordsTopicResult
    Partition = Topic.DeleteRecordsPartitionResult
    replicas = ctx.services.replicas

    def answer(topic: str, part: Any) -> Any:
        partition_log = logs.get_log(topic, part.partition_index)
        low, error = -1, ErrorCode.NONE
        if replicas is not None and not is_internal(topic):  # the coordinators' topics are local
            error = replicas.leader_error(topic, part.partition_index)
        if error != ErrorCode.NONE:
            pass
        elif partition_log is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif is_internal(topic):
            error = ErrorCode.INVALID_TOPIC_EXCEPTION  # Kafka refuses to delete records of internal topics
        else:
            try:
                low = partition_log.delete_records(part.offset)
            except KafkaError as exc:
                error = exc.code
        return Partition(partition_index=part.partition_index, low_watermark=low, error_code=error)

    return Response(throttle_time_ms=0, topics=per_partition(Topic, request.topics, answer))
