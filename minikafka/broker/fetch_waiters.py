"""Wakes long-polling Fetch requests when data is appended.

A Fetch that has not yet gathered ``min_bytes`` parks a future here for the partitions it
reads; an append to one of them resolves it, and the handler re-reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from minikafka.storage.disk_format import TopicPartition

#: Where a Fetch naming no partitions waits: only the broker's stop (notify_all) wakes it early.
NO_PARTITIONS: TopicPartition = ("", -1)


class FetchWaiters:
    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def waiting(self, key: TopicPartition) -> int:
        """How many fetches wait for an append to ``key`` (tests wait for a fetch to park here)."""
        return len(self._waiters.get(key, ()))

    def notify(self, partition_log: Any) -> None:
        waiters = self._waiters.pop((partition_log.topic, partition_log.partition), None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def notify_all(self) -> None:
        for waiters in self._waiters.values():
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)
        self._waiters.clear()

    async def wait(self, keys: list[TopicPartition], timeout: float) -> None:
        """Return when any of ``keys`` is appended to, or after ``timeout`` seconds."""
        if timeout <= 0:
            return
        # A Fetch with no partitions waits its max_wait_ms too (as in Kafka); returning at once
        # would make the handler's wait loop spin and block the event loop.
        keys = keys or [NO_PARTITIONS]
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]
