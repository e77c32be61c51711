"""The committed offsets of the group coordinator: OffsetCommit, TxnOffsetCommit, OffsetFetch,
OffsetDelete, dropping the offsets of a deleted topic, and Kafka's offset retention.

:class:`GroupOffsets` is a part the group coordinator owns; it shares the coordinator's
:class:`~minikafka.broker.groups.table.GroupTable` (the groups and the offset store of each
partition) and is given what it needs from the membership state machine (renewing a member's
session) and, per TxnOffsetCommit, from the transaction coordinator (whether the producer's
transaction holds the group's offsets partition).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from minikafka.broker.groups.group import Group, GroupState, Member
from minikafka.broker.groups.offset_store import OffsetStore
from minikafka.broker.groups.records import OFFSETS_TOPIC, CommittedOffset
from minikafka.broker.groups.table import GroupTable
from minikafka.broker.internal_records import RecordFormatError, append_error
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.disk_format import TopicPartition

log = logging.getLogger(__name__)

OFFSET_METADATA_TOO_LARGE = ErrorCode.OFFSET_METADATA_TOO_LARGE

#: The transaction coordinator's verdict on a transactional write of the committing producer to
#: a partition: NONE or the error (``TransactionCoordinator.check_transactional_write``).
TxnWriteCheck = Callable[[TopicPartition], int]
S = GroupState


def commit_error(exc: Exception) -> int:
    """What a failed offset commit write becomes in a response (Kafka's mapping)."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return append_error(exc)


class GroupOffsets:
    """Committing, fetching, deleting and expiring the offsets of the groups of ``table``."""

    def __init__(self, table: GroupTable, renew_session: Callable[[Group, Member], None], *, retention_ms: int,
                 retention_check_ms: int, metadata_max_bytes: int) -> None:
        """``renew_session`` restarts a member's session timeout (a commit counts as a heartbeat)."""
        self._table = table
        self._renew_session = renew_session
        self.retention_ms = retention_ms
        self.retention_check_ms = retention_check_ms
        self.metadata_max_bytes = metadata_max_bytes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Check for expired offsets every ``offsets.retention.check.interval.ms`` from now on."""
        self._loop = loop
        self._expiry_timer = loop.call_later(self.retention_check_ms / 1000, self.expire_offsets)

    def close(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None

    def _validate_offset_commit(self, group: Group, member_id: str, instance_id: str | None,
                                generation_id: int) -> int | None:
        if group.is_(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_(S.EMPTY):
            return None  # an admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
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
        table = self._table
        error = table.check(group_id, allow_empty=True)
        if error is not None:
            return dict.fromkeys(offsets, error)
        assert group_id is not None
        consumer = table.consumer_groups.get(group_id)
        if consumer is not None:  # a KIP-848 group: checked against member epochs
            error = consumer.validate_commit(member_id, generation_id, api_version, transactional=False)
            if error is not None:
                return dict.fromkeys(offsets, error)
        else:
            group = table.groups.get(group_id)
            if group is None:
                if generation_id >= 0:
                    return dict.fromkeys(offsets, ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9
                                         else ErrorCode.ILLEGAL_GENERATION)
                group = table.create(group_id, "an offset commit without group management")
            error = self._validate_offset_commit(group, member_id, instance_id, generation_id)
            if error is not None:
                return dict.fromkeys(offsets, error)
            member = group.members.get(member_id)
            if member is not None and group.state in (S.STABLE, S.PREPARING_REBALANCE):
                self._renew_session(group, member)
        results, accepted = self._within_metadata_limit(offsets)
        try:
            store = table.store_of(group_id)
            store.commit(group_id, accepted)
            await store.sync()
        except (KafkaError, RecordFormatError, OSError) as exc:
            log.warning("group %r: offset commit failed: %s", group_id, exc)
            code = commit_error(exc)
            results.update(dict.fromkeys(accepted, code))
        return results

    async def commit_txn_offsets(self, txn_check: TxnWriteCheck, group_id: str | None, producer_id: int,
                                 producer_epoch: int, member_id: str, instance_id: str | None, generation_id: int,
                                 offsets: dict[TopicPartition, CommittedOffset],
                                 api_version: int) -> dict[TopicPartition, int]:
        """Append ``offsets`` as one transactional batch of the producer (TxnOffsetCommit); they
        become committed offsets when its COMMIT marker lands. ``txn_check`` is the transaction
        coordinator's verdict on the producer's transaction. The error code of every partition."""
        table = self._table
        error = table.check(group_id, allow_empty=False)
        if error is not None:
            return dict.fromkeys(offsets, error)
        assert group_id is not None
        consumer = table.consumer_groups.get(group_id)
        group = table.groups.get(group_id)
        if group is None and consumer is None:
            group = table.create(group_id, "a transactional offset commit")
        # The transaction must hold the group's offsets partition (AddOffsetsToTxn came first).
        verified = txn_check((OFFSETS_TOPIC, table.partitions.partition_of(group_id)))
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
        if consumer is not None:  # a KIP-848 group: checked against member epochs
            error = consumer.validate_commit(member_id, generation_id, api_version, transactional=True)
            if error is not None:
                return dict.fromkeys(offsets, error)
        elif group is None or group.is_(S.DEAD):
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif generation_id >= 0 or member_id != "" or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            if error is not None:
                return dict.fromkeys(offsets, error)
        results, accepted = self._within_metadata_limit(offsets)
        try:
            store = table.store_of(group_id)
            store.commit_transactional(group_id, producer_id, producer_epoch, accepted)
            await store.sync()
        except (KafkaError, RecordFormatError, OSError) as exc:
            log.warning("group %r: transactional offset commit failed: %s", group_id, exc)
            code = exc.code if isinstance(exc, KafkaError) and exc.code == ErrorCode.INVALID_PRODUCER_EPOCH \
                else commit_error(exc)
            results.update(dict.fromkeys(accepted, code))
        return results

    def has_pending_txn_offsets(self, group_id: str, tp: TopicPartition) -> bool:
        return self._table.store_of(group_id).has_pending(group_id, tp)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT or ABORT marker landed on ``partition`` of ``__consumer_offsets``:
        its transactional offsets there become committed or are dropped (the transaction
        coordinator reports every marker it writes there)."""
        store = self._table.stores.get(partition)
        if store is not None:  # not loaded here: the marker is applied when the partition is loaded
            store.complete_transaction(producer_id, commit)

    def fetch_offsets(self, group_id: str | None, partitions: list[TopicPartition] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[int, dict[TopicPartition, CommittedOffset | None]]:
        """(group error, committed offset or None per partition); all committed ones when
        ``partitions`` is None. A member of a KIP-848 group that names itself (OffsetFetch v9+)
        must be at its current epoch."""
        error = self._table.check(group_id, allow_empty=True)
        if error is not None:
            return error, {}
        assert group_id is not None
        consumer = self._table.consumer_groups.get(group_id)
        error = consumer.validate_fetch(member_id, member_epoch) if consumer is not None else None
        if error is not None:
            return error, {}
        group = self._table.groups.get(group_id)
        if group is not None and group.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        committed = self._table.store_of(group_id).offsets(group_id)
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(committed.items()))
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str | None, partitions: list[TopicPartition]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        error = self._table.check(group_id, allow_empty=False)
        if error is not None:
            return error, {}
        assert group_id is not None
        group = self._table.groups.get(group_id)
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
            store = self._table.store_of(group_id)
            removed = store.delete_offsets(group_id, eligible)
            await store.sync()
        except (KafkaError, OSError) as exc:
            return append_error(exc), {}
        results.update(dict.fromkeys(eligible, ErrorCode.NONE))
        if removed:
            log.info("group %r: deleted %d committed offset(s)", group_id, removed)
        return ErrorCode.NONE, results

    def on_topic_deleted(self, topic: str) -> None:
        """Forget the committed offsets of a deleted topic (Kafka does this on topic deletion)."""
        if not self._table.active:
            return
        for store in self._table.stores.values():
            for group_id in store.groups_with_offsets():
                doomed = [tp for tp in store.offsets(group_id) if tp[0] == topic]
                if doomed:
                    try:
                        store.delete_offsets(group_id, doomed)
                    except KafkaError as exc:
                        log.warning("group %r: cannot drop offsets of deleted topic %s: %s", group_id, topic, exc)

    def expire_offsets(self) -> None:
        """Kafka's offset retention: drop old offsets of groups that no longer use them, then empty groups."""
        assert self._loop is not None, "the offsets are not started"
        self._expiry_timer = self._loop.call_later(self.retention_check_ms / 1000, self.expire_offsets)
        table = self._table
        if not table.active:
            return
        now = table.now()
        for group_id, group in list(table.groups.items()):
            try:
                store = table.store_of(group_id)
                expired = self._expired_offsets(group, store, now)
                if expired:
                    store.delete_offsets(group_id, expired)
                    log.info("group %r: %d committed offset(s) expired", group_id, len(expired))
                if group.is_(S.EMPTY) and not store.offsets(group_id) and not group.pending_members:
                    store.delete_group(group_id)
                    table.remove(group)
                    log.info("group %r: removed (empty, no offsets left)", group_id)
            except KafkaError as exc:
                log.warning("group %r: offset expiration failed: %s", group_id, exc)

    def _expired_offsets(self, group: Group, store: OffsetStore, now: int) -> list[TopicPartition]:
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
            tp for tp, c in store.offsets(group.group_id).items()
            if tp[0] not in keep and (now >= c.expire_timestamp if c.expire_timestamp >= 0
                                      else now - base(c) >= self.retention_ms)
        ]
