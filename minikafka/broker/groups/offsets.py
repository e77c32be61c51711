"""The committed offsets of the group coordinator: OffsetCommit, TxnOffsetCommit, OffsetFetch,
OffsetDelete, dropping the offsets of a deleted topic, and Kafka's offset retention.

:class:`GroupOffsets` is a part of :class:`~minikafka.broker.groups.coordinator.GroupCoordinator`,
which keeps the membership state machine; the offsets themselves live in the
:class:`~minikafka.broker.groups.offset_store.OffsetStore` (the log ``__consumer_offsets``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from minikafka.errors import ErrorCode, KafkaError

from .group import Group, GroupState, Member
from .offset_store import OffsetStore
from .records import OFFSETS_TOPIC, CommittedOffset, RecordFormatError

if TYPE_CHECKING:
    from minikafka.broker.transactions import TransactionCoordinator

log = logging.getLogger("minikafka.groups")

OFFSET_METADATA_TOO_LARGE = ErrorCode.OFFSET_METADATA_TOO_LARGE

TopicPartition = tuple[str, int]
S = GroupState


def store_error(exc: Exception) -> int:
    """What a failed group metadata write becomes in a response (Kafka's mapping)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT,
                ErrorCode.COORDINATOR_NOT_AVAILABLE):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def commit_error(exc: Exception) -> int:
    """What a failed offset commit write becomes in a response (Kafka's mapping)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return store_error(exc)


class GroupOffsets:
    """Committing, fetching, deleting and expiring offsets; mixed into the group coordinator,
    which provides the attributes and membership checks declared here."""

    transactions: TransactionCoordinator | None
    groups: dict[str, Group]
    active: bool
    store: OffsetStore
    retention_ms: int
    retention_check_ms: int
    metadata_max_bytes: int
    _expiry_timer: asyncio.TimerHandle | None

    if TYPE_CHECKING:
        @property
        def loop(self) -> asyncio.AbstractEventLoop: ...
        def _now(self) -> int: ...
        def _check(self, group_id: str | None, allow_empty: bool) -> int | None: ...
        @staticmethod
        def _validate_member(group: Group, member_id: str, instance_id: str | None) -> int | None: ...
        @staticmethod
        def _cancel_group_timers(group: Group) -> None: ...
        def _schedule_expiration(self, group: Group, member: Member, timeout_ms: int) -> None: ...

    def _validate_offset_commit(self, group: Group, member_id: str, instance_id: str | None,
                                generation_id: int) -> int | None:
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(S.EMPTY):
            return None  # an admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(S.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def _within_metadata_limit(self, offsets: dict[TopicPartition, CommittedOffset]
                               ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, CommittedOffset]]:
        """(NONE or OFFSET_METADATA_TOO_LARGE per partition, the offsets that may be stored)."""
        results: dict[TopicPartition, int] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, committed in offsets.items():
            if len(committed.metadata) > self.metadata_max_bytes:
                results[tp] = OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = committed
                results[tp] = ErrorCode.NONE
        return results, accepted

    async def commit_offsets(self, group_id: str | None, member_id: str, instance_id: str | None,
                             generation_id: int, offsets: dict[TopicPartition, CommittedOffset],
                             api_version: int) -> dict[TopicPartition, int]:
        """Store ``offsets``; the error code of every partition."""
        error = self._check(group_id, allow_empty=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        assert group_id is not None
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return dict.fromkeys(offsets, ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9
                                     else ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id, S.EMPTY, self._now())
            log.info("group %r created by an offset commit without group management", group_id)
        error = self._validate_offset_commit(group, member_id, instance_id, generation_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None and group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self._schedule_expiration(group, member, member.session_timeout_ms)
        results, accepted = self._within_metadata_limit(offsets)
        try:
            self.store.commit(group_id, accepted)
            await self.store.sync()
        except (KafkaError, RecordFormatError, OSError) as exc:
            log.warning("group %r: offset commit failed: %s", group_id, exc)
            code = commit_error(exc)
            results.update(dict.fromkeys(accepted, code))
        return results

    async def commit_txn_offsets(self, transactional_id: str | None, group_id: str | None, producer_id: int,
                                 producer_epoch: int, member_id: str, instance_id: str | None, generation_id: int,
                                 offsets: dict[TopicPartition, CommittedOffset],
                                 api_version: int) -> dict[TopicPartition, int]:
        """Append ``offsets`` as one transactional batch of the producer (TxnOffsetCommit); they
        become committed offsets when its COMMIT marker lands. The error code of every partition."""
        error = self._check(group_id, allow_empty=False)
        if error is not None:
            return dict.fromkeys(offsets, error)
        assert group_id is not None
        transactions = self.transactions
        if transactions is None or not transactions.active:
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, S.EMPTY, self._now())
            log.info("group %r created by a transactional offset commit", group_id)
        # The transaction must hold the group's offsets partition (AddOffsetsToTxn came first).
        verified = transactions.check_transactional_write(transactional_id, producer_id, producer_epoch,
                                                          (OFFSETS_TOPIC, 0))
        code: int
        if verified != ErrorCode.NONE:
            if verified == ErrorCode.TRANSACTION_ABORTABLE:
                code = ErrorCode.TRANSACTION_ABORTABLE if api_version >= 4 else ErrorCode.INVALID_TXN_STATE
            elif verified == ErrorCode.PRODUCER_FENCED:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
            elif verified == ErrorCode.CONCURRENT_TRANSACTIONS:
                code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # retriable, as Kafka's verification answers
            else:
                code = verified
            return dict.fromkeys(offsets, code)
        if group.is_(S.DEAD):
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if error is not None:
                return dict.fromkeys(offsets, error)
        results, accepted = self._within_metadata_limit(offsets)
        try:
            self.store.commit_transactional(group_id, producer_id, producer_epoch, accepted)
            await self.store.sync()
        except (KafkaError, RecordFormatError, OSError) as exc:
            log.warning("group %r: transactional offset commit failed: %s", group_id, exc)
            code = exc.code if isinstance(exc, KafkaError) and exc.code == ErrorCode.INVALID_PRODUCER_EPOCH \
                else commit_error(exc)
            results.update(dict.fromkeys(accepted, code))
        return results

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        return self.store.has_pending(group_id, tp)

    def fetch_offsets(self, group_id: str | None, partitions: list[TopicPartition] | None
                      ) -> tuple[int, dict[TopicPartition, CommittedOffset | None]]:
        """(group error, committed offset or None per partition); all committed ones when ``partitions`` is None."""
        error = self._check(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        assert group_id is not None
        group = self.groups.get(group_id)
        if group is not None and group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        committed = self.store.offsets(group_id)
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(committed.items()))
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str | None, partitions: list[TopicPartition]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        error = self._check(group_id, allow_empty=False)
        if error is not None:
            return error, {}
        assert group_id is not None
        group = self.groups.get(group_id)
        if group is None or group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, int] = {}
        if group.is_(S.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        try:
            removed = self.store.delete_offsets(group_id, eligible)
            await self.store.sync()
        except (KafkaError, OSError) as exc:
            return store_error(exc), {}
        results.update(dict.fromkeys(eligible, ErrorCode.NONE))
        if removed:
            log.info("group %r: deleted %d committed offset(s)", group_id, removed)
        return ErrorCode.NONE, results

    def on_topic_deleted(self, topic: str) -> None:
        """Forget the committed offsets of a deleted topic (Kafka does this on topic deletion)."""
        if not self.active:
            return
        for group_id in self.store.groups_with_offsets():
            doomed = [tp for tp in self.store.offsets(group_id) if tp[0] == topic]
            if doomed:
                try:
                    self.store.delete_offsets(group_id, doomed)
                except KafkaError as exc:
                    log.warning("group %r: cannot drop offsets of deleted topic %s: %s", group_id, topic, exc)

    def _expire_offsets(self) -> None:
        """Kafka's offset retention: drop old offsets of groups that no longer use them, then empty groups."""
        self._expiry_timer = self.loop.call_later(self.retention_check_ms / 1000, self._expire_offsets)
        if not self.active:
            return
        now = self._now()
        for group_id, group in list(self.groups.items()):
            expired = self._expired_offsets(group, now)
            try:
                if expired:
                    self.store.delete_offsets(group_id, expired)
                    log.info("group %r: %d committed offset(s) expired", group_id, len(expired))
                if group.is_(S.EMPTY) and not self.store.offsets(group_id) and not group.pending_members:
                    self.store.delete_group(group_id)
                    group.transition_to(S.DEAD, now)
                    self._cancel_group_timers(group)
                    del self.groups[group_id]
                    log.info("group %r: removed (empty, no offsets left)", group_id)
            except KafkaError as exc:
                log.warning("group %r: offset expiration failed: %s", group_id, exc)

    def _expired_offsets(self, group: Group, now: int) -> list[TopicPartition]:
        """Offsets past retention: all of an Empty group (counted from when it became empty), those
        of unsubscribed topics of a Stable consumer group, and any of a group without management."""
        keep: set[str] = set()
        if group.protocol_type and group.is_(S.EMPTY):
            def base(c: CommittedOffset) -> int:
                return group.state_timestamp
        elif group.is_consumer_group and group.subscribed is not None and group.is_(S.STABLE):
            keep = group.subscribed

            def base(c: CommittedOffset) -> int:
                return c.commit_timestamp
        elif not group.protocol_type:
            def base(c: CommittedOffset) -> int:
                return c.commit_timestamp
        else:
            return []
        return [
            tp for tp, c in self.store.offsets(group.group_id).items()
            if tp[0] not in keep and (now >= c.expire_timestamp if c.expire_timestamp >= 0
                                      else now - base(c) >= self.retention_ms)
        ]
