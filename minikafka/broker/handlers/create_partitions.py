"""CreatePartitions (key 37): grow a topic's partition count.

In a cluster the controller checks the request and places the new replicas; each broker then
creates the replicas it was given (:meth:`~minikafka.broker.cluster.replica_manager.ReplicaManager.apply`).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from minikafka.broker.cluster.cluster import ClusterLink
from minikafka.broker.cluster.placement import PlacementError
from minikafka.broker.context import RequestContext
from minikafka.broker.handlers.create_topics import LIMIT_SETTING
from minikafka.config import BrokerConfig
from minikafka.errors import ErrorCode


def _in_cluster(link: ClusterLink, topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
    try:
        link.controller.create_partitions(topic.name, topic.count, assignments, validate_only=validate_only)
    except PlacementError as exc:
        return exc.code, str(exc)
    return ErrorCode.NONE, None


def _over_limit(config: BrokerConfig, count: int) -> str:
    return f"{count} partitions exceed {LIMIT_SETTING}={config.get(LIMIT_SETTING)}"


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    services = ctx.services
    logs = services.storage
    link = services.cluster
    Response = CreatePartitionsResponse[ctx.api_version]
    results = []
    names = [t.name for t in request.topics]
    for topic in request.topics:
        info = logs.topics().get(topic.name)
        error, message = ErrorCode.NONE, None
        if names.count(topic.name) > 1:
            error, message = ErrorCode.INVALID_REQUEST, "duplicate topic in request"
        elif link is not None and topic.count <= services.config.get(LIMIT_SETTING):
            error, message = _in_cluster(link, topic, request.validate_only)
        elif link is not None:
            error, message = ErrorCode.INVALID_PARTITIONS, _over_limit(services.config, topic.count)
        elif info is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif topic.count < info.partitions:
            error, message = ErrorCode.INVALID_PARTITIONS, (
                f"topic currently has {info.partitions} partitions, which is higher than the requested {topic.count}")
        elif topic.count == info.partitions:
            error, message = ErrorCode.INVALID_PARTITIONS, f"topic already has {info.partitions} partitions"
        elif topic.count > services.config.get(LIMIT_SETTING):
            error, message = ErrorCode.INVALID_PARTITIONS, _over_limit(services.config, topic.count)
        elif topic.assignments is not None and (
            len(topic.assignments) != topic.count - info.partitions
            or any(list(a.broker_ids) != [services.node_id] for a in topic.assignments)
        ):
            error, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "invalid replica assignment"
        elif not request.validate_only:
            logs.add_partitions(topic.name, topic.count)
        results.append(Response.CreatePartitionsTopicResult(name=topic.name, error_code=error, error_message=message))
    return Response(throttle_time_ms=0, results=results)
