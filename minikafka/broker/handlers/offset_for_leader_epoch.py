"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in this leader's log.

A follower or a consumer (KIP-320) that holds records of epoch E asks where E ends: the answer is
the leader-epoch cache's (``PartitionLog.epochs.end_offset_for``): the log end for the current
epoch, the start of the next epoch for an older one, the floor epoch for one between entries, and
(-1, -1) with no error for an epoch it does not know. A consumer positioned past the answer was
reading records that an unclean election or a truncation took away. Leader only, with the
request's ``current_leader_epoch`` checked first. Kafka: ``KafkaApis.handleOffsetForLeaderEpochRequest``
and ``Partition.lastOffsetForLeaderEpoch``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/cluster/Partition.scala.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    services = ctx.services
    Response = OffsetForLeaderEpochResponse[ctx.api_version]
    Topic = Response.OffsetForLeaderTopicResult
    Partition = Topic.EpochEndOffset

    def answer(topic: str, part: Any) -> Any:
        plog = services.storage.get_log(topic, part.partition)
        error = ErrorCode.NONE
        if services.replicas is not None:
            error = services.replicas.leader_error(topic, part.partition, part.current_leader_epoch)
        elif plog is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if error != ErrorCode.NONE or plog is None:
            return Partition(error_code=error, partition=part.partition, leader_epoch=-1, end_offset=-1)
        epoch, end = plog.epochs.end_offset_for(part.leader_epoch, plog.log_end_offset)
        return Partition(error_code=0, partition=part.partition, leader_epoch=epoch, end_offset=end)

    return Response(throttle_time_ms=0, topics=[
        Topic(topic=t.topic, partitions=[answer(t.topic, p) for p in t.partitions]) for t in request.topics])
