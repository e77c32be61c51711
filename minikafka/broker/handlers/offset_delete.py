"""OffsetDelete (key 47): delete committed offsets of partitions the group does not consume.

A group with members keeps the offsets of topics it is subscribed to
(GROUP_SUBSCRIBED_TO_TOPIC); a non-consumer group with members refuses (NON_EMPTY_GROUP).
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    groups = ctx.groups
    topics = ctx.storage.topics()
    errors: dict[tuple[str, int], int] = {}
    wanted: list[tuple[str, int]] = []
    for topic in request.topics:
        info = topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if info is None or not 0 <= p.partition_index < info.partitions:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(tp)
    Response = OffsetDeleteResponse[ctx.api_version]
    group_error, results = await groups.delete_offsets(request.group_id, wanted)
    if group_error != ErrorCode.NONE:
        return Response(error_code=group_error, throttle_time_ms=0, topics=[])
    errors.update(results)
    Topic = Response.OffsetDeleteResponseTopic
    Partition = Topic.OffsetDeleteResponsePartition
    out = [
        Topic(name=topic.name, partitions=[
            Partition(partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions
        ])
        for topic in request.topics
    ]
    return Response(error_code=0, throttle_time_ms=0, topics=out)
