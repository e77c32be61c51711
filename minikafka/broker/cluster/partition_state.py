"""What the controller records of each broker and partition, and Kafka's rules for changing it.

A partition's record holds its replicas (in assignment order; the first is the preferred leader),
its in-sync replicas, its leader (-1 for none), the leader epoch and the partition epoch. Every
change raises the partition epoch by one; the leader epoch rises if and only if the change sets
the leader, even to the same broker or to none. A new leader is the first replica in assignment
order that is in sync and on an active broker; with none, an unclean election (where the topic
allows it) takes the first active replica in assignment order and makes it the only in-sync one,
else the partition is left without a leader and keeps its last in-sync replica (an ISR is never
empty).

Kafka: ``PartitionRegistration`` and ``PartitionChangeBuilder``,
https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/metadata/PartitionRegistration.java,
https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/PartitionChangeBuilder.java.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

NO_LEADER = -1


class BrokerState(enum.Enum):
    """A broker's standing at the controller (Kafka: ``BrokerHeartbeatManager``)."""

    ACTIVE = "active"  # registered and unfenced: may lead and be in sync
    CONTROLLED_SHUTDOWN = "controlled-shutdown"  # still listed in metadata, but leads nothing new
    FENCED = "fenced"  # crashed, stopped or isolated: not listed, not in sync

    @property
    def listed(self) -> bool:
        """Whether Metadata and DescribeCluster list the broker."""
        return self is not BrokerState.FENCED


@dataclass(frozen=True)
class BrokerRegistration:
    node_id: int
    rack: str | None
    state: BrokerState


@dataclass(frozen=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    def offline_replicas(self, active_or_listed: Collection[int]) -> list[int]:
        """Replicas whose broker is not listed (fenced), for Metadata's ``offline_replicas``."""
        return [r for r in self.replicas if r not in active_or_listed]

    def changed(self, *, isr: Sequence[int] | None = None, leader: int | None = None) -> PartitionRegistration:
        """This record after a change: the partition epoch always rises, the leader epoch when
        ``leader`` is given."""
        new_isr = tuple(isr) if isr is not None else self.isr
        if leader is None:
            return replace(self, isr=new_isr, partition_epoch=self.partition_epoch + 1)
        return replace(self, isr=new_isr, leader=leader, leader_epoch=self.leader_epoch + 1,
                       partition_epoch=self.partition_epoch + 1)


def clean_leader(replicas: Sequence[int], isr: Sequence[int], active: Collection[int]) -> int:
    """The first replica in assignment order that is in ``isr`` and active, or -1."""
    return next((r for r in replicas if r in isr and r in active), NO_LEADER)


def elect(part: PartitionRegistration, isr: Sequence[int], active: Collection[int],
          unclean_allowed: bool) -> tuple[int, tuple[int, ...]]:
    """Leader and ISR for a partition whose ISR becomes ``isr``: the current leader stays while it is
    in sync and active; else a clean choice; else, if allowed, the first active replica with an ISR
    of just itself; else no leader and the old ISR kept where ``isr`` would be empty."""
    if part.leader in isr and part.leader in active:
        return part.leader, tuple(isr)
    leader = clean_leader(part.replicas, isr, active)
    if leader != NO_LEADER:
        return leader, tuple(isr)
    if unclean_allowed:
        unclean = next((r for r in part.replicas if r in active), NO_LEADER)
        if unclean != NO_LEADER:
            return unclean, (unclean,)
    return NO_LEADER, tuple(isr) if isr else part.isr


def apply_election(part: PartitionRegistration, isr: Sequence[int], active: Collection[int],
                   unclean_allowed: bool) -> PartitionRegistration | None:
    """``part`` with its ISR set to ``isr`` and its leader re-elected if need be; None if nothing changes."""
    leader, new_isr = elect(part, isr, active, unclean_allowed)
    if leader == part.leader and new_isr == part.isr:
        return None
    return part.changed(isr=new_isr, leader=leader if leader != part.leader else None)
