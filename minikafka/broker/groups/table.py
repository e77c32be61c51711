"""The groups the group coordinator serves: those of the ``__consumer_offsets`` partitions it has
loaded, with each partition's offset store.

The coordinator's parts (the membership state machine in :mod:`.coordinator`, the offsets in
:mod:`.offsets`, administration in :mod:`.admin`) share one :class:`GroupTable`, which also holds
the check every group API starts with: a valid group id, a running coordinator, and the group's
partition loaded here (COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR when this
broker does not serve it; see :mod:`minikafka.broker.coordinator_runtime`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from minikafka.broker.coordinator_runtime import CoordinatorPartitions, CoordinatorTasks
from minikafka.broker.groups.consumer_group import ConsumerGroup
from minikafka.broker.groups.group import Group, GroupState
from minikafka.broker.groups.offset_store import OffsetStore
from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.broker.internal_records import RecordFormatError, append_error, encodable
from minikafka.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class GroupTable:
    """Every group of the partitions loaded here, by id, and the store of each such partition."""

    def __init__(self, stores: Callable[[int], OffsetStore], partitions: int, clock: Callable[[], float]) -> None:
        """``stores`` makes the (not yet loaded) store of a partition of ``__consumer_offsets``
        (of ``partitions``); ``clock`` is the broker's."""
        self._make_store = stores
        self._clock = clock
        self.partitions = CoordinatorPartitions(OFFSETS_TOPIC, partitions)
        self.tasks = CoordinatorTasks()
        self.stores: dict[int, OffsetStore] = {}
        self.groups: dict[str, Group] = {}
        #: the KIP-848 consumer groups (a group id is in one of the two tables at most)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        #: False until the coordinator has started and again once it is closed
        self.active = False

    def now(self) -> int:
        return int(self._clock())

    def check(self, group_id: str | None, allow_empty: bool) -> int | None:
        """None when a request for ``group_id`` may go on; else its error, in Kafka's order."""
        if group_id is None or (not allow_empty and group_id == "") or not encodable(group_id):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.partitions.error_for(group_id)

    def store_of(self, group_id: str) -> OffsetStore:
        """The store of the group's partition; KafkaError(NOT_COORDINATOR) when it is not loaded."""
        return self.partitions.store_of(self.stores, group_id)

    def store_group_quietly(self, group: Group) -> None:
        """Store the group's metadata; a failure is only logged (nobody waits for this write)."""
        try:
            self.store_of(group.group_id).store_group(group.group_id, group.to_stored())
        except (KafkaError, RecordFormatError) as exc:
            log.warning("group %r: cannot store metadata of generation %d: %s", group.group_id,
                        group.generation_id, exc)

    def after_durable(self, store: OffsetStore, action: Callable[[int], None]) -> None:
        """Run ``action(error)`` once what was just appended to ``store`` is durable (at once
        without --fsync on a single broker); a failed wait is NOT_COORDINATOR, or in a cluster
        what Kafka answers for it (:func:`~minikafka.broker.internal_records.append_error`)."""
        if not store.waits:
            action(ErrorCode.NONE)
            return

        async def run() -> None:
            try:
                await store.sync()
            except KafkaError as exc:
                log.warning("%s: a write was not replicated: %s", OFFSETS_TOPIC, exc)
                action(append_error(exc))
                return
            except Exception as exc:
                log.error("fsync of %s failed: %s", OFFSETS_TOPIC, exc)
                action(ErrorCode.NOT_COORDINATOR)
                return
            action(ErrorCode.NONE)

        self.tasks.spawn(run())

    def create(self, group_id: str, why: str | None = None) -> Group:
        """A new Empty group (``why``, when given, is logged)."""
        group = self.groups[group_id] = Group(group_id, GroupState.EMPTY, self.now())
        if why is not None:
            log.info("group %r created by %s", group_id, why)
        return group

    def delete_consumer_group(self, group: ConsumerGroup, with_offsets: bool) -> int:
        """Tombstone an empty consumer group's records (and its committed offsets) in one batch and
        forget it; how many offsets were removed. KafkaError when the append fails."""
        store = self.store_of(group.group_id)
        offsets = store.offset_tombstones(group.group_id) if with_offsets else []
        store.append_consumer(group.tombstones(), offsets)
        del self.consumer_groups[group.group_id]
        return len(offsets)

    def remove(self, group: Group) -> None:
        """Forget a deleted group: Dead, its timers stopped."""
        group.transition_to(GroupState.DEAD, self.now())
        group.cancel_timers()
        del self.groups[group.group_id]

    def load(self, partition: int) -> list[Group]:
        """Replay the store of ``partition`` and take its groups; the groups that were stored with
        members. Raises what opening the store raises."""
        store = self._make_store(partition)
        stored = store.load()
        now = self.now()
        with_members = []
        for group_id, value in stored.items():
            group = self.groups[group_id] = Group.from_stored(group_id, value, now)
            if group.members:
                with_members.append(group)
        for record in store.consumer_records():
            consumer = self.consumer_groups.get(record.key.group)
            if consumer is None:
                consumer = self.consumer_groups[record.key.group] = ConsumerGroup(record.key.group)
            consumer.replay(record)
        for group_id in store.groups_with_offsets():
            if group_id not in self.groups and group_id not in self.consumer_groups:
                self.create(group_id)
        self.stores[partition] = store
        return with_members

    def unload(self, partition: int) -> int:
        """Stop serving ``partition``: its groups are shut (parked requests get NOT_COORDINATOR)
        and forgotten with its store; how many groups there were."""
        self.partitions.remove(partition)
        self.stores.pop(partition, None)
        gone = [g for g in self.groups.values() if self.partitions.partition_of(g.group_id) == partition]
        for group in gone:
            group.shut(ErrorCode.NOT_COORDINATOR)
            del self.groups[group.group_id]
        consumers = [g for g in self.consumer_groups if self.partitions.partition_of(g) == partition]
        for group_id in consumers:
            del self.consumer_groups[group_id]
        log.info("unloaded %d group(s) of %s-%d", len(gone) + len(consumers), OFFSETS_TOPIC, partition)
        return len(gone) + len(consumers)
