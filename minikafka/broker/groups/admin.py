"""Group administration of the group coordinator: ListGroups, DescribeGroups and DeleteGroups.

:class:`GroupAdmin` is a part the group coordinator owns; it works on the coordinator's
:class:`~minikafka.broker.groups.table.GroupTable`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from minikafka.broker.groups.consumer_group import ConsumerGroup
from minikafka.broker.groups.group import Group, GroupState
from minikafka.broker.groups.offset_store import OffsetStore
from minikafka.broker.groups.table import GroupTable
from minikafka.broker.internal_records import append_error
from minikafka.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: The group types ListGroups v5 reports.
CLASSIC = "classic"
CONSUMER = "consumer"
#: ACL operations a group supports (READ, DELETE, DESCRIBE) for DescribeGroups' authorized operations.
GROUP_OPERATIONS = frozenset({3, 6, 8})

S = GroupState


class GroupAdmin:
    """Listing, describing and deleting the groups of ``table``."""

    def __init__(self, table: GroupTable) -> None:
        self._table = table

    def list_groups(self, states: Iterable[str], types: Iterable[str]
                    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]) for the groups of both protocols
        passing the (case-insensitive) filters."""
        if not self._table.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if self._table.partitions.any_loading():
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        listed = [(g.group_id, g.protocol_type or "", g.state.value, CLASSIC)
                  for g in self._table.groups.values() if not g.is_(S.DEAD)]
        listed += [(g.group_id, CONSUMER, g.state, CONSUMER) for g in self._table.consumer_groups.values()]
        return ErrorCode.NONE, [
            entry for entry in listed
            if (not wanted_states or entry[2].lower() in wanted_states)
            and (not wanted_types or entry[3] in wanted_types)
        ]

    def describe_group(self, group_id: str | None, api_version: int) -> tuple[int, str | None, Group | None]:
        error = self._table.check(group_id, allow_empty=True)
        if error is not None:
            return error, None, None
        if group_id in self._table.consumer_groups:  # Kafka: Dead, and from v6 an error
            if api_version >= 6:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.", None
            return ErrorCode.NONE, None, None
        group = self._table.groups.get(group_id or "")
        if group is None or group.is_(S.DEAD):
            if api_version >= 6:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
            return ErrorCode.NONE, None, None
        return ErrorCode.NONE, None, group

    def describe_consumer_group(self, group_id: str | None) -> tuple[int, str | None, ConsumerGroup | None]:
        """ConsumerGroupDescribe of one group: (error, message, the group)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, None, None
        error = self._table.check(group_id, allow_empty=False)
        if error is not None:
            return error, None, None
        group = self._table.consumer_groups.get(group_id)
        if group is not None:
            return ErrorCode.NONE, None, group
        classic = self._table.groups.get(group_id)
        if classic is not None and not classic.is_(S.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None

    async def delete_groups(self, group_ids: list[str | None]) -> dict[str | None, int]:
        table = self._table
        results: dict[str | None, int] = {}
        deleted: set[OffsetStore] = set()
        for group_id in group_ids:
            if group_id in results:
                continue
            error = table.check(group_id, allow_empty=True)
            consumer = table.consumer_groups.get(group_id or "") if error is None else None
            if consumer is not None:
                results[group_id] = self._delete_consumer_group(consumer, deleted)
                continue
            group = table.groups.get(group_id or "") if error is None else None
            if error is None and (group is None or group.is_(S.DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif error is None and group is not None and not group.is_(S.EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            if error is None and group is not None:
                assert group_id is not None
                try:
                    store = table.store_of(group_id)
                    removed = store.delete_group(group_id)
                except (KafkaError, OSError) as exc:
                    error = append_error(exc)
                else:
                    table.remove(group)
                    deleted.add(store)
                    log.info("group %r deleted with %d committed offset(s)", group_id, removed)
                    error = ErrorCode.NONE
            results[group_id] = error if error is not None else ErrorCode.NONE
        await self._sync(deleted)
        return results

    def _delete_consumer_group(self, group: ConsumerGroup, deleted: set[OffsetStore]) -> int:
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        try:
            removed = self._table.delete_consumer_group(group, with_offsets=True)
        except (KafkaError, OSError) as exc:
            return append_error(exc)
        deleted.add(self._table.store_of(group.group_id))
        log.info("consumer group %r deleted with %d committed offset(s)", group.group_id, removed)
        return ErrorCode.NONE

    @staticmethod
    async def _sync(deleted: set[OffsetStore]) -> None:
        for store in deleted:
            try:
                await store.sync()
            except Exception as exc:  # the deletion is in the log; only its fsync failed
                log.error("fsync after deleting groups failed: %s", exc)
