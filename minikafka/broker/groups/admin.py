"""Group administration of the group coordinator: ListGroups, DescribeGroups and DeleteGroups.

:class:`GroupAdmin` is a part of :class:`~minikafka.broker.groups.coordinator.GroupCoordinator`,
which keeps the membership state machine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from minikafka.errors import ErrorCode, KafkaError

from .group import Group, GroupState
from .offset_store import OffsetStore
from .offsets import store_error

log = logging.getLogger("minikafka.groups")

#: The group type ListGroups v5 and DescribeGroups report.
CLASSIC = "classic"
#: ACL operations a group supports (READ, DELETE, DESCRIBE) for DescribeGroups' authorized operations.
GROUP_OPERATIONS = frozenset({3, 6, 8})

S = GroupState


class GroupAdmin:
    """Listing, describing and deleting groups; mixed into the group coordinator, which provides
    the attributes and checks declared here."""

    groups: dict[str, Group]
    active: bool
    store: OffsetStore

    if TYPE_CHECKING:
        def _now(self) -> int: ...
        def _check(self, group_id: str | None, allow_empty: bool) -> int | None: ...
        @staticmethod
        def _cancel_group_timers(group: Group) -> None: ...

    def list_groups(self, states: Iterable[str], types: Iterable[str]) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group id, protocol type, state)]) for groups passing the (case-insensitive) filters."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        if wanted_types and CLASSIC not in wanted_types:
            return ErrorCode.NONE, []
        return ErrorCode.NONE, [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_(S.DEAD) and (not wanted_states or g.state.value.lower() in wanted_states)
        ]

    def describe_group(self, group_id: str | None, api_version: int) -> tuple[int, str | None, Group | None]:
        error = self._check(group_id, allow_empty=True)
        if error is not None:
            return error, None, None
        group = self.groups.get(group_id or "")
        if group is None or group.is_(S.DEAD):
            if api_version >= 6:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
            return ErrorCode.NONE, None, None
        return ErrorCode.NONE, None, group

    async def delete_groups(self, group_ids: list[str | None]) -> dict[str | None, int]:
        results: dict[str | None, int] = {}
        deleted = False
        for group_id in group_ids:
            if group_id in results:
                continue
            error = self._check(group_id, allow_empty=True)
            group = self.groups.get(group_id or "") if error is None else None
            if error is None and (group is None or group.is_(S.DEAD)):
                error = ErrorCode.GROUP_ID_NOT_FOUND
            elif error is None and group is not None and not group.is_(S.EMPTY):
                error = ErrorCode.NON_EMPTY_GROUP
            if error is None and group is not None:
                assert group_id is not None
                try:
                    removed = self.store.delete_group(group_id)
                except (KafkaError, OSError) as exc:
                    error = store_error(exc)
                else:
                    group.transition_to(S.DEAD, self._now())
                    self._cancel_group_timers(group)
                    del self.groups[group_id]
                    deleted = True
                    log.info("group %r deleted with %d committed offset(s)", group_id, removed)
                    error = ErrorCode.NONE
            results[group_id] = error if error is not None else ErrorCode.NONE
        if deleted:
            try:
                await self.store.sync()
            except Exception as exc:  # the deletion is in the log; only its fsync failed
                log.error("fsync after deleting groups failed: %s", exc)
        return results
