"""OffsetDelete (key 47): delete committed offsets of partitions the group does not consume.

A group with members keeps the offsets of topics it is subscribed to
(GROUP_SUBSCRIBED_TO_TOPIC); a non-consumer group with members refuses (NON_EMPTY_GROUP).
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import cluster_topics, error_answers, known_partitions
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    groups = ctx.services.groups
    errors, known = known_partitions(cluster_topics(ctx.services), request.topics)
    wanted = [tp for tp, _p in known]
    Response = OffsetDeleteResponse[ctx.api_version]
    group_error, results = await groups.offsets.delete_offsets(request.group_id, wanted)
    if group_error != ErrorCode.NONE:
        return Response(error_code=group_error, throttle_time_ms=0, topics=[])
    errors.update(results)
    Topic = Response.OffsetDeleteResponseTopic
    Partition = Topic.OffsetDeleteResponsePartition
    return Response(error_code=0, throttle_time_ms=0,
                    topics=error_answers(Topic, Partition, request.topics, errors))
