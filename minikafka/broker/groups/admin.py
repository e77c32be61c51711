"""Group administration of the group coordinator: ListGroups, DescribeGroups and DeleteGroups.

:class:`GroupAdmin` is a part the group coordinator owns; it works on the coordinator's
:class:`~minikafka.broker.groups.table.GroupTable`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from minikafka.broker.groups.group import Group, GroupState
from minikafka.broker.groups.offset_store import OffsetStore
from minikafka.broker.groups.table import GroupTable
from minikafka.broker.internal_records import append_error
from minikafka.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

#: The group type ListGroups v5 and DescribeGroups report.
CLASSIC = "classic"
#: ACL operations a group supports (READ, DELETE, DESCRIBE) for DescribeGroups' authorized operations.
GROUP_OPERATIONS = frozenset({3, 6, 8})

S = GroupState


class GroupAdmin:
    """Listing, describing and deleting the groups of ``table``."""

    def __init__(self, table: GroupTable) -> None:
        self._table = table

    def list_groups(self, states: Iterable[str], types: Iterable[str]) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) for groups passing the (case-insensitive) filters."""
        if not self._table.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if self._table.partitions.any_loading():
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC not in wanted_types:
            return ErrorCode.NONE, []
        return ErrorCode.NONE, [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self._table.groups.values()
            if not g.is_(S.DEAD) and (not wanted_states or g.state.value.lower() in wanted_states)
        ]

    def describe_group(self, group_id: str | None, api_version: int) -> tuple[int, str | None, Group | None]:
        error = self._table.check(group_id, allow_empty=True)
        if error is not None:
            return error, None, None
        group = self._table.groups.get(group_id or "")
        if group is None or group.is_(S.DEAD):
            if api_version >= 6:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
            return ErrorCode.NONE, None, None
        return ErrorCode.NONE, None, group

    async def delete_groups(self, group_ids: list[str | None]) -> dict[str | None, int]:
        table = self._table
        results: dict[str | None, int] = {}
        deleted: set[OffsetStore] = set()
        for group_id in group_ids:
            if group_id in results:
                continue
            error = table.check(group_id, allow_empty=True)
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
        for store in deleted:
            try:
                await store.sync()
            except Exception as exc:  # the deletion is in the log; only its fsync failed
                log.error("fsync after deleting groups failed: %s", exc)
        return results
