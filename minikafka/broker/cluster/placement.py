"""Where a new partition's replicas go, and the checks on a replication factor or a given assignment.

Placement stripes over racks, then over the brokers of each rack, from a random start, active
brokers first, so that a partition with a replication factor up to the number of racks has each
replica in another rack; each partition shifts the start by one, which spreads leaders. As in
Kafka the layout is random (the controller's seeded random source), so tests must not depend on
it. Kafka: ``StripedReplicaPlacer`` and ``ReplicationControlManager.createTopic``,
https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/metadata/placement/StripedReplicaPlacer.java.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import zip_longest

from minikafka.broker.cluster.partition_state import BrokerRegistration, BrokerState
from minikafka.errors import ErrorCode


class PlacementError(Exception):
    """A replication factor or assignment the cluster cannot place: the Kafka error and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_replication_factor(rf: int, brokers: Sequence[BrokerRegistration]) -> None:
    """Kafka's refusals: fewer registered brokers than ``rf`` (fenced ones count, brokers in a
    controlled shutdown do not), or no active broker at all."""
    registered = [b for b in brokers if b.state is not BrokerState.CONTROLLED_SHUTDOWN]
    prefix = f"Unable to replicate the partition {rf} time(s): "
    if rf <= 0:
        raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if rf > len(registered):
        raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"{prefix}The target replication factor of {rf} cannot be reached because only "
                             f"{len(registered)} broker(s) are registered.")
    if not any(b.state is BrokerState.ACTIVE for b in brokers):
        raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"{prefix}All brokers are currently fenced.")


def place(first_partition: int, count: int, rf: int, brokers: Sequence[BrokerRegistration],
          rng: random.Random) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``first_partition .. first_partition + count - 1``."""
    check_replication_factor(rf, brokers)
    candidates = [b for b in brokers if b.state is not BrokerState.CONTROLLED_SHUTDOWN]
    order = _striped(candidates, rng)
    start = rng.randrange(len(order))
    active = {b.node_id for b in candidates if b.state is BrokerState.ACTIVE}
    placed = []
    for p in range(first_partition, first_partition + count):
        replicas = _leader_first(tuple(order[(start + p + i) % len(order)] for i in range(rf)), active)
        if replicas[0] not in active:
            raise PlacementError(ErrorCode.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} "
                                 "time(s): All brokers chosen are fenced or in controlled shutdown.")
        placed.append(replicas)
    return placed


def _striped(brokers: Sequence[BrokerRegistration], rng: random.Random) -> list[int]:
    """Broker ids taking turns over racks (shuffled), active brokers before fenced ones in each rack."""
    racks: dict[str | None, list[BrokerRegistration]] = {}
    for b in sorted(brokers, key=lambda b: b.node_id):
        racks.setdefault(b.rack, []).append(b)
    columns = []
    for rack in sorted(racks, key=lambda r: (r is None, r or "")):
        members = racks[rack]
        rng.shuffle(members)
        members.sort(key=lambda b: b.state is BrokerState.FENCED)
        columns.append([b.node_id for b in members])
    rng.shuffle(columns)
    return [node for row in zip_longest(*columns) for node in row if node is not None]


def _leader_first(replicas: tuple[int, ...], active: set[int]) -> tuple[int, ...]:
    """Move the first active replica to the front: the leader is never a fenced broker."""
    first = next((r for r in replicas if r in active), None)
    if first is None or first == replicas[0]:
        return replicas
    return (first, *(r for r in replicas if r != first))


def check_assignment(assignments: Sequence[Sequence[int]], brokers: Sequence[BrokerRegistration],
                     first_partition: int = 0) -> list[tuple[int, ...]]:
    """A manual assignment, refused with INVALID_REPLICA_ASSIGNMENT as Kafka refuses it: no
    replicas, a repeated or unknown broker, lists of different sizes, or only inactive brokers."""
    known = {b.node_id: b for b in brokers}
    sizes = {len(a) for a in assignments}
    for i, replicas in enumerate(assignments):
        p = first_partition + i
        if not replicas:
            raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment for "
                                 f"partition {p} includes an empty replica list.")
        if len(set(replicas)) != len(replicas):
            raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment for "
                                 f"partition {p} includes a duplicate replica.")
        unknown = [r for r in replicas if r not in known]
        if unknown:
            raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment for "
                                 f"partition {p} includes broker {unknown[0]}, but no such broker is registered.")
        if all(known[r].state is not BrokerState.ACTIVE for r in replicas):
            raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"All brokers specified in the manual "
                                 f"partition assignment for partition {p} are fenced or in controlled shutdown.")
    if len(sizes) > 1:
        raise PlacementError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All manual partition assignments must "
                             "have the same replication factor.")
    return [tuple(a) for a in assignments]
