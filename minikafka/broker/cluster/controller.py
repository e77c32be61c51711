"""The cluster's controller: the one owner of which broker leads and which replicas are in sync.

minikafka runs its brokers in one process, so the controller is an object the brokers call rather
than a KRaft quorum they talk to (a documented simplification: clients never speak to the quorum).
It keeps Kafka's decisions: brokers are active, in a controlled shutdown, or fenced (crashed,
stopped or cut off); partitions change by Kafka's rules (:mod:`.partition_state`); the changes of
one decision are handed to ``on_change`` at once, together (the records of one controller write),
which is how the brokers learn that they lead or follow (Kafka's metadata propagation, made
instant). Leaders ask for ISR changes with :meth:`alter_partition`,
checked as Kafka's controller checks AlterPartition.

Kafka: ``ReplicationControlManager`` (broker fencing, unfencing, controlled shutdown, ISR changes,
elections), https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java.
"""

from __future__ import annotations

import dataclasses
import enum
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from minikafka.broker.cluster.partition_state import (
    NO_LEADER,
    BrokerRegistration,
    BrokerState,
    PartitionRegistration,
    apply_election,
    clean_leader,
)
from minikafka.broker.cluster.placement import PlacementError, check_assignment, place
from minikafka.errors import ErrorCode
from minikafka.storage.checkpoints import random_kafka_uuid, uuid_to_base64
from minikafka.storage.disk_format import TopicPartition


class ElectionType(enum.IntEnum):
    """ElectLeaders' ``election_type``."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class PartitionChange:
    """One partition's record before (None for a new partition) and after a change."""

    topic: str
    partition: int
    before: PartitionRegistration | None
    after: PartitionRegistration


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: int
    #: its dynamic overrides (Kafka's ConfigRecords of the topic): set at creation, changed by
    #: AlterConfigs and IncrementalAlterConfigs through :meth:`Controller.set_topic_configs`
    configs: dict[str, str] = field(default_factory=dict)


