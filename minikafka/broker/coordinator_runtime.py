"""What both coordinators run on: the partitions of their internal topic they serve, and their tasks.

A coordinator (of groups or of transactional ids) lives with the leader of an internal topic's
partition: it loads that partition's state when it becomes the leader and unloads it when it
stops being one (Kafka: ``GroupCoordinator.onElection``/``onResignation``,
``TransactionCoordinator.onElection``/``onResignation``). A key (a group id, a transactional id)
belongs to one partition (:func:`~minikafka.broker.internal_records.partition_for`); a request for
a key of a partition that is still loading gets COORDINATOR_LOAD_IN_PROGRESS, one for a partition
this broker does not serve NOT_COORDINATOR, and the client finds the coordinator again or retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from enum import Enum
from typing import Any, TypeVar

from minikafka.broker.internal_records import partition_for
from minikafka.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartitionState(Enum):
    LOADING = "loading"
    LOADED = "loaded"


class CoordinatorPartitions:
    """The state of each partition of the internal topic ``topic`` of ``count`` partitions on this
    broker (a partition missing from it is not served here)."""

    def __init__(self, topic: str, count: int) -> None:
        self.topic = topic
        self.count = count
        self._states: dict[int, PartitionState] = {}
        #: how many loads of each partition began: a load that was overtaken by an unload and a
        #: new load must not replay as well (its state would be there twice)
        self._loads: dict[int, int] = {}

    async def load(self, partition: int, replay: Callable[[], T]) -> T | None:
        """Load ``partition`` with ``replay`` (which reads its log into the coordinator's memory):
        requests already waiting are answered first (LOAD_IN_PROGRESS for this partition's keys),
        as Kafka loads on its own thread. ``replay``'s result, or None when the partition cannot be
        opened or was unloaded before its replay began."""
        self.begin_loading(partition)
        this_load = self._loads[partition]
        await asyncio.sleep(0)
        if not self.is_loading(partition) or self._loads[partition] != this_load:
            return None
        try:
            result = replay()
        except (KafkaError, OSError, ValueError) as exc:
            log.error("cannot load %s-%d: %s", self.topic, partition, exc)
            self.remove(partition)
            return None
        self.finish_loading(partition)
        return result

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.count)

    def check(self, partition: int) -> None:
        if not 0 <= partition < self.count:
            raise ValueError(f"partition {partition} is not one of the {self.count} partition(s)")

    def begin_loading(self, partition: int) -> None:
        """Mark ``partition`` loading; ValueError when it is not a partition of the topic or is
        already served here (unload it first: a second replay would duplicate its state)."""
        self.check(partition)
        if partition in self._states:
            raise ValueError(f"{self.topic}-{partition} is already {self._states[partition].value}")
        self._states[partition] = PartitionState.LOADING
        self._loads[partition] = self._loads.get(partition, 0) + 1

    def finish_loading(self, partition: int) -> bool:
        """Mark a loading partition loaded; False when it was unloaded while it loaded."""
        if self._states.get(partition) is not PartitionState.LOADING:
            return False
        self._states[partition] = PartitionState.LOADED
        return True

    def remove(self, partition: int) -> bool:
        """Stop serving ``partition``; whether it was served (loaded or loading)."""
        return self._states.pop(partition, None) is not None

    def served(self) -> list[int]:
        """The partitions served here (loaded or loading)."""
        return sorted(self._states)

    def is_loaded(self, partition: int) -> bool:
        return self._states.get(partition) is PartitionState.LOADED

    def is_loading(self, partition: int) -> bool:
        return self._states.get(partition) is PartitionState.LOADING

    def serves(self, key: str) -> bool:
        """Whether this broker coordinates ``key`` (its partition loaded or loading here)."""
        return self.partition_of(key) in self._states

    def store_of(self, stores: Mapping[int, T], key: str) -> T:
        """The store (one of ``stores``, by partition) of ``key``'s partition; KafkaError
        NOT_COORDINATOR when that partition is not loaded here."""
        store = stores.get(self.partition_of(key))
        if store is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"{key!r} is not coordinated here ({self.topic})")
        return store

    def any_loading(self) -> bool:
        return PartitionState.LOADING in self._states.values()

    def error_for(self, key: str) -> int | None:
        """None when the partition of ``key`` is loaded here; else what a request for it gets."""
        state = self._states.get(self.partition_of(key))
        if state is PartitionState.LOADED:
            return None
        if state is PartitionState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR


class CoordinatorTasks:
    """The event loop a coordinator runs on and the tasks it spawns there (a write waiting for
    its fsync, markers being written), cancelled when it closes. Every request handler and timer
    runs on that loop, so a coordinator needs no locks."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        """Run on the running loop from now on."""
        self._loop = asyncio.get_running_loop()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "the coordinator is not started"
        return self._loop

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
