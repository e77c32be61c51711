"""A KIP-848 consumer group: its members, epochs and target assignment, rebuilt from its records.

The state in memory is the replay of the group's records in ``__consumer_offsets``
(:mod:`.consumer_records`): the coordinator decides what a heartbeat changes, appends the records,
and only then applies them here with :meth:`ConsumerGroup.replay` — the same code that rebuilds
the group when its partition is loaded. What is not in the records is derived: the group state,
the static-member map and which member owns which partition. Timers (session, rebalance) are
deadlines on the broker clock kept per member; they are not stored (they restart on load).
Kafka: ``ConsumerGroup`` and ``ConsumerGroupMember`` in
https://github.com/apache/kafka/tree/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/consumer
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from minikafka.broker.groups.consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    REGULAR_EXPRESSION,
    STABLE,
    TARGET_MEMBER,
    TARGET_METADATA,
    Assignment,
    AssignmentEpoch,
    ConsumerKey,
    ConsumerRecord,
    GroupEpoch,
    MemberAssignment,
    MemberSubscription,
    ResolvedRegex,
    TargetAssignment,
)
from minikafka.errors import ErrorCode

EMPTY_SUBSCRIPTION = MemberSubscription(None, None, "", "", (), None, -1, None)
NO_ASSIGNMENT = MemberAssignment(-1, -1, STABLE)


@dataclass(slots=True)
class ConsumerMember:
    """A member: its stored subscription (record 5) and reconciliation (record 8), and its timers."""

    member_id: str
    subscription: MemberSubscription = EMPTY_SUBSCRIPTION
    current: MemberAssignment = NO_ASSIGNMENT
    #: broker-clock deadlines (ms); None when not armed
    session_deadline: int | None = None
    rebalance_deadline: int | None = None
    rebalance_epoch: int = -1  # the epoch the rebalance timer was armed at

    @property
    def epoch(self) -> int:
        return self.current.epoch

    @property
    def instance_id(self) -> str | None:
        return self.subscription.instance_id

    def owned(self) -> Assignment:
        """Assigned and pending revocation: what nobody else may be given."""
        out = dict(self.current.assigned)
        for tid, ps in self.current.pending.items():
            out[tid] = out.get(tid, frozenset()) | ps
        return out


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = -1
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    #: False once record 3 is tombstoned (the group was deleted)
    exists: bool = True

    # ------------------------------------------------------------------ replay

    def replay(self, record: ConsumerRecord) -> None:
        """Apply one record (Kafka: ``GroupMetadataManager.replay``)."""
        key, value = record.key, record.value
        mid = key.sub or ""
        if key.type == GROUP_METADATA:
            if isinstance(value, GroupEpoch):
                self.epoch, self.metadata_hash, self.exists = value.epoch, value.metadata_hash, True
            else:
                self.exists = False
        elif key.type == MEMBER_METADATA:
            if isinstance(value, MemberSubscription):
                self.members.setdefault(mid, ConsumerMember(mid)).subscription = value
            else:
                self.members.pop(mid, None)
        elif key.type == TARGET_METADATA:
            self.assignment_epoch = value.epoch if isinstance(value, AssignmentEpoch) else -1
        elif key.type == TARGET_MEMBER:
            if isinstance(value, TargetAssignment):
                self.targets[mid] = value.partitions
            else:
                self.targets.pop(mid, None)
        elif key.type == CURRENT_ASSIGNMENT:
            if isinstance(value, MemberAssignment):
                self.members.setdefault(mid, ConsumerMember(mid)).current = value
            elif mid in self.members:
                self.members[mid].current = NO_ASSIGNMENT
        elif key.type == REGULAR_EXPRESSION:
            if isinstance(value, ResolvedRegex):
                self.regexes[mid] = value
            else:
                self.regexes.pop(mid, None)

    # ------------------------------------------------------------------ derived state

    @property
    def state(self) -> str:
        """Kafka's group state: Empty, Assigning, Reconciling or Stable."""
        if not self.members:
            return "Empty"
        if self.epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.current.state != STABLE or m.epoch != self.assignment_epoch for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owners(self, excluding: str) -> dict[tuple[uuid.UUID, int], str]:
        """Which member holds (assigned or pending revocation) each partition, but ``excluding``."""
        out: dict[tuple[uuid.UUID, int], str] = {}
        for member in self.members.values():
            if member.member_id != excluding:
                for tid, ps in member.owned().items():
                    for p in ps:
                        out[(tid, p)] = member.member_id
        return out

    def regex_users(self, regex: str, excluding: str | None = None) -> int:
        return sum(1 for m in self.members.values() if m.subscription.regex == regex and m.member_id != excluding)

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members name (ties: by name), else ``default``."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.subscription.server_assignor:
                counts[m.subscription.server_assignor] = counts.get(m.subscription.server_assignor, 0) + 1
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))

    def subscribed_names(self, member: ConsumerMember) -> set[str]:
        """Topic names a member subscribes to: its names and what its regex resolved to."""
        names = set(member.subscription.topic_names)
        regex = member.subscription.regex
        if regex and regex in self.regexes:
            names.update(self.regexes[regex].topics)
        return names

    # ------------------------------------------------------------------ offsets

    def validate_commit(self, member_id: str, epoch: int, api_version: int, transactional: bool) -> int | None:
        """None when a commit (OffsetCommit, or TxnOffsetCommit when ``transactional``) of
        ``member_id`` at ``epoch`` may go on; else its error. Kafka 4.0's rule: the member's
        current epoch, nothing older (``ConsumerGroup.validateOffsetCommit``)."""
        if transactional and member_id == "" and epoch < 0:
            return None  # a producer without group metadata
        if not self.members and epoch < 0:
            return None  # an admin client (or a consumer without group management) of an empty group
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if epoch != member.epoch:
            return ErrorCode.ILLEGAL_GENERATION if transactional else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_fetch(self, member_id: str | None, epoch: int) -> int | None:
        """OffsetFetch v9+: a member that names itself must be at its current epoch."""
        if member_id is None and epoch < 0:
            return None
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.STALE_MEMBER_EPOCH if epoch != member.epoch else None

    # ------------------------------------------------------------------ records

    def key(self, record_type: int, sub: str | None = None) -> ConsumerKey:
        return ConsumerKey(record_type, self.group_id, sub)

    def removal_records(self, member: ConsumerMember) -> list[ConsumerRecord]:
        """The tombstones that remove ``member`` (current assignment, target, subscription), and
        of a regex only it used."""
        mid = member.member_id
        out = [ConsumerRecord(self.key(CURRENT_ASSIGNMENT, mid), None),
               ConsumerRecord(self.key(TARGET_MEMBER, mid), None),
               ConsumerRecord(self.key(MEMBER_METADATA, mid), None)]
        regex = member.subscription.regex
        if regex and regex in self.regexes and self.regex_users(regex, excluding=mid) == 0:
            out.append(ConsumerRecord(self.key(REGULAR_EXPRESSION, regex), None))
        return out

    def tombstones(self) -> list[ConsumerRecord]:
        """Every record of the group as tombstones, in Kafka's order (deleting the group)."""
        out = [ConsumerRecord(self.key(CURRENT_ASSIGNMENT, m), None) for m in self.members]
        out += [ConsumerRecord(self.key(TARGET_MEMBER, m), None) for m in self.targets]
        out.append(ConsumerRecord(self.key(TARGET_METADATA), None))
        out += [ConsumerRecord(self.key(MEMBER_METADATA, m), None) for m in self.members]
        out += [ConsumerRecord(self.key(REGULAR_EXPRESSION, r), None) for r in self.regexes]
        out.append(ConsumerRecord(self.key(GROUP_METADATA), None))
        return out


def with_epoch_record(group: ConsumerGroup, epoch: int, metadata_hash: int) -> ConsumerRecord:
    return ConsumerRecord(group.key(GROUP_METADATA), GroupEpoch(epoch, metadata_hash))


def reset_static(current: MemberAssignment) -> MemberAssignment:
    """A static member that left temporarily (epoch -2): it keeps its partitions, nothing pending."""
    return replace(current, epoch=-2, previous_epoch=current.epoch, pending={})
