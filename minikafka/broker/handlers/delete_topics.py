"""DeleteTopics (key 20): by name (v0-5) or by name or id (v6+).

In a cluster the controller forgets the topic and every broker deletes its replicas
(:meth:`~minikafka.broker.cluster.cluster.Cluster.delete_topic`)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kafka.protocol.admin import DeleteTopicsRequest, DeleteTopicsResponse

from minikafka.broker.context import RequestContext
from minikafka.broker.topics import is_internal
from minikafka.errors import ErrorCode

log = logging.getLogger(__name__)
ZERO_UUID = uuid.UUID(int=0)


def _topic_ids(ctx: RequestContext) -> dict[str, uuid.UUID]:
    """Every topic's id: the controller's in a cluster, the local catalogue's on a single broker."""
    link = ctx.services.cluster
    if link is not None:
        return {name: record.topic_id for name, record in link.controller.topics.items()}
    return {name: info.topic_id for name, info in ctx.services.storage.topics().items()}


def _delete(ctx: RequestContext, name: str) -> None:
    services = ctx.services
    if services.cluster is not None:
        services.cluster.delete_topic(name)
        return
    services.storage.delete_topic(name)
    services.groups.offsets.on_topic_deleted(name)  # committed offsets go with the topic, as in Kafka
    log.info("deleted topic %s", name)


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    version = ctx.api_version
    services = ctx.services
    Response = DeleteTopicsResponse[version]
    Result = Response.DeletableTopicResult
    if version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        topics = _topic_ids(ctx)
        error, message = ErrorCode.NONE, None
        if name is None and topic_id not in (None, ZERO_UUID):
            name = next((n for n, i in topics.items() if i == topic_id), None)
            if name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
        known_id = topics.get(name) if name is not None else None
        if error == ErrorCode.NONE:
            if known_id is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not services.config.get("delete.topic.enable"):
                error = ErrorCode.TOPIC_DELETION_DISABLED
            elif is_internal(name):
                error, message = ErrorCode.INVALID_REQUEST, f"cannot delete internal topic {name}"
            else:
                _delete(ctx, name)
        fields: dict[str, Any] = {"name": name, "error_code": error}
        if version >= 5:
            fields["error_message"] = message
        if version >= 6:
            fields["topic_id"] = known_id if known_id is not None else (topic_id or ZERO_UUID)
        results.append(Result(**fields))
    return Response(throttle_time_ms=0, responses=results)
