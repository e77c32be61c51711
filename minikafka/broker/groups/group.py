"""A classic group: its members, their protocols, the generation and Kafka's five states.

This module holds the data and the bookkeeping rules that do not involve time (who is the
leader, which protocol wins the vote, who has rejoined); the state machine that reacts to
requests and timers is :mod:`minikafka.broker.groups.coordinator`.

States (Kafka's):

- ``Empty``: no members (possibly committed offsets). A join starts a rebalance.
- ``PreparingRebalance``: JoinGroups are parked until every known member has rejoined or the
  rebalance timeout passes.
- ``CompletingRebalance``: the join responses are out; waiting for the leader's SyncGroup.
- ``Stable``: the leader's assignment has been handed out; heartbeats keep members alive.
- ``Dead``: the group has been deleted.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from minikafka.broker.groups.records import MemberIdentity, StoredGroup, StoredMember
from minikafka.errors import ErrorCode

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
#: The longest client id prefix put into a generated member id (Kafka strings have an int16 length).
_MEMBER_ID_PREFIX_MAX = 1024


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class JoinResult:
    error: int  # an ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, repr=False)
class Member(MemberIdentity):
    """One member: identity, timeouts, protocols, assignment and its parked JoinGroup/SyncGroup.
    Members compare by identity: two members with equal fields are still two members."""

    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    #: a member that joined but has not yet been part of a completed join
    is_new: bool = False
    heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_timer(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None

    def __repr__(self) -> str:
        return (f"Member({self.member_id!r}, instance={self.group_instance_id!r}, client={self.client_id!r}, "
                f"session={self.session_timeout_ms}, rebalance={self.rebalance_timeout_ms})")


def _names(protocols: list[tuple[str, bytes]]) -> set[str]:
    """A member's protocol names, each once (a request may repeat a name)."""
    return {name for name, _ in protocols}


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of a consumer-protocol subscription (version 0 is a prefix of every version)."""
    pos = 2
    (count,) = struct.unpack_from(">i", metadata, pos)
    pos += 4
    if count < 0 or count > len(metadata):
        raise ValueError("bad topic count")
    topics = set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", metadata, pos)
        pos += 2
        if n < 0 or pos + n > len(metadata):
            raise ValueError("bad topic name")
        topics.add(metadata[pos : pos + n].decode("utf-8"))
        pos += n
    return topics


class Group:
    """Membership and generation of one group (see the module docstring for the states)."""

    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}  # MEMBER_ID_REQUIRED, not yet back
        self.pending_sync: set[str] = set()
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed: set[str] | None = None
        # timers owned by the coordinator
        self.join_timer: asyncio.TimerHandle | None = None
        self.join_is_initial = False
        self.initial_remaining_ms = 0
        self.initial_delay_ms = 0
        self.sync_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ queries

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        """True when a member subscribes to ``topic``, or when that is unknown for a consumer group."""
        if self.subscribed is None:
            return self.is_consumer_group
        return topic in self.subscribed

    # ------------------------------------------------------------------ membership

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix[:_MEMBER_ID_PREFIX_MAX]}-{uuid.uuid4()}"

    def add(self, member: Member, join_future: asyncio.Future[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(_names(member.protocols))
        member.join_future = join_future
        if join_future is not None:
            self.num_awaiting_join += 1
        timer = self.pending_members.pop(member.member_id, None)
        if timer is not None:
            timer.cancel()

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(_names(member.protocols))
            if member.awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            member.cancel_timer()
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_future: asyncio.Future[JoinResult] | None) -> None:
        self.supported_protocols.subtract(_names(member.protocols))
        member.protocols = protocols
        self.supported_protocols.update(_names(protocols))
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_future is not None and member.join_future is not join_future:
            # A second JoinGroup for the same member (from another connection) supersedes the first.
            old = member.join_future
            if not old.done():
                old.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            self.num_awaiting_join -= 1
            member.join_future = None
        if join_future is not None and member.join_future is None:
            self.num_awaiting_join += 1
        member.join_future = join_future

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that has rejoined, else pick any member that has; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the member behind ``instance_id`` a new member id, fencing whatever the old one awaits."""
        member = self.members.pop(old_id)
        self.maybe_invoke_join(member, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self.maybe_invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    def maybe_invoke_join(self, member: Member, result: JoinResult) -> None:
        fut = member.join_future
        if fut is None:
            return
        member.join_future = None
        self.num_awaiting_join -= 1
        if not fut.done():
            fut.set_result(result)

    def maybe_invoke_sync(self, member: Member, result: SyncResult) -> bool:
        fut = member.sync_future
        if fut is None:
            return False
        member.sync_future = None
        if not fut.done():
            fut.set_result(result)
        return True

    # ------------------------------------------------------------------ protocols

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[p] == len(self.members) for p in protocols)

    def select_protocol(self) -> str:
        """Among the protocols every member supports, the one most members prefer."""
        candidates = {p for p, n in self.supported_protocols.items() if n == len(self.members)}
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda p: votes[p])  # ties: the first voted for

    def compute_subscribed(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics(member.metadata(self.protocol_name))
        except (ValueError, struct.error):
            return None
        return topics

    def validate_member(self, member_id: str, instance_id: str | None) -> int | None:
        """None when ``member_id`` (of static ``instance_id``) is a current member; else its error."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %r: member %r of instance %r is fenced by member %r", self.group_id, member_id,
                         instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        if not self.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def accepts_joining(self, member_id: str, max_size: int) -> bool:
        """Whether ``member_id`` may join without the group growing past ``group.max.size``."""
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.is_(GroupState.PREPARING_REBALANCE):
            member = self.members.get(member_id)
            return (member is not None and member.awaiting_join) or self.num_awaiting_join < max_size
        return self.has(member_id) or self.size < max_size

    def join_result(self, member: Member, with_members: bool = True, leader_id: str | None = None,
                    skip_assignment: bool = False) -> JoinResult:
        """The successful JoinGroup answer of ``member`` (the members' metadata only for the leader)."""
        return JoinResult(
            ErrorCode.NONE, member.member_id, self.generation_id, self.protocol_type, self.protocol_name,
            (self.leader_id or "") if leader_id is None else leader_id,
            self.current_member_metadata() if with_members and self.is_leader(member.member_id) else [],
            skip_assignment,
        )

    def clear_pending_sync(self) -> None:
        """No SyncGroup is awaited any more (a new rebalance begins)."""
        self.pending_sync.clear()
        if self.sync_timer is not None:
            self.sync_timer.cancel()
            self.sync_timer = None

    def synced(self, member_id: str) -> None:
        """``member_id`` sent its SyncGroup; the sync timer stops once every member has."""
        self.pending_sync.discard(member_id)
        if not self.pending_sync and self.sync_timer is not None:
            self.sync_timer.cancel()
            self.sync_timer = None

    def cancel_timers(self) -> None:
        """Cancel the group's rebalance timers (the members' session timers are their own)."""
        for timer in (self.join_timer, self.sync_timer, *self.pending_members.values()):
            if timer is not None:
                timer.cancel()
        self.join_timer = self.sync_timer = None

    def shut(self, error: int) -> None:
        """This coordinator no longer serves the group: parked JoinGroup and SyncGroup requests
        get ``error`` and every timer stops."""
        self.cancel_timers()
        for member in list(self.members.values()):
            self.maybe_invoke_join(member, JoinResult(ErrorCode(error), member.member_id))
            self.maybe_invoke_sync(member, SyncResult(ErrorCode(error)))
            member.cancel_timer()

    # ------------------------------------------------------------------ generations

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id!r}: illegal transition {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed = self.compute_subscribed()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed = self.compute_subscribed()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    # ------------------------------------------------------------------ persistence

    def to_stored(self, assignments: dict[str, bytes] | None = None) -> StoredGroup:
        """The group as a ``GroupMetadataValue``; ``assignments`` replaces the members' current ones."""
        protocol = self.protocol_name
        return StoredGroup(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            state_timestamp=self.state_timestamp,
            members=[
                StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                             m.session_timeout_ms, m.metadata(protocol) if protocol else b"",
                             m.assignment if assignments is None else assignments.get(m.member_id, b""))
                for m in self.members.values()
            ],
        )

    @classmethod
    def from_stored(cls, group_id: str, stored: StoredGroup, now_ms: int) -> Group:
        """A group as a restart finds it: Stable with its members, or Empty."""
        group = cls(group_id, GroupState.STABLE if stored.members else GroupState.EMPTY, now_ms)
        group.generation_id = stored.generation
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol
        group.state_timestamp = stored.state_timestamp if stored.state_timestamp >= 0 else now_ms
        for m in stored.members:
            protocols = [(stored.protocol, m.subscription)] if stored.protocol else []
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms, stored.protocol_type, protocols)
            member.assignment = m.assignment
            group.add(member)
        group.leader_id = stored.leader if stored.leader in group.members else next(iter(group.members), None)
        group.subscribed = group.compute_subscribed()
        return group
