"""DescribeGroups (key 15): state, protocol and members of groups.

As in Kafka, only a Stable group shows the selected protocol and its members' metadata and
assignments; an unknown group is reported Dead (v6+: with GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.groups.admin import GROUP_OPERATIONS
from minikafka.broker.groups.group import GroupState
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    Response = DescribeGroupsResponse[version]
    Described = Response.DescribedGroup
    Member = Described.DescribedGroupMember
    include_ops = version >= 3 and bool(request.include_authorized_operations)
    out = []
    for group_id in request.groups:
        error, message, group = groups.admin.describe_group(group_id, version)
        fields: dict[str, Any] = {"error_code": error, "group_id": group_id, "group_state": "",
                                  "protocol_type": "", "protocol_data": "", "members": []}
        if group is None:
            if error in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):  # unknown: Kafka says Dead
                fields["group_state"] = GroupState.DEAD.value
        else:
            stable = group.is_(GroupState.STABLE)
            protocol = group.protocol_name if stable else None
            fields["group_state"] = group.state.value
            fields["protocol_type"] = group.protocol_type or ""
            fields["protocol_data"] = protocol or ""
            members = []
            for m in group.members.values():
                member: dict[str, Any] = {
                    "member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                    "member_metadata": m.metadata(protocol) if protocol else b"",
                    "member_assignment": m.assignment if protocol else b"",
                }
                if version >= 4:
                    member["group_instance_id"] = m.group_instance_id
                members.append(Member(**member))
            fields["members"] = members
        if version >= 3:
            fields["authorized_operations"] = set(GROUP_OPERATIONS) if include_ops and group is not None else None
        if version >= 6:
            fields["error_message"] = message
        out.append(Described(**fields))
    response: dict[str, Any] = {"groups": out}
    if version >= 1:
        response["throttle_time_ms"] = 0
    return Response(**response)
