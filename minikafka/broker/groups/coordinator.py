"""The group coordinator: Kafka's classic group protocol and the committed offsets.

The coordinator serves the groups of the ``__consumer_offsets`` partitions it has loaded
(:meth:`GroupCoordinator.load_partition`; all of them at start); a group of a partition still
loading gets COORDINATOR_LOAD_IN_PROGRESS, one of a partition not served here NOT_COORDINATOR.
The state machine follows Kafka's classic coordinator:

- JoinGroup parks (a long poll) until the rebalance completes: when every known member has
  rejoined, or the rebalance timeout (the largest of the members') passes and the members that
  did not rejoin are dropped. A rebalance of an Empty group waits
  ``group.initial.rebalance.delay.ms`` first, extended while new members keep arriving.
- JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and a fresh id; the rebalance waits
  for such pending members until their session timeout.
- The first member to join leads; the leader gets the members' metadata, runs the assignor and
  sends the assignment in its SyncGroup; then the group is Stable and every parked SyncGroup is
  answered. Members that do not send SyncGroup within the rebalance timeout are dropped.
- Heartbeat, SyncGroup and OffsetCommit renew a member's session; a member not heard from within
  its session timeout is dropped and the group rebalances.
- Static members (group.instance.id) that come back with a new member id replace the old one
  without a rebalance when the group is Stable; the old id is fenced (FENCED_INSTANCE_ID).

The coordinator owns its parts, built in its constructor around one
:class:`~minikafka.broker.groups.table.GroupTable` (the groups and each partition's offset store):
committing, fetching and expiring offsets (:attr:`GroupCoordinator.offsets`, :mod:`.offsets`);
listing, describing and deleting groups (:attr:`GroupCoordinator.admin`, :mod:`.admin`). Timers
are ``loop.call_later`` handles on the broker's event loop; every request handler and timer runs
on that loop, so no locking is needed. Error codes and their precedence are Kafka's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from minikafka.broker.coordinator_runtime import CoordinatorPartitions
from minikafka.broker.groups.admin import GroupAdmin
from minikafka.broker.groups.consumer_coordinator import ConsumerGroups
from minikafka.broker.groups.group import Group, GroupState, JoinResult, Member, SyncResult
from minikafka.broker.groups.offset_store import OffsetStore
from minikafka.broker.groups.offsets import GroupOffsets
from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.broker.groups.table import GroupTable
from minikafka.broker.internal_records import RecordFormatError, append_error, encodable
from minikafka.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from minikafka.broker.group_configs import GroupConfigs
    from minikafka.broker.groups.consumer_coordinator import TopicInfo
    from minikafka.config import BrokerConfig

log = logging.getLogger(__name__)

#: How long a new member's JoinGroup may stay parked before it is dropped (Kafka: 5 minutes).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

S = GroupState


class GroupCoordinator:
    """The groups of the ``__consumer_offsets`` partitions this broker serves (see the module
    docstring): the membership state machine here, the offsets and administration in the parts
    it owns (:attr:`offsets`, :attr:`admin`)."""

    def __init__(self, config: BrokerConfig, stores: Callable[[int], OffsetStore], clock: Callable[[], float],
                 partitions: int, topics: Callable[[], Mapping[str, TopicInfo]],
                 group_configs: GroupConfigs) -> None:
        """``stores`` makes the (not yet loaded) store of a partition of ``__consumer_offsets`` (of
        ``partitions``); ``clock`` is the broker's clock; KIP-848 groups subscribe to ``topics``."""
        self.min_session_ms = int(config.get("group.min.session.timeout.ms"))
        self.max_session_ms = int(config.get("group.max.session.timeout.ms"))
        self.max_size = int(config.get("group.max.size"))
        self.initial_delay_ms = int(config.get("group.initial.rebalance.delay.ms"))
        self.table = GroupTable(stores, partitions, clock)
        self.offsets = GroupOffsets(
            self.table, self._renew_session,
            retention_ms=int(config.get("offsets.retention.minutes")) * 60_000,
            retention_check_ms=int(config.get("offsets.retention.check.interval.ms")),
            metadata_max_bytes=int(config.get("offset.metadata.max.bytes")))
        self.admin = GroupAdmin(self.table)
        self.consumer = ConsumerGroups.from_config(self.table, topics, config, group_configs)  # KIP-848

    @property
    def groups(self) -> dict[str, Group]:
        """Every group of the partitions loaded here, by id."""
        return self.table.groups

    @property
    def active(self) -> bool:
        return self.table.active

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self.table.partitions

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.table.tasks.loop

    # ================================================================== lifecycle

    async def start(self, load_all: bool = True) -> None:
        """Load every partition of ``__consumer_offsets``, one at a time (unavailable when one cannot
        be loaded); in a cluster (``load_all`` False) none: each loads on election (:meth:`on_election`)."""
        self.table.tasks.start()
        self.table.active = True
        for partition in range(self.partitions.count) if load_all else ():
            if not await self.load_partition(partition):
                log.error("the group coordinator is unavailable: cannot load %s", OFFSETS_TOPIC)
                self.table.active = False
                return
        self.offsets.start(self.loop)
        self.consumer.start(self.loop)
        log.info("group coordinator loaded %d group(s)", len(self.groups))

    async def load_partition(self, partition: int) -> bool:
        """Kafka's ``onElection``: replay ``partition``, restart its stored members' sessions (its groups
        answer COORDINATOR_LOAD_IN_PROGRESS until then); False if it cannot load or was unloaded."""
        with_members = await self.partitions.load(partition, lambda: self.table.load(partition))
        for group in with_members or ():
            for member in group.members.values():
                self._renew_session(group, member)
        if with_members is not None:
            self.consumer.arm_loaded(partition)
        return with_members is not None

    def on_election(self, partition: int) -> None:  # this broker leads it now: load in the background
        if self.active and partition not in self.partitions.served():
            self.table.tasks.spawn(self.load_partition(partition))

    def unload_partition(self, partition: int) -> int:
        """Kafka's ``onResignation``: the groups of ``partition`` (parked JoinGroup/SyncGroup, later
        requests) get NOT_COORDINATOR, their offsets stay in the log; how many groups were unloaded."""
        return self.table.unload(partition)

    def close(self) -> None:
        """Stop: parked JoinGroup/SyncGroup requests get NOT_COORDINATOR, timers are cancelled."""
        if not self.active:
            return
        self.table.active = False
        self.offsets.close()
        self.consumer.close()
        for group in self.groups.values():
            group.shut(ErrorCode.NOT_COORDINATOR)
        self.table.tasks.cancel_all()

    # ================================================================== JoinGroup

    def join_group(self, group_id: str | None, member_id: str, instance_id: str | None, *,
                   require_known_member_id: bool, support_skip_assignment: bool, client_id: str,
                   client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None = None) -> asyncio.Future[JoinResult]:
        """A future that completes with the JoinGroup response (maybe only after a rebalance)."""
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        error = self.table.check(group_id, allow_empty=False)
        if error is None and not (self.min_session_ms <= session_timeout_ms <= self.max_session_ms):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error is None and not all(encodable(s) for s in (member_id, instance_id, protocol_type,
                                                            *(name for name, _ in protocols))):
            error = ErrorCode.INVALID_REQUEST
        if error is None and group_id is not None:  # the id of a KIP-848 group
            error = self.consumer.make_room_for_classic(group_id)
        if error is not None:
            fut.set_result(JoinResult(error, member_id))
            return fut
        assert group_id is not None
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return fut
            group = self.table.create(group_id)
        why = f"client reason: {reason or 'not provided'}"
        if not group.accepts_joining(member_id, self.max_size):
            removed = group.remove(member_id)
            if removed is not None:
                group.maybe_invoke_join(removed, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
            fut.set_result(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, ""))
        elif unknown:
            self._new_member_join(group, fut, instance_id, require_known_member_id, support_skip_assignment,
                                  client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                  protocols, why)
        else:
            self._current_member_join(group, fut, member_id, instance_id, client_id, client_host,
                                      rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, why)
        if group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return fut

    def _new_member_join(self, group: Group, fut: asyncio.Future[JoinResult], instance_id: str | None,
                         require_known_member_id: bool, support_skip: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], why: str) -> None:
        if group.is_(S.DEAD):
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""))
            return
        new_id = group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                log.info("group %r: static member %r rejoins in state %s: member %r replaces %r", group.group_id,
                         instance_id, group.state.value, new_id, old_id)
                self._update_static_member(group, fut, old_id, new_id, instance_id, protocols,
                                           rebalance_timeout_ms, session_timeout_ms, support_skip, why)
                return
            self._add_member_and_rebalance(group, fut, new_id, instance_id, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, why)
        elif require_known_member_id:
            timer = self.loop.call_later(session_timeout_ms / 1000, self._expire_pending_member, group, new_id)
            group.pending_members[new_id] = timer
            fut.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, fut, new_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, why)

    def _current_member_join(self, group: Group, fut: asyncio.Future[JoinResult], member_id: str,
                             instance_id: str | None, client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]],
                             why: str) -> None:
        if group.is_(S.DEAD):
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending(member_id):
            if instance_id is not None:  # a pending member is never static
                fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            self._add_member_and_rebalance(group, fut, member_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, why)
            return
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            fut.set_result(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if group.is_(S.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, fut, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, f"member {member_id} rejoins; {why}")
        elif group.is_(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # the member lost our JoinGroup response: send it again
                fut.set_result(group.join_result(member))
            else:
                self._update_member_and_rebalance(group, member, fut, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, f"member {member_id} changed metadata; {why}")
        elif group.is_(S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member_and_rebalance(group, member, fut, protocols, rebalance_timeout_ms,
                                                  session_timeout_ms, f"member {member_id} rejoins; {why}")
            else:
                fut.set_result(group.join_result(member, with_members=False))
        else:  # Empty: the member id is stale
            fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(self, group: Group, fut: asyncio.Future[JoinResult], member_id: str,
                                  instance_id: str | None, client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                                  protocols: list[tuple[str, bytes]], why: str) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, protocols)
        member.is_new = True
        if group.is_(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, fut)
        # A parked JoinGroup of a member that went away must not hold a slot for ever.
        self._schedule_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding member {member_id} (instance {instance_id}); {why}")

    def _update_member_and_rebalance(self, group: Group, member: Member, fut: asyncio.Future[JoinResult],
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, why: str) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, fut)
        self._maybe_prepare_rebalance(group, why)

    def _update_static_member(self, group: Group, fut: asyncio.Future[JoinResult], old_id: str, new_id: str,
                              instance_id: str, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                              session_timeout_ms: int, support_skip: bool, why: str) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._renew_session(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, fut)
        if group.is_(S.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed the protocol; {why}")
                return
            generation = group.generation_id
            try:
                store = self.table.store_of(group.group_id)
                store.store_group(group.group_id, group.to_stored())
            except (KafkaError, RecordFormatError) as exc:
                log.warning("group %r: cannot store the replaced static member %r: %s", group.group_id,
                            instance_id, exc)
                group.maybe_invoke_join(member, JoinResult(append_error(exc), "", generation, group.protocol_type,
                                                           group.protocol_name, current_leader))
                group.update_member(member, *old, None)
                group.replace_static_member(instance_id, new_id, old_id)
                self._renew_session(group, member)
                return

            def respond(error: int) -> None:
                if error:
                    group.maybe_invoke_join(member, JoinResult(error, member.member_id))
                elif support_skip:
                    # v9+: the leader learns it leads but skips the assignor; the group stays as it is
                    leader = group.is_leader(member.member_id)
                    group.maybe_invoke_join(member, group.join_result(member, with_members=leader,
                                                                      skip_assignment=leader))
                else:
                    # older versions: answer with the old leader id, so the member acts as a follower
                    group.maybe_invoke_join(member, group.join_result(member, with_members=False,
                                                                      leader_id=current_leader))

            log.info("group %r: static member %r rejoined without a rebalance (generation %d)", group.group_id,
                     instance_id, generation)
            self.table.after_durable(store, respond)
        elif group.is_(S.COMPLETING_REBALANCE):
            # the leader may be assigning to the old member id: rebalance again
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        # PreparingRebalance: the member simply waits for the rebalance with the others

    # ================================================================== rebalancing

    def _maybe_prepare_rebalance(self, group: Group, why: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, why)

    def _prepare_rebalance(self, group: Group, why: str) -> None:
        if group.is_(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        group.clear_pending_sync()
        if group.join_timer is not None:
            group.join_timer.cancel()
        initial = group.is_(S.EMPTY)
        group.transition_to(S.PREPARING_REBALANCE, self.table.now())
        log.info("group %r: preparing to rebalance from generation %d (%s)", group.group_id, group.generation_id, why)
        if initial:
            delay = self.initial_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            group.join_is_initial = False
            group.join_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000, self._on_join_timer, group)
            self._try_complete_join(group)

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        group.join_is_initial = True
        group.initial_delay_ms = delay_ms
        group.initial_remaining_ms = remaining_ms
        group.join_timer = self.loop.call_later(delay_ms / 1000, self._on_join_timer, group)

    def _try_complete_join(self, group: Group) -> None:
        if (group.is_(S.PREPARING_REBALANCE) and not group.join_is_initial and group.join_timer is not None
                and group.has_all_members_joined()):
            group.join_timer.cancel()
            group.join_timer = None
            self._complete_join(group)

    def _on_join_timer(self, group: Group) -> None:
        group.join_timer = None
        if not group.is_(S.PREPARING_REBALANCE):
            return
        if group.join_is_initial and group.new_member_added and group.initial_remaining_ms > 0:
            # new members keep arriving: wait a little longer, within the rebalance timeout
            group.new_member_added = False
            delay = min(self.initial_delay_ms, group.initial_remaining_ms)
            remaining = max(group.initial_remaining_ms - group.initial_delay_ms, 0)
            self._schedule_initial_join(group, delay, remaining)
            return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        group.join_is_initial = False
        gone = [m for m in group.not_yet_rejoined() if m.group_instance_id is None]
        for member in gone:
            group.remove(member.member_id)
        if gone:
            log.info("group %r: removed member(s) that did not rejoin in time: %s", group.group_id,
                     [m.member_id for m in gone])
        if group.is_(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %r: no member rejoined; waiting another rebalance timeout", group.group_id)
            group.join_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000, self._on_join_timer, group)
            return
        group.init_next_generation(self.table.now())
        if group.is_(S.EMPTY):
            log.info("group %r: generation %d is empty", group.group_id, group.generation_id)
            self.table.store_group_quietly(group)
            return
        log.info("group %r: generation %d with %d member(s), protocol %r, leader %r", group.group_id,
                 group.generation_id, group.size, group.protocol_name, group.leader_id)
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, group.join_result(member))
            self._renew_session(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000, self._on_sync_timer, group,
                                                group.generation_id)

    def _on_sync_timer(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation_id or group.state not in (S.COMPLETING_REBALANCE, S.STABLE):
            return
        if group.pending_sync:
            late = sorted(group.pending_sync)
            for member_id in late:
                group.remove(member_id)
            self._prepare_rebalance(group, f"members {late} did not send SyncGroup in time")

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: int) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncResult(ErrorCode(error), group.protocol_type if ok else None,
                                group.protocol_name if ok else None, member.assignment)
            if group.maybe_invoke_sync(member, result):
                self._renew_session(group, member)

    # ================================================================== sessions

    def _renew_session(self, group: Group, member: Member) -> None:
        """The member was heard from: its session timeout starts again."""
        self._schedule_expiration(group, member, member.session_timeout_ms)

    def _schedule_expiration(self, group: Group, member: Member, timeout_ms: int) -> None:
        member.cancel_timer()
        member.heartbeat_timer = self.loop.call_later(max(timeout_ms, 0) / 1000, self._on_session_expired,
                                                      group, member)

    def _on_session_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.is_(S.DEAD) or group.members.get(member.member_id) is not member:
            return
        if (member.awaiting_join and not member.is_new) or member.awaiting_sync:
            return  # parked in a rebalance: the rebalance timeout governs it
        log.info("group %r: member %r failed (no heartbeat within %d ms): removing it", group.group_id,
                 member.member_id, member.session_timeout_ms)
        self._remove_member_and_update_group(group, member, f"session timeout of {member.member_id}")

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.pop(member_id, None)
            log.info("group %r: pending member %r did not rejoin in time", group.group_id, member_id)
            if group.is_(S.PREPARING_REBALANCE):
                self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: Group, member: Member, why: str) -> None:
        group.maybe_invoke_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, why)
        elif group.is_(S.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================== SyncGroup

    def sync_group(self, group_id: str | None, generation_id: int, member_id: str, instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes]) -> asyncio.Future[SyncResult]:
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        error = self.table.check(group_id, allow_empty=False)
        group = self.groups.get(group_id) if error is None and group_id is not None else None
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is None and group is not None:
            if group.is_(S.DEAD):
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                error = group.validate_member(member_id, instance_id)
                if error is None:
                    if generation_id != group.generation_id:
                        error = ErrorCode.ILLEGAL_GENERATION
                    elif protocol_type is not None and protocol_type != group.protocol_type:
                        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
                    elif protocol_name is not None and protocol_name != group.protocol_name:
                        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
                    elif group.is_(S.EMPTY):
                        error = ErrorCode.UNKNOWN_MEMBER_ID
                    elif group.is_(S.PREPARING_REBALANCE):
                        error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None or group is None:
            fut.set_result(SyncResult(ErrorCode(error or ErrorCode.UNKNOWN_SERVER_ERROR)))
            return fut
        member = group.members[member_id]
        if group.is_(S.STABLE):
            group.synced(member_id)
            fut.set_result(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._renew_session(group, member)
            return fut
        # CompletingRebalance
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        group.synced(member_id)
        if group.is_leader(member_id):
            self._on_leader_assignment(group, member_id, assignments)
        return fut

    def _on_leader_assignment(self, group: Group, leader_id: str, assignments: dict[str, bytes]) -> None:
        generation = group.generation_id
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning("group %r generation %d: empty assignment for members %s", group.group_id, generation,
                        missing)
        assignment = {**assignments, **{m: b"" for m in missing}}
        log.info("group %r generation %d: assignment received from leader %r", group.group_id, generation, leader_id)
        try:
            store = self.table.store_of(group.group_id)
            store.store_group(group.group_id, group.to_stored(assignment))
        except (KafkaError, RecordFormatError) as exc:
            log.error("group %r: cannot store generation %d: %s", group.group_id, generation, exc)
            self._reset_and_propagate_assignment_error(group, append_error(exc))
            self._maybe_prepare_rebalance(group, "storing the group assignment failed")
            return

        def complete(error: int) -> None:
            if not (group.is_(S.COMPLETING_REBALANCE) and group.generation_id == generation):
                return
            if error:
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(group, "storing the group assignment failed")
                return
            self._set_and_propagate_assignment(group, assignment)
            group.transition_to(S.STABLE, self.table.now())

        self.table.after_durable(store, complete)

    # ================================================================== Heartbeat, LeaveGroup

    def heartbeat(self, group_id: str | None, member_id: str, instance_id: str | None, generation_id: int) -> int:
        error = self.table.check(group_id, allow_empty=False)
        if error is not None:
            return error
        group = self.groups.get(group_id or "")
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self._renew_session(group, member)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(S.PREPARING_REBALANCE) else ErrorCode.NONE

    def leave_group(self, group_id: str | None,
                    leaving: list[tuple[str, str | None, str | None]]) -> tuple[int, list[int]]:
        """``leaving`` is (member id, group instance id, reason) each; (group error, member errors)."""
        error = self.table.check(group_id, allow_empty=False)
        if error is not None:
            return error, []
        group = self.groups.get(group_id or "")
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors: list[int] = []
        for member_id, instance_id, reason in leaving:
            why = f"member {member_id} (instance {instance_id}) left; client reason: {reason or 'not provided'}"
            if member_id == "":
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_member_and_update_group(group, group.members[current], why)
                log.info("group %r: %s", group.group_id, why)
                errors.append(ErrorCode.NONE)
            elif group.is_pending(member_id):
                group.remove(member_id)
                if group.is_(S.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                errors.append(ErrorCode.NONE)
            else:
                error = group.validate_member(member_id, instance_id)
                if error is None:
                    self._remove_member_and_update_group(group, group.members[member_id], why)
                    log.info("group %r: %s", group.group_id, why)
                    error = ErrorCode.NONE
                errors.append(error)
        return ErrorCode.NONE, errors