class Controller:
    """Brokers, topics and partition records of one cluster (see the module docstring)."""

    def __init__(self, brokers: Iterable[tuple[int, str | None]], *,
                 unclean_allowed: Callable[[str], bool] = lambda topic: False,
                 on_change: Callable[[list[PartitionChange]], None] | None = None,
                 seed: int | None = None, cluster_id: str | None = None) -> None:
        """``brokers``: (node id, rack) of every broker, all fenced until they register
        (:meth:`unfence`); ``unclean_allowed(topic)``: the topic's ``unclean.leader.election.enable``."""
        #: every broker's meta.properties carries it; Metadata and DescribeCluster answer it
        self.cluster_id = cluster_id or uuid_to_base64(random_kafka_uuid())
        self.brokers: dict[int, BrokerRegistration] = {
            node: BrokerRegistration(node, rack, BrokerState.FENCED) for node, rack in brokers}
        self.topics: dict[str, TopicRecord] = {}
        #: each group's dynamic configs (Kafka's ConfigRecords of GROUP resources), set by
        #: AlterConfigs and IncrementalAlterConfigs through :meth:`set_group_configs`
        self.group_configs: dict[str, dict[str, str]] = {}
        self.partitions: dict[TopicPartition, PartitionRegistration] = {}
        self.unclean_allowed = unclean_allowed
        self.on_change = on_change
        self.rng = random.Random(seed)

    # ----------------------------------------------------------------- reading
    def active(self) -> set[int]:
        return {n for n, b in self.brokers.items() if b.state is BrokerState.ACTIVE}

    def listed(self) -> list[BrokerRegistration]:
        """The brokers Metadata lists: active ones and those in a controlled shutdown."""
        return [b for b in self.brokers.values() if b.state.listed]

    def controller_id(self) -> int:
        """A listed broker chosen anew for each answer, as Kafka names a random one (KIP-590); -1 if none."""
        listed = self.listed()
        return self.rng.choice(listed).node_id if listed else -1

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        return self.partitions.get((topic, partition))

    def led_by(self, node_id: int) -> list[TopicPartition]:
        return [tp for tp, p in self.partitions.items() if p.leader == node_id]

    # ----------------------------------------------------------------- brokers
    def unfence(self, node_id: int) -> list[PartitionChange]:
        """A broker registered (started and recovered its logs): it is active again, and partitions
        without a leader that it can lead get one."""
        self._set_state(node_id, BrokerState.ACTIVE)
        changes = []
        for tp, part in self.partitions.items():
            if part.leader == NO_LEADER and node_id in part.replicas:
                changes += self._change(tp, apply_election(part, part.isr, self.active(), self._unclean(tp)))
        return self._publish(changes)

    def fence(self, node_id: int) -> list[PartitionChange]:
        """A broker crashed, stopped or lost its session: it leaves every ISR (except as a last
        member) and leadership moves off it."""
        self._set_state(node_id, BrokerState.FENCED)
        return self._publish(self._remove_from_isrs(node_id))

    def begin_controlled_shutdown(self, node_id: int) -> list[PartitionChange]:
        """A broker asked to shut down: it stays listed while its leadership moves away and it
        leaves the ISRs. Done when :meth:`led_by` is empty; then :meth:`fence` it."""
        self._set_state(node_id, BrokerState.CONTROLLED_SHUTDOWN)
        return self._publish(self._remove_from_isrs(node_id))

    def _set_state(self, node_id: int, state: BrokerState) -> None:
        old = self.brokers[node_id]
        self.brokers[node_id] = BrokerRegistration(node_id, old.rack, state)

    def _remove_from_isrs(self, node_id: int) -> list[PartitionChange]:
        active = self.active()
        changes = []
        for tp, part in self.partitions.items():
            if node_id in part.isr:
                isr = [r for r in part.isr if r != node_id]
                changes += self._change(tp, apply_election(part, isr, active, self._unclean(tp)))
        return changes

    # ----------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     assignments: Sequence[Sequence[int]] | None = None,
                     configs: dict[str, str] | None = None) -> list[PartitionChange]:
        """Place and register a new topic; raises :class:`PlacementError` with Kafka's code."""
        if name in self.topics:
            raise PlacementError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        placed = self._placement(0, partitions, replication_factor, assignments)
        self.topics[name] = TopicRecord(name, random_kafka_uuid(), len(placed), dict(configs or {}))
        return self._publish(self._register(name, 0, placed))

    def create_partitions(self, name: str, total: int, assignments: Sequence[Sequence[int]] | None = None,
                          validate_only: bool = False) -> list[PartitionChange]:
        """Grow a topic to ``total`` partitions, placed like the first (replication factor of partition
        0); raises :class:`PlacementError` with Kafka's code. ``validate_only`` checks and places
        without registering anything."""
        topic = self.topics.get(name)
        if topic is None:
            raise PlacementError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"The topic {name!r} does not exist.")
        if total == topic.partitions:
            raise PlacementError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {total} partition(s).")
        if total < topic.partitions:
            raise PlacementError(ErrorCode.INVALID_PARTITIONS, f"Topic currently has {topic.partitions} "
                                 f"partitions, which is higher than the requested {total}.")
        rf = len(self.partitions[(name, 0)].replicas)
        added = total - topic.partitions
        if assignments is not None and len(assignments) != added:
            raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {added} additional partition(s), but only "
                                 f"{len(assignments)} assignment(s) were specified.")
        placed = self._placement(topic.partitions, added, rf, assignments)
        if validate_only:
            return []
        self.topics[name] = TopicRecord(name, topic.topic_id, total, topic.configs)
        return self._publish(self._register(name, topic.partitions, placed))

    def delete_topic(self, name: str) -> None:
        """Forget a topic and its partitions (KeyError if unknown); the brokers drop their replicas
        (:meth:`~minikafka.broker.cluster.cluster.Cluster.delete_topic`)."""
        topic = self.topics.pop(name)
        for p in range(topic.partitions):
            self.partitions.pop((name, p), None)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> TopicRecord:
        """Replace a topic's overrides (already validated by the broker that took the request, as
        Kafka's forwarding broker and controller validate them) and return its new record; raises
        :class:`PlacementError` UNKNOWN_TOPIC_OR_PARTITION for a topic the cluster does not have."""
        topic = self.topics.get(name)
        if topic is None:
            raise PlacementError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        record = dataclasses.replace(topic, configs=dict(configs))
        self.topics[name] = record
        return record

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace a group's overrides (validated by the broker that took the request); a group
        left with none is forgotten, as Kafka's controller drops a resource without configs."""
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)

    def elect_leaderless(self, name: str) -> list[PartitionChange]:
        """Elect a leader for each partition of ``name`` that has none, by the topic's rules of now:
        after ``unclean.leader.election.enable`` was switched on, its first active replica leads.
        Kafka's controller does the same for leaderless partitions every
        ``unclean.leader.election.interval.ms``; minikafka does it when the setting changes."""
        active = self.active()
        changes: list[PartitionChange] = []
        record = self.topics.get(name)
        for p in range(record.partitions if record is not None else 0):
            part = self.partitions[(name, p)]
            if part.leader == NO_LEADER:
                changes += self._change((name, p), apply_election(part, part.isr, active, self._unclean((name, p))))
        return self._publish(changes)

    def _placement(self, first: int, count: int, rf: int,
                   assignments: Sequence[Sequence[int]] | None) -> list[tuple[int, ...]]:
        brokers = list(self.brokers.values())
        if assignments is not None:
            return check_assignment(assignments, brokers, first)
        return place(first, count, rf, brokers, self.rng)

    def _register(self, name: str, first: int, placed: list[tuple[int, ...]]) -> list[PartitionChange]:
        active = self.active()
        changes = []
        for i, replicas in enumerate(placed):
            isr = tuple(r for r in replicas if r in active)
            part = PartitionRegistration(replicas=replicas, isr=isr, leader=clean_leader(replicas, isr, active))
            self.partitions[(name, first + i)] = part
            changes.append(PartitionChange(name, first + i, None, part))
        return changes

    # ----------------------------------------------------------------- ISR changes from leaders
    def alter_partition(self, broker_id: int, topic: str, partition: int, leader_epoch: int,
                        partition_epoch: int, new_isr: Sequence[int]) -> tuple[ErrorCode, PartitionRegistration | None]:
        """A leader's ISR change, checked in the order of Kafka's ``validateAlterPartitionData``."""
        part = self.partitions.get((topic, partition))
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if leader_epoch > part.leader_epoch or partition_epoch > part.partition_epoch:
            return ErrorCode.NOT_CONTROLLER, part
        if leader_epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, part
        if broker_id != part.leader:
            return ErrorCode.INVALID_REQUEST, part
        if partition_epoch < part.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION, part
        if (not new_isr or len(set(new_isr)) != len(new_isr) or part.leader not in new_isr
                or any(r not in part.replicas for r in new_isr)):
            return ErrorCode.INVALID_REQUEST, part
        active = self.active()
        if any(r not in active for r in new_isr if r not in part.isr):
            return ErrorCode.INELIGIBLE_REPLICA, part
        if tuple(new_isr) == part.isr:
            return ErrorCode.NONE, part
        after = part.changed(isr=new_isr)
        self._publish(self._change((topic, partition), after))
        return ErrorCode.NONE, after

    # ----------------------------------------------------------------- elections
    def elect_leaders(self, election: ElectionType,
                      partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, tuple[ErrorCode, str]]:
        """ElectLeaders: per partition its error and message. With ``partitions`` None every
        partition is tried and those that needed nothing are left out of the answer."""
        everything = partitions is None
        results: dict[TopicPartition, tuple[ErrorCode, str]] = {}
        changes: list[PartitionChange] = []
        for tp in list(self.partitions) if partitions is None else partitions:
            code, message, change = self._elect_one(tp, election)
            changes += change
            if not (everything and code is ErrorCode.ELECTION_NOT_NEEDED):
                results[tp] = (code, message)
        self._publish(changes)
        return results

    def _elect_one(self, tp: TopicPartition, election: ElectionType) -> tuple[ErrorCode, str, list[PartitionChange]]:
        part = self.partitions.get(tp)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.", []
        active = self.active()
        if election is ElectionType.PREFERRED:
            preferred = part.preferred_leader
            if part.leader == preferred:
                return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", []
            if preferred in part.isr and preferred in active:
                return ErrorCode.NONE, "", self._change(tp, part.changed(leader=preferred))
            if part.leader == NO_LEADER:
                leader = clean_leader(part.replicas, part.isr, active)
                if leader != NO_LEADER:
                    return ErrorCode.NONE, "", self._change(tp, part.changed(leader=leader))
            return (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy PREFERRED", [])
        if part.leader != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.", []
        after = apply_election(part, part.isr, active, unclean_allowed=True)
        if after is None or after.leader == NO_LEADER:
            return (ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy UNCLEAN", [])
        return ErrorCode.NONE, "", self._change(tp, after)

    def imbalanced(self) -> list[TopicPartition]:
        """Partitions led by another broker than their preferred leader (auto.leader.rebalance.enable)."""
        return [tp for tp, p in self.partitions.items() if p.leader != p.preferred_leader]

    def balance_leaders(self) -> list[TopicPartition]:
        """``auto.leader.rebalance.enable``: a preferred election for each partition whose preferred
        leader is an active in-sync replica that does not lead; the partitions whose leader moved.
        Kafka: ``QuorumController.maybeBalancePartitionLeaders``."""
        active = self.active()
        ready = [tp for tp in self.imbalanced()
                 if self.partitions[tp].preferred_leader in active and self.partitions[tp].preferred_leader
                 in self.partitions[tp].isr]
        if not ready:
            return []
        return [tp for tp, (code, _) in self.elect_leaders(ElectionType.PREFERRED, ready).items()
                if code is ErrorCode.NONE]

    def move_leader(self, topic: str, partition: int, node_id: int) -> PartitionRegistration:
        """The test kit's "move this partition's leader there": allowed only to an in-sync replica
        on an active broker, as a clean election would be."""
        part = self.partitions[(topic, partition)]
        if node_id not in part.isr or node_id not in self.active():
            raise PlacementError(ErrorCode.INVALID_REQUEST, f"broker {node_id} is not an active in-sync replica "
                                 f"of {topic}-{partition} (ISR {list(part.isr)})")
        if part.leader == node_id:
            return part
        after = part.changed(leader=node_id)
        self._publish(self._change((topic, partition), after))
        return after

    # ----------------------------------------------------------------- plumbing
    def _unclean(self, tp: TopicPartition) -> bool:
        return self.unclean_allowed(tp[0])

    def _change(self, tp: TopicPartition, after: PartitionRegistration | None) -> list[PartitionChange]:
        if after is None:
            return []
        before = self.partitions[tp]
        self.partitions[tp] = after
        return [PartitionChange(tp[0], tp[1], before, after)]

    def _publish(self, changes: list[PartitionChange]) -> list[PartitionChange]:
        if self.on_change is not None and changes:
            self.on_change(changes)
        return changes

