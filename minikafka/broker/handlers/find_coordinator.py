"""FindCoordinator (key 10): a single broker coordinates the groups and transactional ids of the
internal partitions it serves; for a key of another partition the answer is NOT_COORDINATOR. In a
cluster the answer is the leader of the key's internal partition, wherever it is asked.

v0 names one group; v1-v3 add the key type (0 group, 1 transaction); v4 batches several keys.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minikafka.broker.cluster import answers
from minikafka.broker.context import RequestContext
from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.broker.transactions.records import TRANSACTION_STATE_TOPIC
from minikafka.errors import ErrorCode

GROUP, TRANSACTION = 0, 1


def _lookup(ctx: RequestContext, key_type: int, key: str | None) -> tuple[int, str | None]:
    """(error, message) for ``key`` of ``key_type``."""
    if key_type not in (GROUP, TRANSACTION):
        return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    coordinator = ctx.services.groups if key_type == GROUP else ctx.services.transactions
    if not coordinator.active:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is not available"
    if not coordinator.partitions.serves(key or ""):
        return ErrorCode.NOT_COORDINATOR, "this broker does not coordinate the key's partition"
    return ErrorCode.NONE, None


async def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    version = ctx.api_version
    services = ctx.services
    Response = FindCoordinatorResponse[version]
    key_type = request.key_type if version >= 1 else GROUP

    link = services.cluster

    def answer(key: str | None) -> tuple[int, str | None, int, str, int]:
        if link is not None and key_type in (GROUP, TRANSACTION):
            # a cluster: the leader of the key's internal partition coordinates it (docs/cluster.md)
            topic = OFFSETS_TOPIC if key_type == GROUP else TRANSACTION_STATE_TOPIC
            found, node = link.coordinator(topic, key or "")
            where = answers.endpoint(link, node) if found == ErrorCode.NONE else None
            if where is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is not available", -1, "", -1
            return ErrorCode.NONE, None, node, *where
        error, message = _lookup(ctx, key_type, key)
        node, host, port = (services.node_id, *ctx.advertised_address) if not error else (-1, "", -1)
        return error, message, node, host, port

    if version >= 4:
        Coordinator = Response.Coordinator
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node, host, port = answer(key)
            coordinators.append(Coordinator(key=key, node_id=node, host=host, port=port, error_code=error,
                                            error_message=message))
        return Response(throttle_time_ms=0, coordinators=coordinators)
    error, message, node, host, port = answer(request.key)
    fields: dict[str, Any] = {"error_code": error, "node_id": node, "host": host, "port": port}
    if version >= 1:
        fields["throttle_time_ms"] = 0
        fields["error_message"] = message
    return Response(**fields)
