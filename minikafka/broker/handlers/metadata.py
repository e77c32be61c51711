"""Metadata (key 3): brokers, cluster id, controller, topics and partitions (docs/semantics.md#metadata).

A single node is every partition's leader, its only replica and the controller. Unknown topics
are auto-created here (never by Produce) when both the broker setting and the request allow it.
"""

from __future__ import annotations

import logging
import uuid

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from minikafka.broker.cluster import answers
from minikafka.broker.cluster.cluster import ClusterLink
from minikafka.broker.context import RequestContext
from minikafka.broker.topics import collides, is_internal, topic_name_error
from minikafka.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)
ZERO_UUID = uuid.UUID(int=0)


def auto_create(ctx: RequestContext, name: str) -> ErrorCode:
    """Create ``name`` with the broker defaults; the error code for a name that cannot be created."""
    services = ctx.services
    if topic_name_error(name) or collides(name, ctx.services.storage.topics()):
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    ctx.services.storage.create_topic(name, services.config.get("num.partitions"), {})
    log.info("auto-created topic %s with %d partition(s)", name, services.config.get("num.partitions"))
    return ErrorCode.NONE


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    if ctx.services.cluster is not None:
        return _cluster_metadata(ctx, request, ctx.services.cluster)
    version = ctx.api_version
    services = ctx.services
    logs = services.storage
    Response = MetadataResponse[version]
    Topic = Response.MetadataResponseTopic
    Partition = Topic.MetadataResponsePartition

    topics = logs.topics()
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if request.topics is None or (version == 0 and not request.topics):
        wanted = [(name, None) for name in sorted(topics)]
    else:
        wanted = []
        for t in request.topics:
            topic_id = getattr(t, "topic_id", None)
            if t.name is None and topic_id is not None and topic_id != ZERO_UUID:
                by_id = next((info.name for info in topics.values() if info.topic_id == topic_id), None)
                wanted.append((by_id, topic_id))
            else:
                wanted.append((t.name, None))
    allow_auto = version < 4 or bool(request.allow_auto_topic_creation)

    out = []
    for name, requested_id in wanted:
        if name is None:
            out.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=requested_id or ZERO_UUID,
                             is_internal=False, partitions=[]))
            continue
        info = topics.get(name)
        if info is None:
            if topic_name_error(name):
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif allow_auto and services.config.get("auto.create.topics.enable") and not is_internal(name):
                error = auto_create(ctx, name)
            else:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            info = logs.topics().get(name) if error == ErrorCode.NONE else None
            if info is None:
                out.append(Topic(error_code=error, name=name, topic_id=ZERO_UUID, is_internal=False,
                                 partitions=[]))
                continue
        node = services.node_id
        partitions = [
            Partition(error_code=0, partition_index=p, leader_id=node, leader_epoch=0, replica_nodes=[node],
                      isr_nodes=[node], offline_replicas=[])
            for p in range(info.partitions)
        ]
        out.append(Topic(error_code=0, name=name, topic_id=info.topic_id, is_internal=is_internal(name),
                         partitions=partitions))

    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,  # v13+ (KIP-1102): Kafka's broker always answers 0 here
        brokers=[Response.MetadataResponseBroker(node_id=services.node_id, host=ctx.advertised_address[0],
                                                 port=ctx.advertised_address[1], rack=None)],
        cluster_id=logs.cluster_id,
        controller_id=services.node_id,
        topics=out,
    )


def _cluster_metadata(ctx: RequestContext, request: MetadataRequest, link: ClusterLink) -> MetadataResponse:
    """A cluster broker's answer, from the controller: every listed broker, a controller chosen
    anew for each answer (KIP-590), and per partition its leader, epoch, replicas, ISR and the
    replicas on brokers that are down."""
    version = ctx.api_version
    services = ctx.services
    Response = MetadataResponse[version]
    Topic = Response.MetadataResponseTopic
    Partition = Topic.MetadataResponsePartition
    controller = link.controller
    if request.topics is None or (version == 0 and not request.topics):
        wanted: list[str | None] = [name for name in sorted(controller.topics)]
    else:
        by_id = {record.topic_id: name for name, record in controller.topics.items()}
        wanted = [t.name if t.name is not None else by_id.get(getattr(t, "topic_id", None) or ZERO_UUID)
                  for t in request.topics]
    allow_auto = version < 4 or bool(request.allow_auto_topic_creation)
    out = []
    for name in wanted:
        if name is None:
            out.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=ZERO_UUID,
                             is_internal=False, partitions=[]))
            continue
        if name not in controller.topics:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if topic_name_error(name):
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif allow_auto and services.config.get("auto.create.topics.enable") and not is_internal(name):
                try:
                    answers.create_topic(link, name, services.config.get("num.partitions"),
                                         services.config.get("default.replication.factor"), None, {}, False)
                    log.info("auto-created topic %s", name)
                    error = ErrorCode.NONE
                except KafkaError as exc:
                    error = exc.code
            if error != ErrorCode.NONE:
                out.append(Topic(error_code=error, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[]))
                continue
        parts = answers.partitions(link, name)
        if version == 0:
            parts = [answers.without_offline_replicas(p) for p in parts]
        partitions = [
            Partition(error_code=p.error, partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                      replica_nodes=p.replicas, isr_nodes=p.isr, offline_replicas=p.offline)
            for p in parts
        ]
        out.append(Topic(error_code=0, name=name, topic_id=controller.topics[name].topic_id,
                         is_internal=is_internal(name), partitions=partitions))
    return Response(
        throttle_time_ms=0,
        brokers=[Response.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in answers.brokers(link)],
        cluster_id=services.storage.cluster_id,
        controller_id=controller.controller_id(),
        topics=out,
    )
