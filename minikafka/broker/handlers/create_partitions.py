"""CreatePartitions (key 37): grow a topic's partition count."""

from __future__ import annotations

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.handlers.create_topics import LIMIT_SETTING
from minikafka.errors import ErrorCode


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    services = ctx.services
    logs = services.storage
    Response = CreatePartitionsResponse[ctx.api_version]
    results = []
    names = [t.name for t in request.topics]
    for topic in request.topics:
        info = logs.topics().get(topic.name)
        error, message = ErrorCode.NONE, None
        if names.count(topic.name) > 1:
            error, message = ErrorCode.INVALID_REQUEST, "duplicate topic in request"
        elif info is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif topic.count < info.partitions:
            error, message = ErrorCode.INVALID_PARTITIONS, (
                f"topic currently has {info.partitions} partitions, which is higher than the requested {topic.count}")
        elif topic.count == info.partitions:
            error, message = ErrorCode.INVALID_PARTITIONS, f"topic already has {info.partitions} partitions"
        elif topic.count > services.config.get(LIMIT_SETTING):
            error, message = ErrorCode.INVALID_PARTITIONS, (
                f"{topic.count} partitions exceed {LIMIT_SETTING}={services.config.get(LIMIT_SETTING)}")
        elif topic.assignments is not None and (
            len(topic.assignments) != topic.count - info.partitions
            or any(list(a.broker_ids) != [services.node_id] for a in topic.assignments)
        ):
            error, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "invalid replica assignment"
        elif not request.validate_only:
            logs.add_partitions(topic.name, topic.count)
        results.append(Response.CreatePartitionsTopicResult(name=topic.name, error_code=error, error_message=message))
    return Response(throttle_time_ms=0, results=results)
