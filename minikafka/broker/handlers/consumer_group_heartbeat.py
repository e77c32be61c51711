"""ConsumerGroupHeartbeat (key 68): a member of a KIP-848 consumer group joins, heartbeats, acks its
partitions or leaves; the coordinator answers with its epoch and, when it changed, its partitions
(:mod:`minikafka.broker.groups.consumer_coordinator`)."""

from __future__ import annotations

from typing import Any

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.consumer_coordinator import Heartbeat
from minikafka.broker.groups.consumer_records import Assignment
from minikafka.broker.handlers.join_group import client_host
from minikafka.protocol.consumer_group_apis import ConsumerGroupHeartbeatResponse


def owned_partitions(request: Any) -> Assignment | None:
    if request.topic_partitions is None:
        return None
    out: Assignment = {}
    for tp in request.topic_partitions:
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions or ())
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    names = request.subscribed_topic_names
    answer = await ctx.services.groups.consumer.heartbeat(Heartbeat(
        version=version, group_id=request.group_id or "", member_id=request.member_id or "",
        member_epoch=request.member_epoch, instance_id=request.instance_id, rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        topic_names=None if names is None else tuple(n or "" for n in names),
        regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor, owned=owned_partitions(request),
        client_id=ctx.client_id or "", client_host=client_host(ctx)))
    Response = ConsumerGroupHeartbeatResponse[version]
    assignment = None
    if answer.assignment is not None:
        assignment = Response.Assignment(topic_partitions=[
            Response.Assignment.TopicPartitions(topic_id=tid, partitions=sorted(ps))
            for tid, ps in sorted(answer.assignment.items()) if ps])
    return Response(throttle_time_ms=0, error_code=answer.error, error_message=answer.message,
                    member_id=answer.member_id, member_epoch=answer.epoch,
                    heartbeat_interval_ms=answer.interval_ms, assignment=assignment)
