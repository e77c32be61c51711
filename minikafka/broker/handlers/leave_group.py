"""LeaveGroup (key 13): members leave (v3+: several at once, by member id or group.instance.id).

Before v3 there is one member and one error code: the member's error when the group itself is
fine, as Kafka reports it.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    Response = LeaveGroupResponse[version]
    if version < 3:
        error, member_errors = groups.leave_group(request.group_id, [(request.member_id or "", None, None)])
        if error == ErrorCode.NONE and member_errors:
            error = member_errors[0]
        fields: dict[str, Any] = {"error_code": error}
        if version >= 1:
            fields["throttle_time_ms"] = 0
        return Response(**fields)
    leaving = [(m.member_id or "", m.group_instance_id, m.reason if version >= 5 else None) for m in request.members]
    error, member_errors = groups.leave_group(request.group_id, leaving)
    Member = Response.MemberResponse
    members = [
        Member(member_id=m, group_instance_id=i, error_code=e)
        for (m, i, _), e in zip(leaving, member_errors, strict=False)
    ]
    return Response(throttle_time_ms=0, error_code=error, members=members)
