"""SyncGroup (key 14): the leader sends the assignment; every member waits for its share."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.group import SyncResult
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    protocol_type = request.protocol_type if version >= 5 else None
    protocol_name = request.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        # v5+ must name the protocol type and name it syncs for
        result = SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    else:
        assignments = {a.member_id: bytes(a.assignment or b"") for a in request.assignments}
        result = await groups.sync_group(request.group_id, request.generation_id, request.member_id or "",
                                         request.group_instance_id if version >= 3 else None, protocol_type,
                                         protocol_name, assignments)
    Response = SyncGroupResponse[version]
    fields: dict[str, Any] = {"error_code": result.error, "assignment": result.assignment}
    if version >= 1:
        fields["throttle_time_ms"] = 0
    if version >= 5:
        fields["protocol_type"] = result.protocol_type
        fields["protocol_name"] = result.protocol_name
    return Response(**fields)
