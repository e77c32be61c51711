"""DeleteRecords (key 21): move a partition's log start offset forward."""

from __future__ import annotations

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.topics import is_internal
from minikafka.errors import ErrorCode, KafkaError


async def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    logs = ctx.storage
    Response = DeleteRecordsResponse[ctx.api_version]
    Topic = Response.DeleteRecordsTopicResult
    Partition = Topic.DeleteRecordsPartitionResult
    topics_out = []
    for topic in request.topics:
        parts = []
        for part in topic.partitions:
            partition_log = logs.get_log(topic.name, part.partition_index)
            low, error = -1, ErrorCode.NONE
            if partition_log is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif is_internal(topic.name):
                error = ErrorCode.INVALID_TOPIC_EXCEPTION  # Kafka refuses to delete records of internal topics
            else:
                try:
                    low = partition_log.delete_records(part.offset)
                except KafkaError as exc:
                    error = exc.code
            parts.append(Partition(partition_index=part.partition_index, low_watermark=low, error_code=error))
        topics_out.append(Topic(name=topic.name, partitions=parts))
    return Response(throttle_time_ms=0, topics=topics_out)
