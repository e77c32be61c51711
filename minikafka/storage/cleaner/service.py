"""The background service: the broker's log cleaner (Kafka's ``LogCleaner``,
``core/src/main/scala/kafka/log/LogCleaner.scala``).

Threading: :meth:`LogCleaner.clean_log` runs the planning and the swap on the caller's thread
(the event loop) and the reading and writing (:func:`~.rewrite.write_cleaned`) on a worker thread,
at no more than ``log.cleaner.io.max.bytes.per.second``. The worker opens its own file
descriptors and never touches the live log; the swap checks that the cleaned segments are still
the log's."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from minikafka.errors import KafkaError
from minikafka.storage.cleaner.manager import Cleanable, CleanerConfig, LogCleanerManager, Plan
from minikafka.storage.cleaner.offset_map import AbortedRanges
from minikafka.storage.cleaner.reading import Cancelled, Throttler
from minikafka.storage.cleaner.rewrite import CleanResult, install, remove_cleaned, write_cleaned
from minikafka.storage.log import PartitionLog
from minikafka.storage.swap import StepHook

log = logging.getLogger(__name__)

#: Python keeps a key in the offset map for about this many bytes (Kafka: 24 per entry).
_MAP_BYTES_PER_KEY = 100


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    runs: int = 0
    last_run_ms: int = -1
    last_run_seconds: float = 0.0
    max_dirty_ratio: float = 0.0


class LogCleaner:
    """Cleans the compacted logs of a :class:`~minikafka.storage.log_manager.LogManager`.

    ``clean_once`` picks the dirtiest log and cleans it; the broker calls it every
    ``log.cleaner.backoff.ms`` and runs :func:`write_cleaned` in a worker thread."""

    def __init__(self, data_dir: Path, logs: Callable[[], list[PartitionLog]], now_ms: Callable[[], int],
                 *, io_bytes_per_second: float = float("inf"), dedupe_buffer_bytes: int = 134217728) -> None:
        self.manager = LogCleanerManager(Path(data_dir), logs)
        self.now_ms = now_ms
        self.io_bytes_per_second = io_bytes_per_second
        self.max_map_keys = max(1000, dedupe_buffer_bytes // _MAP_BYTES_PER_KEY)
        self.cancelled = threading.Event()
        self.stats = CleanerStats()
        self.hook: StepHook | None = None

    def dirtiest(self) -> tuple[PartitionLog, Cleanable] | None:
        """The compacted log most in need of cleaning (None if none qualifies); also updates the
        backlog metric (largest dirty ratio)."""
        found, self.stats.max_dirty_ratio = self.manager.dirtiest(self.now_ms())
        return found

    def plan(self, plog: PartitionLog, c: Cleanable) -> Plan:
        segments = [s for s in plog.segments[:-1] if s.base_offset < c.first_uncleanable]
        producers = plog.producer_state.producers()
        last = {pid: e.last_offset for pid, e in producers.items() if e.batches}
        marker_epochs = {pid: e.epoch for pid, e in producers.items() if not e.batches}
        return Plan(plog.dir, plog.name, segments, [s.size for s in segments], [s.largest_timestamp for s in segments],
                    [list(s.txn_index.entries) for s in segments],
                    AbortedRanges([t for s in plog.segments for t in s.txn_index.entries]),
                    c.first_dirty, c.first_uncleanable,
                    self.now_ms(), CleanerConfig.from_config(plog.config), last, self.max_map_keys, marker_epochs)

    def finish(self, plog: PartitionLog, result: CleanResult, started: float) -> CleanResult | None:
        """Install a written cleaning and account for it (event loop); None if the log changed
        under it and it was dropped."""
        installed = install(plog, result, self.now_ms(), self.hook)
        if installed:
            self.manager.done_cleaning(plog, result.map_end)
            self.stats.bytes_read += result.bytes_read
            self.stats.bytes_written += result.bytes_written
            self.stats.records_removed += result.records_removed
            log.info("%s: cleaned %d bytes into %d (%d records removed) up to offset %d in %.3f s",
                     plog.name, result.bytes_read, result.bytes_written, result.records_removed,
                     result.map_end, time.monotonic() - started)
        self.stats.runs += 1
        self.stats.last_run_ms = self.now_ms()
        self.stats.last_run_seconds = time.monotonic() - started
        return result if installed else None

    def failed(self, plog: PartitionLog, exc: BaseException) -> None:
        if plog.closed or isinstance(exc, Cancelled):  # stopping, or the topic was deleted meanwhile
            return
        remove_cleaned(plog.dir)
        log.error("%s: cleaning failed, the partition is left uncleaned until a restart: %s", plog.name, exc)
        self.manager.mark_uncleanable(plog)

    def clean_log(self, plog: PartitionLog, c: Cleanable) -> CleanResult | None:
        """Clean one log synchronously (tests, tools, the crash test's subprocess)."""
        started = time.monotonic()
        plan = self.plan(plog, c)
        try:
            result = write_cleaned(plan, Throttler(self.io_bytes_per_second), self.cancelled, self.hook)
        except (Cancelled, OSError, KafkaError, ValueError, IndexError) as exc:
            self.failed(plog, exc)
            return None
        return self.finish(plog, result, started)

    def clean_once(self) -> CleanResult | None:
        found = self.dirtiest()
        return self.clean_log(*found) if found is not None else None

    async def clean_once_async(self) -> CleanResult | None:
        """Like :meth:`clean_once`, the reading and writing in a worker thread."""
        import asyncio

        found = self.dirtiest()
        if found is None:
            return None
        plog, c = found
        started = time.monotonic()
        plan = self.plan(plog, c)
        try:
            result = await asyncio.to_thread(write_cleaned, plan, Throttler(self.io_bytes_per_second),
                                             self.cancelled, self.hook)
        except (Cancelled, OSError, KafkaError, ValueError, IndexError) as exc:
            self.failed(plog, exc)
            return None
        return self.finish(plog, result, started)
