"""CreateTopics (key 19): validated like Kafka, created on disk unless validate_only."""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from minikafka.broker.cluster import answers
from minikafka.broker.context import RequestContext
from minikafka.broker.topics import collides, topic_name_error
from minikafka.config import parse_topic_configs
from minikafka.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
LIMIT_SETTING = "minikafka.topic.max.partitions"


def _check(ctx: RequestContext, topic: Any, seen: set[str]) -> tuple[int, int, dict[str, Any]]:
    """(partitions, replication factor, configs) for a creatable topic, or a KafkaError."""
    services = ctx.services
    name = topic.name
    if name in seen:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"topic {name} appears more than once in the request")
    reason = topic_name_error(name)
    if reason:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
    link = services.cluster
    existing = ctx.services.storage.topics() if link is None else link.controller.topics
    if name in existing:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    other = collides(name, existing)
    if other:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {name!r} collides with existing topic {other!r}")
    if topic.assignments and link is not None:  # checked by the controller's placement
        partitions, replication = len(topic.assignments), len(topic.assignments[0].broker_ids)
    elif topic.assignments:
        partitions = len(topic.assignments)
        for a in topic.assignments:
            if list(a.broker_ids) != [services.node_id]:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"replicas must be [{services.node_id}] on this single-node cluster")
        replication = 1
    else:
        partitions = topic.num_partitions if topic.num_partitions != -1 else services.config.get("num.partitions")
        replication = (
            topic.replication_factor if topic.replication_factor != -1
            else services.config.get("default.replication.factor")
        )
    if partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
    if partitions > services.config.get(LIMIT_SETTING):
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"{partitions} partitions exceed {LIMIT_SETTING}={services.config.get(LIMIT_SETTING)}")
    if replication <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
    if replication > 1 and link is None:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"replication factor: {replication} larger than available brokers: 1")
    configs = {c.name: c.value for c in topic.configs}
    try:
        parse_topic_configs(configs)
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return partitions, replication, configs


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    version = ctx.api_version
    services = ctx.services
    Response = CreateTopicsResponse[version]
    Result = Response.CreatableTopicResult
    results = []
    seen: set[str] = set()
    names = [t.name for t in request.topics]
    for topic in request.topics:
        fields: dict[str, Any] = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            if names.count(topic.name) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"topic {topic.name} appears more than once")
            partitions, replication, configs = _check(ctx, topic, seen)
            seen.add(topic.name)
            link = services.cluster
            if link is not None:  # a cluster: the controller places the replicas, each broker creates its own
                assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
                answers.create_topic(link, topic.name, partitions, replication, assignments, configs,
                                     request.validate_only)
                if version >= 7 and not request.validate_only:
                    fields["topic_id"] = link.controller.topics[topic.name].topic_id
            elif not request.validate_only:
                info = ctx.services.storage.create_topic(topic.name, partitions, configs)
                log.info("created topic %s with %d partition(s) %s", topic.name, partitions, configs or "")
                if version >= 7:
                    fields["topic_id"] = info.topic_id
            if version >= 5:
                fields["num_partitions"] = partitions
                fields["replication_factor"] = replication
                effective = services.config.topic_defaults() | parse_topic_configs(configs)
                fields["configs"] = [
                    Result.CreatableTopicConfigs(name=k, value=str(v), read_only=False,
                                                 config_source=1 if k in configs else 5, is_sensitive=False)
                    for k, v in sorted(effective.items())
                ]
        except KafkaError as exc:
            fields["error_code"] = exc.code
            fields["error_message"] = exc.message
        if version < 1:
            fields.pop("error_message")
        results.append(Result(**fields))
    return Response(throttle_time_ms=0, topics=results)
