"""ListGroups (key 16): every group, filtered by state (v4+) and type (v5+), case-insensitively."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from minikafka.broker.context import RequestContext


async def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    states = request.states_filter if version >= 4 else []
    types = request.types_filter if version >= 5 else []
    error, listed = groups.admin.list_groups(states or [], types or [])
    Response = ListGroupsResponse[version]
    Listed = Response.ListedGroup
    out = []
    for group_id, protocol_type, state, group_type in listed:
        fields: dict[str, Any] = {"group_id": group_id, "protocol_type": protocol_type}
        if version >= 4:
            fields["group_state"] = state
        if version >= 5:
            fields["group_type"] = group_type
        out.append(Listed(**fields))
    response: dict[str, Any] = {"error_code": error, "groups": out}
    if version >= 1:
        response["throttle_time_ms"] = 0
    return Response(**response)
