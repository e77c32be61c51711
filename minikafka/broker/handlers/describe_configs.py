"""DescribeConfigs (key 32): the topic, broker and group settings minikafka honours.

A topic is described from the cluster's metadata (the controller's record of its overrides in a
cluster, so any broker answers for any topic, replica or not, as Kafka's brokers answer from their
metadata image); a broker resource only by the broker it names, as in Kafka; a group (4.0 on) by
any broker, whether the group exists or not (:mod:`minikafka.broker.group_configs`). A resource
type the release answered does not know fails the whole request with INVALID_REQUEST, as Kafka's
``ConfigHelper.handleDescribeConfigsRequest`` does (3.9 knows no GROUP type)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from minikafka.broker.config_changes import check_broker_name
from minikafka.broker.context import RequestContext
from minikafka.broker.group_configs import GROUP, GROUP_CONFIG, GROUP_CONFIGS
from minikafka.broker.partition_answers import cluster_topics
from minikafka.config import BROKER_DEFAULTS, TOPIC_CONFIG_SOURCES, parse_topic_configs
from minikafka.errors import ErrorCode, KafkaError

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 8, 16
# Kafka's ConfigSource values.
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# Kafka's ConfigType values.
_TYPES = {bool: 1, str: 2, int: 5, float: 6}
#: Kafka's message for INVALID_REQUEST when the request as a whole fails.
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")


@dataclass
class _Config:
    """One described setting; ``synonyms`` as (name, value, source), listed when the request asks."""

    name: str
    value: str
    source: int
    type_id: int
    synonyms: list[tuple[str, str, int]] = field(default_factory=list)
    doc: str | None = None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _group_configs(ctx: RequestContext, group_id: str) -> list[_Config]:
    """Every group config of ``group_id`` with its value and source; its synonym is itself, as
    Kafka lists it (``ConfigHelper.createGroupConfigEntry``)."""
    if not group_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
    out = []
    for name, (value, overridden) in sorted(ctx.services.group_configs.effective(group_id).items()):
        source = GROUP_CONFIG if overridden else DEFAULT_CONFIG
        spec = GROUP_CONFIGS[name]
        out.append(_Config(name, _text(value), source, spec.kind, [(name, _text(value), source)], spec.doc))
    return out


def _configs(ctx: RequestContext, resource: Any) -> list[_Config]:
    """The settings of one resource; a KafkaError is that resource's error."""
    services = ctx.services
    if resource.resource_type == TOPIC:
        info = cluster_topics(services).get(resource.resource_name)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        overrides = parse_topic_configs(info.configs)
        entries = []
        for name, (source, kind) in sorted(TOPIC_CONFIG_SOURCES.items()):
            if name in overrides:
                entries.append(_Config(name, _text(overrides[name]), DYNAMIC_TOPIC_CONFIG, _TYPES.get(kind, 0)))
            else:
                origin = STATIC_BROKER_CONFIG if source in services.config.settings else DEFAULT_CONFIG
                entries.append(_Config(name, _text(services.config.topic_default(name)), origin, _TYPES.get(kind, 0)))
        return entries
    if resource.resource_type == BROKER:
        check_broker_name(ctx, resource.resource_name)
        return [_Config(name, _text(services.config.get(name)),
                        STATIC_BROKER_CONFIG if name in services.config.settings else DEFAULT_CONFIG,
                        _TYPES.get(kind, 0)) for name, (kind, _default) in sorted(BROKER_DEFAULTS.items())]
    if resource.resource_type == GROUP:
        return _group_configs(ctx, resource.resource_name)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {resource.resource_type}")


async def handle(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    version = ctx.api_version
    Response = DescribeConfigsResponse[version]
    Result = Response.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    known = {TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS} | ({GROUP} if ctx.services.group_configs.offered else set())
    if any(r.resource_type not in known for r in request.resources):
        return Response(throttle_time_ms=0, results=[Result(
            error_code=ErrorCode.INVALID_REQUEST, error_message=INVALID_REQUEST_MESSAGE, resource_type=r.resource_type,
            resource_name=r.resource_name, configs=[]) for r in request.resources])
    synonyms_asked = bool(getattr(request, "include_synonyms", False))
    documentation_asked = bool(getattr(request, "include_documentation", False))
    results = []
    for resource in request.resources:
        keys = set(resource.configuration_keys) if resource.configuration_keys else None
        try:
            found, error, message = _configs(ctx, resource), ErrorCode.NONE, None
        except KafkaError as exc:
            found, error, message = [], exc.code, exc.message
        configs = []
        for config in found:
            if keys is not None and config.name not in keys:
                continue
            fields: dict[str, Any] = {"name": config.name, "value": config.value, "read_only": False,
                                      "is_sensitive": False}
            if version == 0:
                fields["is_default"] = config.source == DEFAULT_CONFIG
            else:
                fields["config_source"] = config.source
                fields["synonyms"] = [Entry.DescribeConfigsSynonym(name=n, value=v, source=src)
                                      for n, v, src in config.synonyms] if synonyms_asked else []
            if version >= 3:
                fields["config_type"] = config.type_id
                fields["documentation"] = config.doc if documentation_asked else None
            configs.append(Entry(**fields))
        results.append(Result(error_code=error, error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name, configs=configs))
    return Response(throttle_time_ms=0, results=results)
