"""Which log to clean, and where its cleaning has reached (Kafka's ``LogCleanerManager``,
``core/src/main/scala/kafka/log/LogCleanerManager.scala``).

A compacted partition's log splits at its *first dirty offset* (from ``cleaner-offset-checkpoint``)
and its *first uncleanable offset*; the cleaner takes the log with the highest dirty ratio, or one
whose first dirty batch is older than ``max.compaction.lag.ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from minikafka.config import LONG_MAX, topic_config
from minikafka.storage import checkpoints as ckpt
from minikafka.storage.cleaner.offset_map import AbortedRanges
from minikafka.storage.disk_format import TopicPartition
from minikafka.storage.log import PartitionLog
from minikafka.storage.segment import LogSegment
from minikafka.storage.txn_index import AbortedTxn

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class CleanerConfig:
    """The cleaner settings of one topic (and the broker's I/O bound)."""

    delete_retention_ms: int
    min_lag_ms: int
    max_lag_ms: int
    min_ratio: float
    segment_bytes: int
    index_max_bytes: int
    index_interval_bytes: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> CleanerConfig:
        setting = partial(topic_config, config)
        return cls(int(setting("delete.retention.ms")), int(setting("min.compaction.lag.ms")),
                   int(setting("max.compaction.lag.ms")), float(setting("min.cleanable.dirty.ratio")),
                   int(setting("segment.bytes")), int(setting("segment.index.bytes")),
                   int(setting("index.interval.bytes")))


def is_compacted(plog: PartitionLog) -> bool:
    return "compact" in str(plog.config.get("cleanup.policy", "delete"))


@dataclass
class Cleanable:
    """Where a log's dirty part is, and how dirty it is."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool  # max.compaction.lag.ms has passed for the first dirty batch

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable(plog: PartitionLog, checkpoint: int | None, now_ms: int) -> Cleanable:
    """The cleanable range of ``plog`` now (Kafka's ``cleanableOffsets`` and ``dirtyRatio``)."""
    cfg = CleanerConfig.from_config(plog.config)
    segments = plog.segments
    first_dirty = checkpoint if checkpoint is not None else plog.log_start_offset
    if first_dirty < plog.log_start_offset or first_dirty > plog.log_end_offset:
        first_dirty = plog.log_start_offset
    uncleanable = segments[-1].base_offset
    for seg in segments[:-1]:
        if seg.next_offset <= first_dirty:
            continue
        if cfg.min_lag_ms > 0 and seg.largest_timestamp > now_ms - cfg.min_lag_ms:
            uncleanable = seg.base_offset
            break
    lso = plog.last_stable_offset  # an open transaction's records stay dirty until it ends
    if lso < uncleanable:
        uncleanable = next(s.base_offset for s in reversed(segments) if s.base_offset <= lso)
    clean = sum(s.size for s in segments if s.next_offset <= first_dirty)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty and s.base_offset < uncleanable)
    must = False
    if cfg.max_lag_ms < LONG_MAX and dirty:
        first = next(s for s in segments if s.next_offset > first_dirty)
        ts = first.first_batch_timestamp if first.first_batch_timestamp not in (None, -1) else first.largest_timestamp
        must = now_ms - ts > cfg.max_lag_ms
    return Cleanable(first_dirty, uncleanable, clean, dirty, must)



@dataclass
class Plan:
    """What a cleaning works on, taken from the live log on the event loop."""

    directory: Path
    name: str
    segments: list[LogSegment]  # non-active segments from the log start up to the first uncleanable
    sizes: list[int]
    newest: list[int]  # each segment's largest timestamp (the worker never touches live descriptors)
    aborted: list[list[AbortedTxn]]  # each segment's aborted-transaction index entries
    aborted_ranges: AbortedRanges  # the aborted transactions of the whole log
    first_dirty: int
    end: int  # first uncleanable offset
    now_ms: int
    config: CleanerConfig
    producer_last_offsets: dict[int, int]  # producer id -> last offset of its last batch
    max_map_keys: int
    #: producer id -> epoch, for producers without cached batches: their markers of that epoch stay
    producer_marker_epochs: dict[int, int] = field(default_factory=dict)



class LogCleanerManager:
    """The cleaner's bookkeeping across logs: the first dirty offset of each partition, kept in
    ``cleaner-offset-checkpoint`` in the data directory, and the partitions a failed cleaning left
    uncleanable until a restart."""

    def __init__(self, data_dir: Path, logs: Callable[[], list[PartitionLog]]) -> None:
        self.path = Path(data_dir) / CLEANER_CHECKPOINT
        self._logs = logs
        self.checkpoints = ckpt.read_offset_checkpoint(self.path) if self.path.exists() else {}
        self._uncleanable: set[TopicPartition] = set()

    @staticmethod
    def _key(plog: PartitionLog) -> TopicPartition:
        return plog.topic, plog.partition

    def dirtiest(self, now_ms: int) -> tuple[tuple[PartitionLog, Cleanable] | None, float]:
        """The compacted log most in need of cleaning (None if none qualifies), and the largest
        dirty ratio of all (the backlog metric)."""
        best: tuple[PartitionLog, Cleanable] | None = None
        top = 0.0
        for plog in self._logs():
            if not is_compacted(plog) or self._key(plog) in self._uncleanable or plog.closed:
                continue
            c = cleanable(plog, self.checkpoints.get(self._key(plog)), now_ms)
            top = max(top, c.ratio)
            min_ratio = CleanerConfig.from_config(plog.config).min_ratio
            if c.dirty_bytes and (c.must_clean or c.ratio >= min_ratio):
                if best is None or c.must_clean > best[1].must_clean or c.ratio > best[1].ratio:
                    best = (plog, c)
        return best, top

    def done_cleaning(self, plog: PartitionLog, end_offset: int) -> None:
        """``plog`` is clean up to ``end_offset``: checkpointed at once."""
        self.checkpoints[self._key(plog)] = end_offset
        self.write_checkpoint()

    def mark_uncleanable(self, plog: PartitionLog) -> None:
        self._uncleanable.add(self._key(plog))

    def write_checkpoint(self) -> None:
        live = {self._key(p) for p in self._logs()}
        self.checkpoints = {k: v for k, v in self.checkpoints.items() if k in live}
        ckpt.write_offset_checkpoint(self.path, self.checkpoints)
