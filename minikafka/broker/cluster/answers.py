"""What a cluster broker tells clients about topics, partitions and brokers, from the controller.

On a single broker the handlers read the topics of the local data dir; in a cluster a broker hosts
only some partitions, so Metadata, CreateTopics and FindCoordinator ask the controller, which knows
every topic, every partition's leader, epoch, replicas and in-sync replicas, and which brokers are
up. Kafka: ``KafkaApis.handleTopicMetadataRequest`` and ``KRaftMetadataCache.getPartitionMetadata``,
https://github.com/apache/kafka/blob/trunk/core/src/main/scala/kafka/server/metadata/KRaftMetadataCache.scala.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.broker.cluster.cluster import ClusterLink
from minikafka.broker.cluster.partition_state import NO_LEADER
from minikafka.broker.cluster.placement import PlacementError, check_replication_factor
from minikafka.errors import ErrorCode, KafkaError


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


def partitions(link: ClusterLink, topic: str) -> list[PartitionAnswer]:
    """Each partition of ``topic``; one whose leader is not among the brokers answered (none, or a
    broker going down that the controller has not fenced yet) has leader -1 and LEADER_NOT_AVAILABLE,
    as Kafka answers a leader without a live endpoint: a client is never sent to a broker the same
    answer does not list."""
    controller = link.controller
    record = controller.topics[topic]
    listed = {b.node_id for b in controller.listed()}
    live = {b.node_id for b in brokers(link)}
    out = []
    for p in range(record.partitions):
        part = controller.partitions[(topic, p)]
        leader = part.leader if part.leader in live else NO_LEADER
        error = ErrorCode.LEADER_NOT_AVAILABLE if leader == NO_LEADER else ErrorCode.NONE
        out.append(PartitionAnswer(p, error, leader, part.leader_epoch, list(part.replicas), list(part.isr),
                                   part.offline_replicas(listed)))
    return out


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


def coordinator(link: ClusterLink) -> tuple[int, str, int] | None:
    """Node, host and port of the broker that coordinates groups and transactions, if it is up."""
    node = link.coordinator_node()
    address = link.address_of(node)
    if address is None or node not in link.controller.active():
        return None
    return node, address[0], address[1]
