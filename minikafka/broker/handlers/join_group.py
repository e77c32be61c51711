"""JoinGroup (key 11): join or rejoin a group; parked until the rebalance completes.

The request waits (a long poll) on the coordinator; requests on one connection are handled in
order, so only this connection waits. v4+ new members get MEMBER_ID_REQUIRED and a member id
first; v5+ carries group.instance.id (static membership); v9 lets a rejoining static leader skip
the assignor.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from minikafka.broker.context import RequestContext


def client_host(ctx: RequestContext) -> str:
    """The client address as Kafka reports it in DescribeGroups ("/127.0.0.1")."""
    return "/" + ctx.connection.peer.rpartition(":")[0]


async def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    groups = ctx.services.groups
    session_timeout = request.session_timeout_ms
    rebalance_timeout = request.rebalance_timeout_ms if version >= 1 else session_timeout
    instance_id = request.group_instance_id if version >= 5 else None
    result = await groups.join_group(
        request.group_id,
        request.member_id or "",
        instance_id,
        require_known_member_id=version >= 4,
        support_skip_assignment=version >= 9,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        rebalance_timeout_ms=rebalance_timeout,
        session_timeout_ms=session_timeout,
        protocol_type=request.protocol_type or "",
        protocols=[(p.name or "", bytes(p.metadata or b"")) for p in request.protocols],
        reason=request.reason if version >= 8 else None,
    )
    Response = JoinGroupResponse[version]
    Member = Response.JoinGroupResponseMember
    fields: dict[str, Any] = {
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_name": result.protocol_name if version >= 7 else (result.protocol_name or ""),
        "leader": result.leader_id,
        "member_id": result.member_id,
        "members": [Member(member_id=m, group_instance_id=i, metadata=meta) for m, i, meta in result.members],
    }
    if version >= 2:
        fields["throttle_time_ms"] = 0
    if version >= 7:
        fields["protocol_type"] = result.protocol_type
    if version >= 9:
        fields["skip_assignment"] = result.skip_assignment
    return Response(**fields)
