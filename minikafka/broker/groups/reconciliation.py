"""Moving one member from its current partitions to its target: Kafka's ``CurrentAssignmentBuilder``
(https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/consumer/CurrentAssignmentBuilder.java).

Why it exists: the assignor works on targets, but a partition must never be owned by two members
at once. So a member first gives up what its target no longer holds (state
UNREVOKED_PARTITIONS, epoch unchanged: its commits stay valid) and says so in a heartbeat that no
longer lists them; only then does it move to the target epoch and get the partitions that are
free (state UNRELEASED_PARTITIONS while some of its new partitions are still held by another
member that has not revoked them yet). The response's ``Assignment`` leaves the partitions
pending revocation out: that omission is the order to revoke them.
"""

from __future__ import annotations

import uuid

from minikafka.broker.groups.consumer_records import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    MemberAssignment,
)

Owners = dict[tuple[uuid.UUID, int], str]


def owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member may still own some of ``partitions`` (unknown ownership: yes)."""
    if owned is None:
        return True
    return any(owned.get(tid, frozenset()) & ps for tid, ps in partitions.items())


def next_assignment(current: MemberAssignment, target_epoch: int, target: Assignment,
                    owned: Assignment | None, owners: Owners) -> MemberAssignment:
    """The member's next reconciliation step (``owned``: the partitions its request reported,
    None when not reported; ``owners``: who else holds each partition)."""
    state = current.state
    if state == STABLE:
        if current.epoch == target_epoch:
            return current
        return _next(current, current.epoch, target_epoch, target, owned, owners)
    if state == UNREVOKED_PARTITIONS:
        if owns_any(owned, current.pending):
            return current
        return _next(current, current.epoch, target_epoch, target, owned, owners)
    return _next(current, current.epoch, target_epoch, target, owned, owners)


def _next(current: MemberAssignment, epoch: int, target_epoch: int, target: Assignment,
          owned: Assignment | None, owners: Owners) -> MemberAssignment:
    keep: Assignment = {}
    revoke: Assignment = {}
    add: Assignment = {}
    withheld = False
    for tid in sorted(set(target) | set(current.assigned)):
        wanted = target.get(tid, frozenset())
        assigned = current.assigned.get(tid, frozenset())
        kept = assigned & wanted
        if kept:
            keep[tid] = kept
        if assigned - kept:
            revoke[tid] = assigned - kept
        mine_pending = current.pending.get(tid, frozenset())
        free = frozenset(p for p in wanted - kept if (tid, p) not in owners or p in mine_pending)
        if len(free) < len(wanted - kept):
            withheld = True
        if free:
            add[tid] = free
    if revoke and owns_any(owned, revoke):
        return _changed(current, epoch, UNREVOKED_PARTITIONS, keep, revoke)
    result = dict(keep)
    for tid, ps in add.items():
        result[tid] = result.get(tid, frozenset()) | ps
    return _changed(current, target_epoch, UNRELEASED_PARTITIONS if withheld else STABLE, result, {})


def _changed(current: MemberAssignment, epoch: int, state: int, assigned: Assignment,
             pending: Assignment) -> MemberAssignment:
    previous = current.previous_epoch if epoch == current.epoch else current.epoch
    return MemberAssignment(epoch, previous, state, assigned, pending)
