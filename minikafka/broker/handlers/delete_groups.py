"""DeleteGroups (key 42): delete empty groups with their committed offsets."""

from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from minikafka.broker.context import RequestContext


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    names = list(request.groups_names)
    results = await groups.admin.delete_groups(names)
    Response = DeleteGroupsResponse[version]
    Result = Response.DeletableGroupResult
    seen: set[str | None] = set()
    out = []
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        out.append(Result(group_id=name, error_code=results[name]))
    return Response(throttle_time_ms=0, results=out)
