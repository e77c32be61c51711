"""Heartbeat (key 12): keep a member's session alive; REBALANCE_IN_PROGRESS says "rejoin"."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from minikafka.broker.context import RequestContext


async def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    error = groups.heartbeat(request.group_id, request.member_id or "",
                             request.group_instance_id if version >= 3 else None, request.generation_id)
    Response = HeartbeatResponse[version]
    fields: dict[str, Any] = {"error_code": error}
    if version >= 1:
        fields["throttle_time_ms"] = 0
    return Response(**fields)
