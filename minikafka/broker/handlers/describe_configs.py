"""DescribeConfigs (key 32): the topic and broker settings minikafka honours.

A topic is described from the cluster's metadata (the controller's record of its overrides in a
cluster, so any broker answers for any topic, replica or not, as Kafka's brokers answer from their
metadata image); a broker resource only by the broker it names, as in Kafka."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from minikafka.broker.config_changes import check_broker_name
from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import cluster_topics
from minikafka.config import BROKER_DEFAULTS, TOPIC_CONFIG_SOURCES, parse_topic_configs
from minikafka.errors import ErrorCode, KafkaError

TOPIC, BROKER = 2, 4
# Kafka's ConfigSource values.
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# Kafka's ConfigType values.
_TYPES = {bool: 1, str: 2, int: 5, float: 6}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    services = ctx.services
    topics = cluster_topics(services)
    Response = DescribeConfigsResponse[version]
    Result = Response.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    results = []
    for resource in request.resources:
        keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
        error, message = ErrorCode.NONE, None
        entries: list[tuple[str, Any, int, type]] = []
        if resource.resource_type == TOPIC:
            info = topics.get(resource.resource_name)
            if info is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                overrides = parse_topic_configs(info.configs)
                for name, (source, kind) in sorted(TOPIC_CONFIG_SOURCES.items()):
                    if name in overrides:
                        entries.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG, kind))
                    else:
                        origin = STATIC_BROKER_CONFIG if source in services.config.settings else DEFAULT_CONFIG
                        entries.append((name, services.config.topic_default(name), origin, kind))
        elif resource.resource_type == BROKER:
            try:
                check_broker_name(ctx, resource.resource_name)
            except KafkaError as exc:
                error, message = exc.code, exc.message
            else:
                for name, (kind, _default) in sorted(BROKER_DEFAULTS.items()):
                    origin = STATIC_BROKER_CONFIG if name in services.config.settings else DEFAULT_CONFIG
                    entries.append((name, services.config.get(name), origin, kind))
        else:
            error, message = ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}"
        configs = []
        for name, value, origin, kind in entries:
            if keys is not None and name not in keys:
                continue
            fields: dict[str, Any] = {"name": name, "value": _text(value), "read_only": False,
                                      "is_sensitive": False}
            if version == 0:
                fields["is_default"] = origin == DEFAULT_CONFIG
            else:
                fields["config_source"] = origin
                fields["synonyms"] = []
            if version >= 3:
                fields["config_type"] = _TYPES.get(kind, 0)
                fields["documentation"] = None
            configs.append(Entry(**fields))
        results.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name, configs=configs if not error else []))
    return Response(throttle_time_ms=0, results=results)
