"""What AlterConfigs (key 33) and IncrementalAlterConfigs (key 44) share: checking and applying a
change to one resource, the way Kafka's controller does it.

Topic changes go through the same validation as CreateTopics (:func:`minikafka.config.parse_topic_configs`).
A single broker applies them with :meth:`LogManager.alter_topic_configs`, which rewrites the topic
catalogue (so the change survives a restart) and updates the live partition logs. In a cluster the
topic's overrides belong to the controller, as Kafka keeps them in its metadata log: the broker that
took the request validates the change against the controller's record of the topic (so any broker
takes it, replica or not) and hands it to the controller, which saves it and has every broker apply
it (:meth:`minikafka.broker.cluster.cluster.Cluster.alter_topic_configs`). A group's configs
(4.0 on) are validated and kept by :class:`minikafka.broker.group_configs.GroupConfigs`. Broker
changes: see docs/semantics.md (AlterConfigs and IncrementalAlterConfigs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from minikafka.broker.context import RequestContext
from minikafka.broker.partition_answers import cluster_topics
from minikafka.config import BROKER_DEFAULTS, TOPIC_CONFIG_SOURCES, parse_topic_configs
from minikafka.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kafka.protocol.admin import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )

log = logging.getLogger(__name__)
#: the response of the API asked: AlterConfigs or IncrementalAlterConfigs
R = TypeVar("R", "AlterConfigsResponse", "IncrementalAlterConfigsResponse")

# Kafka's ConfigResource.Type values.
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32

#: Kafka's per-broker dynamic settings for features minikafka does not have (Kerberos, SSL keystore
#: reloading, SASL login tuning): Kafka accepts them at run time, and so does minikafka; they change
#: nothing here. See ``core/src/main/scala/kafka/server/DynamicBrokerConfig.scala``.
INERT_DYNAMIC_BROKER_CONFIGS = frozenset({
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
    "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.protocol", "ssl.client.auth", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
})


def check_broker_name(ctx: RequestContext, name: str) -> None:
    """The cluster default ("") or this broker's id, as Kafka's DescribeConfigs checks a broker
    resource name: a broker describes only itself, and in a cluster a client asks each broker for
    its own settings (``ConfigHelper.describeConfigs``)."""
    if name not in ("", str(ctx.services.node_id)):
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {ctx.services.node_id} or empty string, but received {name}")


def check_broker_to_alter(ctx: RequestContext, name: str) -> None:
    """The cluster default ("") or this broker's id, as Kafka's broker checks the name of a broker
    resource to change before it forwards the change to the controller
    (``ConfigAdminManager.validateResourceNameIsCurrentNodeId``): another node's id is refused."""
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node != ctx.services.node_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {ctx.services.node_id}, but received {name}")


def check_broker_change(ctx: RequestContext, name: str, keys: list[str]) -> None:
    """Accept only the dynamic settings that have no effect on minikafka; every setting minikafka
    honours is read at start-up, so a run-time change of it is refused as Kafka refuses a static one."""
    check_broker_to_alter(ctx, name)
    static = sorted(k for k in keys if k not in INERT_DYNAMIC_BROKER_CONFIGS)
    if static:
        why = " (minikafka reads it at start-up)" if any(k in BROKER_DEFAULTS for k in static) else ""
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: {static}{why}")
    log.info("broker %s: accepted dynamic settings %s (no effect on minikafka)", name or "default", keys)


def topic_overrides(ctx: RequestContext, topic: str) -> dict[str, str]:
    """The current overrides of ``topic`` (in a cluster the controller's, wherever its replicas
    are); UNKNOWN_TOPIC_OR_PARTITION if it does not exist."""
    info = cluster_topics(ctx.services).get(topic)
    if info is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         f"The topic '{topic}' does not exist.")
    return {k: str(v) for k, v in info.configs.items()}


def set_topic_overrides(ctx: RequestContext, topic: str, overrides: Mapping[str, str], touched: list[str],
                        validate_only: bool) -> None:
    """Validate the topic's new full set of overrides (``touched``: every name the request named,
    deleted ones too) and, unless ``validate_only``, store and apply it."""
    unknown = sorted(k for k in touched if k not in TOPIC_CONFIG_SOURCES)
    if unknown:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
    try:
        parse_topic_configs(overrides)
    except ValueError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value for topic {topic}: {exc}") from None
    if validate_only:
        return
    if ctx.services.cluster is not None:
        ctx.services.cluster.alter_topic_configs(topic, dict(overrides))
    else:
        ctx.services.storage.alter_topic_configs(topic, dict(overrides))


def group_overrides(ctx: RequestContext, group_id: str) -> dict[str, str]:
    """The current overrides of a group; INVALID_REQUEST where the release answered has no
    GROUP configs (3.9's broker: "Unknown resource type 32")."""
    if not ctx.services.group_configs.offered:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {GROUP}")
    return ctx.services.group_configs.overrides(group_id)


def check_values(resource: Any, incremental: bool) -> None:
    """What Kafka's broker refuses before forwarding a change (``ConfigAdminManager.preprocess``): a
    config named twice, and a null value (allowed only for an incremental DELETE)."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c.name for c in resource.configs if c.value is None and not (incremental and c.config_operation == 1)]
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")


def respond(ctx: RequestContext, request: AlterConfigsRequest | IncrementalAlterConfigsRequest,
            Response: type[R], alter: Callable[[RequestContext, Any, bool], None]) -> R:
    """One result per resource: ``alter`` checks (and unless validate_only applies) it, a KafkaError
    becoming that resource's error; a resource named twice is refused as Kafka refuses it."""
    Result = Response.AlterConfigsResourceResponse
    keys = [(r.resource_type, r.resource_name) for r in request.resources]
    results = []
    for resource in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if keys.count((resource.resource_type, resource.resource_name)) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate resource {resource.resource_name!r}")
            alter(ctx, resource, bool(request.validate_only))
        except KafkaError as exc:
            code, message = exc.code, exc.message
        results.append(Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                              resource_name=resource.resource_name))
    return Response(throttle_time_ms=0, responses=results)


def text(value: Any) -> str:
    """A setting's value as Kafka writes it (booleans in lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
