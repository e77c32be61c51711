"""What a cluster broker tells clients about topics, partitions and brokers, from the controller.

On a single broker the handlers read the topics of the local data dir; in a cluster a broker hosts
only some partitions, so Metadata, CreateTopics and FindCoordinator ask the controller, which knows
every topic, every partition's leader, epoch, replicas and in-sync replicas, and which brokers are
up. Kafka: ``KafkaApis.handleTopicMetadataRequest`` and ``KRaftMetadataCache.getPartitionMetadata``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/metadata/KRaftMetadataCache.scala.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from minikafka.broker.cluster.cluster import ClusterLink
from minikafka.broker.cluster.partition_state import NO_LEADER
from minikafka.broker.cluster.placement import PlacementError, check_replication_factor
from minikafka.errors import ErrorCode, KafkaError
from minikafka.protocol.fast import make


@dataclass(frozen=True)
class PartitionAnswer:
    partition: int
    error: ErrorCode  # LEADER_NOT_AVAILABLE without a leader
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


@dataclass(frozen=True)
class BrokerAnswer:
    node_id: int
    host: str
    port: int
    rack: str | None


def brokers(link: ClusterLink) -> list[BrokerAnswer]:
    """The brokers Metadata and DescribeCluster list: registered, not fenced, reachable."""
    out = []
    for b in link.controller.listed():
        address = link.address_of(b.node_id)
        if address is not None:
            out.append(BrokerAnswer(b.node_id, address[0], address[1], b.rack))
    return out


@dataclass(frozen=True)
class LeaderHint:
    """Where a client should send what it sent to a broker that does not lead the partition
    (KIP-951): the leader as this broker knows it (-1 without one), its epoch, and its endpoint
    while it is up (None otherwise)."""

    leader: int
    leader_epoch: int
    endpoint: BrokerAnswer | None


def leader_hint(link: ClusterLink, topic: str, partition: int) -> LeaderHint | None:
    """The KIP-951 hint for a NOT_LEADER_OR_FOLLOWER answer about ``topic``-``partition``; None
    when the partition is unknown (Kafka then leaves ``current_leader`` at its default, -1/-1,
    which is not written). The controller's record is what both Kafka's sources (the broker's own
    replica, else its metadata cache) say here, since every broker sees each change at once; the
    endpoint is that of a listed broker, as Kafka's ``getAliveBrokerNode``
    (``KafkaApis.getCurrentLeader``,
    https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala)."""
    part = link.controller.partition(topic, partition)
    if part is None:
        return None
    endpoint = None
    if part.leader != NO_LEADER:
        endpoint = next((b for b in brokers(link) if b.node_id == part.leader), None)
    return LeaderHint(part.leader, part.leader_epoch, endpoint)


def add_leader_hints(link: ClusterLink, response: Any, answered: Iterable[tuple[str, int, Any]],
                     errors: frozenset[int], leader_class: Any, endpoint_class: Any) -> None:
    """KIP-951 in a Produce (v10+) or Fetch (v16+) answer: each partition answer of ``answered``
    (topic name, partition, answer object) whose error is one of ``errors`` names the partition's
    current leader and epoch (tagged ``current_leader``, left out when both are -1, Kafka's
    default), and ``response`` lists the endpoints of the leaders named that are up (tagged
    ``node_endpoints``, left out when empty), so that a client sends its retry there without
    asking for Metadata first. Kafka: ``KafkaApis.handleProduceRequest`` and
    ``handleFetchRequest`` with ``getCurrentLeader``,
    https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/KafkaApis.scala."""
    endpoints: dict[int, BrokerAnswer] = {}
    for topic, partition, answer in answered:
        if answer.error_code not in errors:
            continue
        hint = leader_hint(link, topic, partition)
        if hint is None or (hint.leader, hint.leader_epoch) == (-1, -1):
            continue
        answer.current_leader = make(leader_class, leader_id=hint.leader, leader_epoch=hint.leader_epoch)
        answer.tags = {*(answer.tags or ()), "current_leader"}
        if hint.endpoint is not None:
            endpoints[hint.endpoint.node_id] = hint.endpoint
    if endpoints:
        response.node_endpoints = [make(endpoint_class, node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                                   for _, b in sorted(endpoints.items())]
        response.tags = {*(response.tags or ()), "node_endpoints"}


def partitions(link: ClusterLink, topic: str) -> list[PartitionAnswer]:
    """Each partition as Metadata shows it. A leader that is not among the brokers listed (it went
    down and the controller has not fenced it yet) is shown as none, with LEADER_NOT_AVAILABLE, as
    Kafka shows a leader without a live endpoint: a client never gets a leader it has no address
    for (Kafka: ``KRaftMetadataCache.getPartitionMetadata``)."""
    controller = link.controller
    record = controller.topics[topic]
    listed = {b.node_id for b in controller.listed()}
    reachable = {b.node_id for b in brokers(link)}
    out = []
    for p in range(record.partitions):
        part = controller.partitions[(topic, p)]
        leader = part.leader if part.leader in reachable else NO_LEADER
        error = ErrorCode.LEADER_NOT_AVAILABLE if leader == NO_LEADER else ErrorCode.NONE
        out.append(PartitionAnswer(p, error, leader, part.leader_epoch, list(part.replicas), list(part.isr),
                                   part.offline_replicas(listed)))
    return out


def without_offline_replicas(answer: PartitionAnswer) -> PartitionAnswer:
    """A partition as Metadata v0 answers it: the replica and ISR lists keep only brokers that are
    up, and a partition with a leader that lost any of them says REPLICA_NOT_AVAILABLE (Kafka's
    ``KRaftMetadataCache.getPartitionMetadata`` with ``errorUnavailableEndpoints``)."""
    replicas = [r for r in answer.replicas if r not in answer.offline]
    isr = [r for r in answer.isr if r not in answer.offline]
    error = answer.error
    if error == ErrorCode.NONE and (len(replicas) < len(answer.replicas) or len(isr) < len(answer.isr)):
        error = ErrorCode.REPLICA_NOT_AVAILABLE
    return replace(answer, error=error, replicas=replicas, isr=isr)


def create_topic(link: ClusterLink, name: str, partitions: int, replication_factor: int,
                 assignments: list[list[int]] | None, configs: dict[str, str], validate_only: bool) -> None:
    """Create (or with ``validate_only`` only check) a topic through the controller; its refusals
    as KafkaError with Kafka's codes."""
    controller = link.controller
    try:
        if validate_only:
            check_replication_factor(replication_factor, list(controller.brokers.values()))
            return
        controller.create_topic(name, partitions, replication_factor, assignments, configs)
    except PlacementError as exc:
        raise KafkaError(exc.code, str(exc)) from None


def endpoint(link: ClusterLink, node: int) -> tuple[str, int] | None:
    """Host and port of broker ``node`` while it is up and active, else None."""
    address = link.address_of(node)
    if address is None or node not in link.controller.active():
        return None
    return address
