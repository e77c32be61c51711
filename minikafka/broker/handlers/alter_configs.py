"""AlterConfigs (key 33): replace the whole set of a resource's dynamic settings, as Kafka does.

A topic's or a group's overrides become exactly the ones in the request (any override not named
is removed); broker and logger resources: see :mod:`minikafka.broker.config_changes`."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from minikafka.broker import config_changes as changes
from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode, KafkaError


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    kind, name = resource.resource_type, resource.resource_name
    changes.check_values(resource, incremental=False)
    configs = {c.name: c.value for c in resource.configs}
    if kind == changes.GROUP:
        changes.group_overrides(ctx, name)
        ctx.services.group_configs.alter(name, configs, validate_only)
    elif kind == changes.TOPIC:
        changes.topic_overrides(ctx, name)
        changes.set_topic_overrides(ctx, name, configs, list(configs), validate_only)
    elif kind == changes.BROKER:
        changes.check_broker_change(ctx, name, list(configs))
    elif kind == changes.BROKER_LOGGER:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "AlterConfigs does not support the resource type BROKER_LOGGER")
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}")


async def handle(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    return changes.respond(ctx, request, AlterConfigsResponse[ctx.api_version], _alter)
