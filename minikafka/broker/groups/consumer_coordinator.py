"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat, members' sessions and rebalance
timeouts, and fencing (Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``,
https://github.com/apache/kafka/blob/trunk/group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupMetadataManager.java).

One heartbeat: validate (Kafka's checks and codes, in its order), find or create the group and
the member, apply the fields the request carries (a null field means "unchanged"), note a change
of regular expression (resolved in the background, :mod:`.consumer_regex`), bump the group epoch
when the subscriptions or the subscribed topics' metadata changed, recompute the target
assignment when the assignment epoch is behind, take this member one reconciliation step
(:mod:`.reconciliation`). Everything
the heartbeat changes is a list of records (:mod:`.consumer_records`) appended to the group's
partition of ``__consumer_offsets`` as one batch; memory changes only by replaying them
(:meth:`ConsumerGroup.replay`), so an error or a failed append changes nothing and a restart
rebuilds exactly what was acknowledged.

Version choices where Kafka releases differ (all invisible to clients except as noted): a new
group starts at epoch 0 and its first heartbeat bumps it (4.0/4.1); an epoch-0 heartbeat of a
known member id is a rejoin, not fenced (4.2+, so clients that were fenced rejoin with the same
id); a member leaving revocation keeps its epoch (4.2+); a subscribed-metadata hash is kept in
the group's epoch record (4.1+; minikafka's own 64-bit hash, not Kafka's XXH3); regular
expressions are refreshed every ``group.consumer.regex.refresh.interval.ms`` besides when topics
are created (4.1+).

Timers are deadlines on the broker clock, checked by a sweep every 100 ms: a member's session
(the group's ``consumer.session.timeout.ms`` or else ``group.consumer.session.timeout.ms``, re-armed
by every successful heartbeat, :mod:`minikafka.broker.group_configs`) and, while it
revokes, its rebalance timeout. Either one expiring removes the member and bumps the group epoch.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from minikafka.broker.groups.assignors import AssignorMember, assign
from minikafka.broker.groups.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    reset_static,
    with_epoch_record,
)
from minikafka.broker.groups.consumer_records import (
    CURRENT_ASSIGNMENT,
    MEMBER_METADATA,
    STABLE,
    TARGET_MEMBER,
    TARGET_METADATA,
    UNREVOKED_PARTITIONS,
    Assignment,
    AssignmentEpoch,
    ConsumerRecord,
    MemberAssignment,
    MemberSubscription,
    ResolvedRegex,
    TargetAssignment,
)
from minikafka.broker.groups.consumer_regex import RegexRefresh, invalid_regex, resolve
from minikafka.broker.groups.reconciliation import next_assignment
from minikafka.broker.groups.records import group_key
from minikafka.broker.groups.table import GroupTable
from minikafka.broker.internal_records import RecordFormatError, append_error
from minikafka.errors import ErrorCode, KafkaError
from minikafka.protocol.kafka_versions import RELEASES

if TYPE_CHECKING:
    from minikafka.broker.group_configs import GroupConfigs
    from minikafka.config import BrokerConfig

log = logging.getLogger(__name__)


class TopicInfo(Protocol):
    """What a KIP-848 group needs of a topic it may subscribe to: a single broker's local topic
    or a cluster's controller record."""

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> int: ...


SWEEP_SECONDS = 0.1
LEAVE = -1
STATIC_LEAVE = -2


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat request as the coordinator needs it (None = unchanged)."""

    version: int
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topic_names: tuple[str, ...] | None
    regex: str | None
    server_assignor: str | None
    owned: Assignment | None
    client_id: str
    client_host: str

    @property
    def full(self) -> bool:
        """A request with everything (a join, or after a coordinator change): it gets the assignment."""
        return (self.rebalance_timeout_ms != -1 and (self.topic_names is not None or self.regex is not None)
                and self.owned is not None)


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: int
    message: str | None = None
    member_id: str | None = None
    epoch: int = 0
    interval_ms: int = 0
    assignment: Assignment | None = None


def fail(error: int, message: str | None = None) -> HeartbeatAnswer:
    return HeartbeatAnswer(error, message)


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroups:
    """The consumer groups of ``table`` (a part of the group coordinator)."""

    def __init__(self, table: GroupTable, topics: Callable[[], Mapping[str, TopicInfo]], *,
                 configs: GroupConfigs, max_size: int, assignors: tuple[str, ...], enabled: bool,
                 regex_refresh_ms: int = 600_000) -> None:
        self._table = table
        self._topics = topics
        self._regex = RegexRefresh(regex_refresh_ms)
        self.configs = configs  # each group's session timeout and heartbeat interval
        self.max_size = max_size
        self.assignors = assignors
        self.enabled = enabled
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_config(cls, table: GroupTable, topics: Callable[[], Mapping[str, TopicInfo]],
                    config: BrokerConfig, group_configs: GroupConfigs) -> ConsumerGroups:
        """With the broker's ``group.consumer.*`` and ``group.coordinator.rebalance.protocols`` settings."""
        protocols = str(config.get("group.coordinator.rebalance.protocols")).replace(" ", "").split(",")
        kafka = RELEASES.get(str(config.get("minikafka.kafka.version")))  # 3.9 does not offer KIP-848
        return cls(table, topics,
                   configs=group_configs,
                   max_size=int(config.get("group.consumer.max.size")),
                   assignors=tuple(a.strip() for a in str(config.get("group.consumer.assignors")).split(",")
                                   if a.strip()),
                   enabled="consumer" in protocols and (kafka is None or kafka.consumer_protocol),
                   regex_refresh_ms=int(config.get("group.consumer.regex.refresh.interval.ms")))

    @property
    def groups(self) -> dict[str, ConsumerGroup]:
        return self._table.consumer_groups

    def make_room_for_classic(self, group_id: str) -> int | None:
        """A classic member joins a KIP-848 group's id: an empty one is deleted (its offsets stay)
        and a classic group takes its place; one with members refuses the join, as Kafka does when
        classic members may not join consumer groups. None, or the JoinGroup error."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        try:
            self._table.delete_consumer_group(group, with_offsets=False)
        except (KafkaError, RecordFormatError) as exc:
            return append_error(exc)
        log.info("group %r: the empty consumer group becomes a classic group", group_id)
        return None

    # ------------------------------------------------------------------ lifecycle

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._sweeper = loop.call_later(SWEEP_SECONDS, self.sweep)

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None

    def arm_loaded(self, partition: int) -> None:
        """Restart the session of every member of the groups of a partition just loaded (and the
        rebalance timeout of the ones revoking), as Kafka does on load."""
        now = self._table.now()
        for group in self.groups.values():
            if self._table.partitions.partition_of(group.group_id) == partition:
                for member in group.members.values():
                    member.session_deadline = now + self.configs.consumer_session_ms(group.group_id)
                    if member.current.state == UNREVOKED_PARTITIONS:
                        self._arm_rebalance(member, now)

    def _arm_rebalance(self, member: ConsumerMember, now: int) -> None:
        member.rebalance_deadline = now + max(member.subscription.rebalance_timeout_ms, 0)
        member.rebalance_epoch = member.epoch

    # ------------------------------------------------------------------ validation

    def _invalid(self, hb: Heartbeat) -> HeartbeatAnswer | None:
        """Kafka's request validation, in its order (INVALID_REQUEST unless said otherwise)."""
        bad = ErrorCode.INVALID_REQUEST
        if not hb.member_id.strip() and (hb.version >= 1 or hb.member_epoch > 0 or hb.member_epoch == LEAVE):
            return fail(bad, "MemberId can't be empty.")
        if not hb.group_id.strip():
            return fail(bad, "GroupId can't be empty.")
        if hb.instance_id is not None and not hb.instance_id.strip():
            return fail(bad, "InstanceId can't be empty.")
        if hb.rack_id is not None and not hb.rack_id.strip():
            return fail(bad, "RackId can't be empty.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                return fail(bad, "RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is None or hb.owned:
                return fail(bad, "TopicPartitions must be empty when (re-)joining.")
            if hb.topic_names is None and hb.regex is None:
                return fail(bad, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif hb.member_epoch == STATIC_LEAVE and hb.instance_id is None:
            return fail(bad, "InstanceId can't be null.")
        elif hb.member_epoch < STATIC_LEAVE:
            return fail(bad, "MemberEpoch is invalid.")
        if hb.server_assignor is not None and hb.server_assignor not in self.assignors:
            return fail(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.server_assignor} is not supported. "
                        f"Supported assignors: {', '.join(self.assignors)}.")
        return None

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat

    async def heartbeat(self, hb: Heartbeat) -> HeartbeatAnswer:
        if not self.enabled:
            return fail(ErrorCode.UNSUPPORTED_VERSION)
        invalid = self._invalid(hb)
        if invalid is not None:
            return invalid
        error = self._table.check(hb.group_id, allow_empty=False)
        if error is not None:
            return fail(error)
        if hb.member_epoch in (LEAVE, STATIC_LEAVE):
            return await self._leave(hb)
        return await self._join_or_heartbeat(hb)

    def _append(self, group: ConsumerGroup, records: list[ConsumerRecord], replaces_classic: bool = False) -> int:
        """Append ``records`` as one batch, then replay them into ``group``; the error code. With
        ``replaces_classic`` the batch first tombstones the empty classic group of the same id."""
        table = self._table
        try:
            store = table.store_of(group.group_id)
            before: list[tuple[bytes, bytes | None]] = [(group_key(group.group_id), None)] if replaces_classic else []
            if records or before:
                store.append_consumer(records, before)
        except (KafkaError, RecordFormatError, OSError) as exc:
            log.warning("consumer group %r: cannot write its records: %s", group.group_id, exc)
            return append_error(exc)
        if replaces_classic:
            classic = table.groups.pop(group.group_id, None)
            if classic is not None:
                classic.cancel_timers()
        self.groups.setdefault(group.group_id, group)
        for record in records:
            group.replay(record)
        if not group.exists:
            self.groups.pop(group.group_id, None)
        return ErrorCode.NONE

    async def _write(self, group: ConsumerGroup, records: list[ConsumerRecord], replaces_classic: bool = False) -> int:
        """:meth:`_append`, then wait until the batch is durable (with --fsync)."""
        error = self._append(group, records, replaces_classic)
        if error:
            return error
        try:
            await self._table.store_of(group.group_id).sync()
        except (KafkaError, OSError) as exc:
            log.error("fsync of the consumer group records failed: %s", exc)
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    async def _leave(self, hb: Heartbeat) -> HeartbeatAnswer:
        group = self.groups.get(hb.group_id)
        if group is None:
            return fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} not found.")
        if hb.instance_id is None:
            member = group.members.get(hb.member_id)
            if member is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of group "
                            f"{hb.group_id}.")
        else:
            member = group.static_member(hb.instance_id)
            if member is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
            if member.member_id != hb.member_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID, f"Static member {hb.member_id} with instance id "
                            f"{hb.instance_id} is not the member of instance id {hb.instance_id}.")
        if hb.member_epoch == STATIC_LEAVE:
            record = ConsumerRecord(group.key(CURRENT_ASSIGNMENT, member.member_id), reset_static(member.current))
            error = await self._write(group, [record])
            log.info("consumer group %r: static member %r (instance %r) left temporarily", group.group_id,
                     member.member_id, hb.instance_id)
        else:
            error = self._remove(group, member, "left the group")
            if not error:
                error = await self._write(group, [])
        if error:
            return fail(error)
        return HeartbeatAnswer(ErrorCode.NONE, None, hb.member_id, hb.member_epoch, 0, None)

    def _remove(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> int:
        """Remove (fence) a member: its tombstones and a group epoch bump."""
        if group.members.get(member.member_id) is not member:
            return ErrorCode.NONE  # already gone
        records = group.removal_records(member)
        remaining = [m for m in group.members.values() if m.member_id != member.member_id]
        records.append(with_epoch_record(group, group.epoch + 1, self._metadata_hash(group, remaining)))
        log.info("consumer group %r: member %r %s; group epoch %d", group.group_id, member.member_id, why,
                 group.epoch + 1)
        return self._append(group, records)

    def _resolve_member(self, group: ConsumerGroup, hb: Heartbeat, member_id: str
                        ) -> tuple[ConsumerMember, ConsumerMember | None] | HeartbeatAnswer:
        """(the member this heartbeat is for, the departed static member it replaces) or the error."""
        if hb.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if hb.member_epoch > 0:
                    return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                f"{group.group_id}.")
                return ConsumerMember(member_id, current=MemberAssignment(0, 0, STABLE)), None
        else:
            holder = group.static_member(hb.instance_id)
            if hb.member_epoch == 0:
                if holder is None:
                    member = group.members.get(member_id) or ConsumerMember(
                        member_id, current=MemberAssignment(0, 0, STABLE))
                    return member, None
                if holder.epoch != STATIC_LEAVE:
                    return fail(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {holder.member_id} with "
                                f"instance id {hb.instance_id} is not released yet.")
                copy = ConsumerMember(member_id, holder.subscription,
                                      replace(holder.current, epoch=0, previous_epoch=0, state=STABLE, pending={}))
                return copy, holder
            if holder is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} is unknown.")
            if holder.member_id != member_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                            f"{hb.instance_id} was fenced by member {holder.member_id}.")
            member = holder
        if hb.member_epoch > 0:
            stored = member.current
            if hb.member_epoch > stored.epoch or (hb.member_epoch < stored.epoch and not (
                    hb.member_epoch == stored.previous_epoch and hb.owned is not None
                    and all(ps <= stored.assigned.get(tid, frozenset()) for tid, ps in hb.owned.items()))):
                return fail(ErrorCode.FENCED_MEMBER_EPOCH, f"The consumer group member has a "
                            f"{'greater' if hb.member_epoch > stored.epoch else 'smaller'} member epoch "
                            f"({hb.member_epoch}) than the one known by the group coordinator ({stored.epoch}).")
        return member, None

    def _group_for(self, hb: Heartbeat) -> tuple[ConsumerGroup, bool] | HeartbeatAnswer:
        """(the group, whether an empty classic group of the id is replaced) or the error."""
        group = self.groups.get(hb.group_id)
        if group is not None:
            return group, False
        classic = self._table.groups.get(hb.group_id)
        if hb.member_epoch > 0:
            if classic is not None:
                return fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a consumer group.")
            return fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {hb.group_id} not found.")
        if classic is not None and classic.members:
            return fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {hb.group_id} to consumer "
                        "group because the online upgrade is disabled.")
        return ConsumerGroup(hb.group_id), classic is not None

    async def _join_or_heartbeat(self, hb: Heartbeat) -> HeartbeatAnswer:
        found = self._group_for(hb)
        if isinstance(found, HeartbeatAnswer):
            return found
        group, replaces_classic = found
        known_static = hb.instance_id is not None and group.static_member(hb.instance_id) is not None
        if not known_static and len(group.members) >= self.max_size and hb.member_id not in group.members:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum capacity of "
                        f"{self.max_size} members.")
        member_id = hb.member_id or new_member_id()
        resolved = self._resolve_member(group, hb, member_id)
        if isinstance(resolved, HeartbeatAnswer):
            return resolved
        member, replaced = resolved
        old = member.subscription
        previous = member.current  # the replay below changes the stored member
        regex = old.regex if hb.regex is None else (hb.regex or None)
        if regex and regex != old.regex and group.regex_users(regex) == 0:
            why = invalid_regex(regex)
            if why is not None:
                return fail(ErrorCode.INVALID_REGULAR_EXPRESSION,
                            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {why}.")
        sub = MemberSubscription(
            hb.instance_id if hb.instance_id is not None else old.instance_id,
            hb.rack_id if hb.rack_id is not None else old.rack_id, hb.client_id, hb.client_host,
            hb.topic_names if hb.topic_names is not None else old.topic_names, regex,
            hb.rebalance_timeout_ms if hb.rebalance_timeout_ms != -1 else old.rebalance_timeout_ms,
            hb.server_assignor if hb.server_assignor is not None else old.server_assignor)
        records: list[ConsumerRecord] = []
        if replaced is not None:
            records += group.removal_records(replaced)[:3]
        is_new = member_id not in group.members
        if sub != old or is_new:
            records.append(ConsumerRecord(group.key(MEMBER_METADATA, member_id), sub))
        if replaced is not None and replaced.member_id in group.targets:
            records.append(ConsumerRecord(group.key(TARGET_MEMBER, member_id),
                                          TargetAssignment(group.targets[replaced.member_id])))
        updated = ConsumerMember(member_id, sub, member.current)
        members = {m.member_id: m for m in group.members.values()
                   if replaced is None or m.member_id != replaced.member_id}
        members[member_id] = updated
        topics = self._topics()
        update = self._regex.on_heartbeat(group, old.regex, sub.regex, topics, self._table.now())
        records += update.records
        dropped = {r.key.sub for r in update.records}
        regexes = {r: v for r, v in group.regexes.items() if r not in dropped}
        bump = sub.topic_names != old.topic_names or update.bump or group.epoch == 0
        metadata_hash = self._metadata_hash(group, list(members.values()), regexes)
        epoch = group.epoch
        if bump or metadata_hash != group.metadata_hash:
            epoch += 1
            records.append(with_epoch_record(group, epoch, metadata_hash))
        targets = dict(group.targets)
        if replaced is not None:
            targets[member_id] = targets.pop(replaced.member_id, {})
        assignment_epoch = group.assignment_epoch
        if assignment_epoch < epoch:
            records += self._target_records(group, members, targets, topics, regexes)
            records.append(ConsumerRecord(group.key(TARGET_METADATA), AssignmentEpoch(epoch)))
            assignment_epoch = epoch
        owners = group.owners(excluding=member_id)
        if replaced is not None:
            owners = {tp: mid for tp, mid in owners.items() if mid != replaced.member_id}
        current = next_assignment(updated.current, assignment_epoch, targets.get(member_id, {}), hb.owned, owners)
        if current != previous or is_new or replaced is not None:
            records.append(ConsumerRecord(group.key(CURRENT_ASSIGNMENT, member_id), current))
        error = await self._write(group, records, replaces_classic)
        if error:
            return fail(error)
        if update.refresh is not None:
            self._regex.pending.add(group.group_id)
            asyncio.get_running_loop().call_soon(self._resolve_regexes, group.group_id, update.refresh)
        if replaced is not None:
            log.info("consumer group %r: static member %r replaces %r (instance %r)", group.group_id, member_id,
                     replaced.member_id, hb.instance_id)
        stored = group.members[member_id]
        now = self._table.now()
        stored.session_deadline = now + self.configs.consumer_session_ms(group.group_id)
        if current.state == UNREVOKED_PARTITIONS:
            if previous.state != UNREVOKED_PARTITIONS or stored.rebalance_deadline is None:
                self._arm_rebalance(stored, now)
        else:
            stored.rebalance_deadline = None
        send = hb.member_epoch == 0 or hb.full or current.assigned != previous.assigned
        log.debug("consumer group %r: member %r epoch %d -> %d %s, owned %s, target %s (epoch %d), records %s",
                  group.group_id, member_id, hb.member_epoch, current.epoch, current.state, hb.owned,
                  targets.get(member_id), assignment_epoch, [r.key.type for r in records])
        return HeartbeatAnswer(ErrorCode.NONE, None, member_id, current.epoch,
                               self.configs.consumer_heartbeat_ms(group.group_id),
                               current.assigned if send else None)

    # ------------------------------------------------------------------ subscriptions and targets

    def _resolve_regexes(self, group_id: str, regexes: frozenset[str]) -> None:
        """The background resolution a heartbeat asked for: a record per regex the group still
        uses and, when what they match changed, a group epoch bump (the members get the new
        target on their next heartbeats)."""
        self._regex.pending.discard(group_id)
        group = self.groups.get(group_id)
        if group is None or not self._table.active:
            return
        topics, now = self._topics(), self._table.now()
        version = self._regex.observe(topics, now)
        records, after, changed = self._regex.results(group, resolve(regexes, topics, version, now))
        metadata_hash = self._metadata_hash(group, list(group.members.values()), after)
        if changed or metadata_hash != group.metadata_hash:
            records.append(with_epoch_record(group, group.epoch + 1, metadata_hash))
            log.info("consumer group %r: regular expressions resolved (%s); group epoch %d", group_id,
                     ", ".join(f"{r} -> {len(after[r].topics)} topic(s)" for r in sorted(regexes) if r in after),
                     group.epoch + 1)
        self._append(group, records)

    def _subscribed(self, member: ConsumerMember, regexes: Mapping[str, ResolvedRegex]) -> set[str]:
        names = set(member.subscription.topic_names)
        regex = member.subscription.regex
        if regex and regex in regexes:
            names.update(regexes[regex].topics)
        return names

    def _metadata_hash(self, group: ConsumerGroup, members: list[ConsumerMember],
                       regexes: Mapping[str, ResolvedRegex] | None = None) -> int:
        """A 64-bit hash of (id, name, partitions) of every subscribed topic that exists; 0 if none."""
        topics = self._topics()
        resolved = group.regexes if regexes is None else regexes
        names = sorted({n for m in members for n in self._subscribed(m, resolved) if n in topics})
        if not names:
            return 0
        text = ";".join(f"{topics[n].topic_id}:{n}:{topics[n].partitions}" for n in names)
        value = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)
        return value or 1

    def _target_records(self, group: ConsumerGroup, members: dict[str, ConsumerMember],
                        targets: dict[str, Assignment], topics: Mapping[str, TopicInfo],
                        regexes: Mapping[str, ResolvedRegex]) -> list[ConsumerRecord]:
        """Run the group's assignor; a target record for every member whose target changed
        (``targets`` is updated to the new targets)."""
        counts = {info.topic_id: info.partitions for info in topics.values()}
        inputs = [AssignorMember(mid, m.instance_id,
                                 frozenset(topics[n].topic_id for n in self._subscribed(m, regexes) if n in topics),
                                 targets.get(mid, {}))
                  for mid, m in members.items()]
        default = self.assignors[0]
        preferred = max(((sum(1 for m in members.values() if m.subscription.server_assignor == name), name)
                         for name in self.assignors), key=lambda c: (c[0], c[1] == default))
        name = preferred[1] if preferred[0] > 0 else default
        new = assign(name, inputs, counts)
        records = []
        for mid in members:
            target = {tid: ps for tid, ps in new.get(mid, {}).items() if ps}
            if target != targets.get(mid, {}):
                records.append(ConsumerRecord(group.key(TARGET_MEMBER, mid), TargetAssignment(target)))
            targets[mid] = target
        return records

    # ------------------------------------------------------------------ timers

    def sweep(self) -> None:
        """Remove the members whose session or rebalance timeout passed on the broker clock."""
        if self._loop is None:
            return
        self._sweeper = self._loop.call_later(SWEEP_SECONDS, self.sweep)
        if not self._table.active:
            return
        now = self._table.now()
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if member.session_deadline is not None and member.session_deadline <= now:
                    member.session_deadline = None
                    self._remove(group, member, "failed (session timeout)")
                elif (member.rebalance_deadline is not None and member.rebalance_deadline <= now
                      and member.epoch == member.rebalance_epoch
                      and member.current.state == UNREVOKED_PARTITIONS):
                    member.rebalance_deadline = None
                    self._remove(group, member, "did not revoke in time")

