"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND or SUBTRACT single settings, as Kafka does.

APPEND and SUBTRACT work on list settings only (``cleanup.policy`` and the throttled-replica lists),
starting from the topic's current value (its override, else the default it has now); no group
config is a list, so on a group they are refused as Kafka's controller refuses them."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from minikafka.broker import config_changes as changes
from minikafka.broker.context import RequestContext
from minikafka.errors import ErrorCode, KafkaError

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
#: Topic settings of Kafka's LIST type.
LIST_CONFIGS = frozenset({"cleanup.policy", "leader.replication.throttled.replicas",
                          "follower.replication.throttled.replicas"})


def _items(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _apply(ctx: RequestContext, overrides: dict[str, str], config: Any) -> None:
    """One operation on ``overrides`` (in place)."""
    name, op = config.name, config.config_operation
    if op == SET:
        if config.value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for SET of {name}")
        overrides[name] = config.value
    elif op == DELETE:
        overrides.pop(name, None)
    elif op in (APPEND, SUBTRACT):
        if name not in LIST_CONFIGS:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Can't {_OPERATIONS[op]} to key {name} because its type is not LIST.")
        current = overrides.get(name)
        if current is None:
            current = changes.text(ctx.services.config.topic_default(name))
        items = _items(current)
        if op == APPEND:
            items += [v for v in _items(config.value) if v not in items]
        else:
            items = [v for v in items if v not in _items(config.value)]
        overrides[name] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op}")


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> None:
    kind, name = resource.resource_type, resource.resource_name
    names = [c.name for c in resource.configs]
    changes.check_values(resource, incremental=True)
    if kind == changes.GROUP:
        overrides = changes.group_overrides(ctx, name)
        for config in resource.configs:  # no group config is a list
            if config.config_operation in (APPEND, SUBTRACT):
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Can't {_OPERATIONS[config.config_operation]} to key "
                                                           f"{config.name} because its type is not LIST.")
            _apply(ctx, overrides, config)
        ctx.services.group_configs.alter(name, overrides, validate_only)
    elif kind == changes.TOPIC:
        overrides = changes.topic_overrides(ctx, name)
        for config in resource.configs:
            _apply(ctx, overrides, config)
        changes.set_topic_overrides(ctx, name, overrides, names, validate_only)
    elif kind == changes.BROKER:
        changes.check_broker_change(ctx, name, names)
    elif kind == changes.BROKER_LOGGER:
        changes.check_broker_name(ctx, name)
        raise KafkaError(ErrorCode.INVALID_REQUEST, "minikafka has no dynamically adjustable loggers")
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {kind}")


async def handle(ctx: RequestContext, request: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    return changes.respond(ctx, request, IncrementalAlterConfigsResponse[ctx.api_version], _alter)
