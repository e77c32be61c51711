"""Per-partition idempotent-producer state: the rules that make a retried batch a duplicate.

For every producer id that wrote to the partition, minikafka remembers its epoch and its last
five batches (sequence range, offsets, max timestamp). Before a client batch is written,
:meth:`ProducerStateManager.check` decides, in Kafka's order (docs/semantics.md#producer-check-order), whether it is a
duplicate of one of those batches (answered with the original offsets, nothing written), a
fenced zombie (47), out of sequence (45), or new data. After the write,
:meth:`ProducerStateManager.update` records it.

Transactions: the first transactional batch of a producer opens its transaction on the partition
(its first offset is kept in the entry and in an ordered map of open transactions), and a
COMMIT/ABORT marker (:meth:`ProducerStateManager.apply_marker`, checked first by
:meth:`ProducerStateManager.check_marker`) closes it. The oldest open transaction's first offset
(:meth:`ProducerStateManager.first_unstable_offset`) bounds what read_committed consumers see.
Producers with an open transaction never expire.

Two things go beyond Kafka on purpose (docs/semantics.md#differences):

* snapshots keep the whole window, so a retry of any of the last five batches is still
  recognised after a restart;
* expiry runs on the broker's clock from the last append (``last_append_ms``), not on record
  timestamps the client chose.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from minikafka.clock import wall_clock_ms
from minikafka.config import default_setting
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage import snapshot as snapshots
from minikafka.storage.batch import CONTROL_FLAG, INT32_MAX, TRANSACTIONAL_FLAG, BatchHeader, last_sequence

log = logging.getLogger(__name__)

#: Batches remembered per producer; matches the clients' limit of 5 in-flight requests.
NUM_BATCHES_TO_RETAIN = 5
DEFAULT_EXPIRATION_MS = int(default_setting("producer.id.expiration.ms"))
#: At most this many snapshot files per partition; older ones only shorten a rare fallback.
DEFAULT_MAX_SNAPSHOTS = 5


@dataclass(slots=True)
class BatchMetadata:
    """One appended batch of a producer: what a retry must match and what it is answered with."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's maxTimestamp, returned as log_append_time_ms for a duplicate


def new_window() -> list[BatchMetadata]:
    # A plain list, trimmed by hand: a deque(maxlen=5) costs about 650 bytes more per producer.
    return []


@dataclass(slots=True)
class ProducerStateEntry:
    """What the partition knows about one producer id; ``batches`` is oldest first."""

    producer_id: int
    epoch: int
    batches: list[BatchMetadata] = field(default_factory=new_window)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1  # maxTimestamp of the last batch (reported by DescribeProducers)
    last_append_ms: int = -1  # broker clock at the last append; drives expiry

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def has_open_transaction(self) -> bool:
        return self.current_txn_first_offset >= 0


class ProducerStateManager:
    """Producer entries of one partition, plus the snapshot files in its directory.

    ``map_end_offset`` is the log offset the state reflects: every batch below it has been
    passed to :meth:`update` (or is covered by the snapshot it was loaded from). A new manager
    is empty; the partition log calls :meth:`truncate_and_reload` when it opens. Not
    thread-safe: call it only from the code that appends (snapshots included).
    """

    def __init__(
        self,
        partition_dir: Path,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
        now_ms: Callable[[], int] = wall_clock_ms,
        *,
        max_snapshots: int = DEFAULT_MAX_SNAPSHOTS,
        max_entries: int | None = None,
        on_snapshot: Callable[[], None] | None = None,
    ) -> None:
        self.partition_dir = Path(partition_dir)
        self.expiration_ms = expiration_ms
        self.max_snapshots = max(1, max_snapshots)
        #: ``minikafka.producer.state.max.entries``; None leaves the state bounded only by expiry.
        self.max_entries = max_entries
        self._last_full_warning = -3600.0
        #: called after each snapshot file is written (the partition log passes it on to the broker's metrics)
        self.on_snapshot = on_snapshot
        self._now_ms = now_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._view = MappingProxyType(self._producers)
        # Open transactions: first offset -> producer id, plus a min-heap of those first offsets
        # (entries whose transaction closed are dropped lazily when they reach the top).
        self._ongoing: dict[int, int] = {}
        self._ongoing_heap: list[int] = []
        self.map_end_offset = 0
        self._last_snap_offset: int | None = None
        self._dirty = True  # state changed since the snapshot at _last_snap_offset was written/read
        self.counters: dict[str, int] = {"duplicates": 0, "out_of_order": 0, "fenced": 0, "expired": 0}

    # -- the produce path ----------------------------------------------------------------------

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Judge a client batch before it is written; state is never changed.

        Returns the cached batch it duplicates, or None if it may be appended (including
        batches without a producer id). Raises :class:`KafkaError` 47, 45 or 48, or 89 when a
        new producer finds the state full (:meth:`_admit`, which may expire entries).
        """
        pid = header.producer_id
        if pid < 0:
            return None
        entry = self._producers.get(pid)
        if entry is None:
            self._admit()
            return None  # unknown or expired producer: any epoch and sequence (KIP-360)
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        if epoch == entry.epoch:
            delta = header.last_offset_delta
            last_seq = first_seq if delta == 0 else last_sequence(first_seq, delta)
            for cached in entry.batches:
                if cached.first_seq == first_seq and cached.last_seq == last_seq:
                    self.counters["duplicates"] += 1
                    return cached
            if entry.epoch != -1:
                batches = entry.batches
                prev = batches[-1].last_seq if batches else -1
                if first_seq != prev + 1 and not (first_seq == 0 and prev == INT32_MAX):
                    self.counters["out_of_order"] += 1
                    raise KafkaError(
                        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow {prev}",
                    )
        elif epoch < entry.epoch:
            self.counters["fenced"] += 1
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {pid}: epoch {epoch} is older than the current epoch {entry.epoch}",
            )
        elif first_seq != 0 and entry.epoch != -1:
            self.counters["out_of_order"] += 1
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid}: new epoch {epoch} must start at sequence 0, not {first_seq}",
            )
        if entry.current_txn_first_offset >= 0 and not header.attributes & TRANSACTIONAL_FLAG:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {pid} has an open transaction; non-transactional batch refused",
            )
        return None

    def _admit(self) -> None:
        """Refuse a producer id new to the partition when the state already holds
        ``max_entries`` producers (after forgetting expired ones).

        Kafka bounds producer state only by time (``producer.id.expiration.ms``), so a client that
        invents producer ids could grow it without limit. minikafka keeps the entries it has — the
        exactness of the producers already writing is the point — and answers the newcomer
        THROTTLING_QUOTA_EXCEEDED instead.
        """
        limit = self.max_entries
        if limit is None or len(self._producers) < limit:
            return
        self.expire()
        count = len(self._producers)
        if count < limit:
            return
        name = self.partition_dir.name
        now = time.monotonic()
        if now - self._last_full_warning >= 60:
            self._last_full_warning = now
            log.warning("%s tracks %d producer ids (minikafka.producer.state.max.entries): refusing new ones "
                           "until some expire (producer.id.expiration.ms)", name, count)
        raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                         f"partition {name} already tracks {count} producer ids "
                         f"(minikafka.producer.state.max.entries)")

    def update(self, header: BatchHeader, append_ms: int | None = None) -> None:
        """Record a batch that is now in the log at ``header.base_offset``.

        Also the lenient replay used when rebuilding state from the log: nothing is checked,
        the entry simply takes the batch's epoch (a different epoch empties the window, so the
        window only ever holds batches of the entry's epoch) and sequence. ``append_ms``
        defaults to the broker clock now, which for a replay gives each producer a full expiry
        period from the restart.
        """
        first_offset = header.base_offset
        delta = header.last_offset_delta
        self.map_end_offset = first_offset + delta + 1
        pid = header.producer_id
        if pid < 0:
            return
        self._dirty = True
        epoch = header.producer_epoch
        entry = self._producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(pid, epoch)
            self._producers[pid] = entry
        elif epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = epoch
        timestamp = header.max_timestamp
        entry.last_timestamp = timestamp
        entry.last_append_ms = self._now_ms() if append_ms is None else append_ms
        attributes = header.attributes  # (the header's properties spelled out: this runs for every batch)
        if attributes & CONTROL_FLAG:
            # A transaction marker replayed without its record decoded: it ends the open transaction.
            self._close_txn(entry)
            return
        first_seq = header.base_sequence
        if delta == 0:  # single-record batch: share the int objects
            last_seq, last_offset = first_seq, first_offset
        else:
            last_seq, last_offset = last_sequence(first_seq, delta), first_offset + delta
        batches = entry.batches
        batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        if len(batches) > NUM_BATCHES_TO_RETAIN:
            del batches[0]
        if entry.current_txn_first_offset < 0 and attributes & TRANSACTIONAL_FLAG:
            self._open_txn(entry, first_offset)

    # -- transactions --------------------------------------------------------------------------

    def check_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Raise INVALID_PRODUCER_EPOCH (47) if ``producer_epoch`` is older than the entry's."""
        entry = self._producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            self.counters["fenced"] += 1
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id}: epoch {producer_epoch} is older than the current epoch {entry.epoch}",
            )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Judge a transaction marker before it is written, in Kafka's order: a producer epoch
        older than the entry's is 47, a coordinator epoch older than the entry's is 52."""
        self.check_epoch(producer_id, producer_epoch)
        entry = self._producers.get(producer_id)
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"producer {producer_id}: marker from coordinator epoch {coordinator_epoch}, "
                f"the partition has seen {entry.coordinator_epoch}",
            )

    def apply_marker(self, header: BatchHeader, coordinator_epoch: int, append_ms: int | None = None) -> int:
        """Record a marker now in the log at ``header.base_offset``: the producer's open
        transaction (if any) is closed, its epoch and coordinator epoch become the marker's.

        Returns the first offset of the transaction it closed, or -1 if none was open (a
        duplicate marker, or a partition the producer wrote nothing to)."""
        self.map_end_offset = header.base_offset + header.last_offset_delta + 1
        self._dirty = True
        pid = header.producer_id
        entry = self._producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(pid, header.producer_epoch)
            self._producers[pid] = entry
        elif header.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = header.producer_epoch
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = header.max_timestamp
        entry.last_append_ms = self._now_ms() if append_ms is None else append_ms
        first = entry.current_txn_first_offset
        self._close_txn(entry)
        return first

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, or None when none is open."""
        heap, ongoing = self._ongoing_heap, self._ongoing
        while heap and heap[0] not in ongoing:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def _open_txn(self, entry: ProducerStateEntry, first_offset: int) -> None:
        entry.current_txn_first_offset = first_offset
        self._ongoing[first_offset] = entry.producer_id
        heapq.heappush(self._ongoing_heap, first_offset)

    def _close_txn(self, entry: ProducerStateEntry) -> None:
        first = entry.current_txn_first_offset
        if first >= 0:
            entry.current_txn_first_offset = -1
            if self._ongoing.get(first) == entry.producer_id:
                del self._ongoing[first]
                if not self._ongoing:
                    self._ongoing_heap.clear()

    def _reindex_open_txns(self) -> None:
        self._ongoing = {e.current_txn_first_offset: pid for pid, e in self._producers.items()
                         if e.current_txn_first_offset >= 0}
        self._ongoing_heap = sorted(self._ongoing)

    # -- expiry --------------------------------------------------------------------------------

    def set_expiration_ms(self, ms: int) -> None:
        self.expiration_ms = ms

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_append_ms >= self.expiration_ms

    def expire(self, now_ms: int | None = None) -> int:
        """Forget producers idle (by the broker clock) for ``expiration_ms``; return how many."""
        now = self._now_ms() if now_ms is None else now_ms
        gone = [pid for pid, entry in self._producers.items() if self.is_expired(entry, now)]
        for pid in gone:
            del self._producers[pid]
        if gone:
            self._dirty = True
            self.counters["expired"] += len(gone)
        return len(gone)

    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only live view of the entries (for DescribeProducers and metrics)."""
        return self._view

    # -- snapshots -----------------------------------------------------------------------------

    def take_snapshot(self, offset: int | None = None, fsync: bool = True) -> Path | None:
        """Write the state as ``<offset>.snapshot``; return its path, or None if skipped.

        ``offset`` defaults to ``map_end_offset``. A larger offset moves ``map_end_offset`` up to
        it (the caller vouches that no producer batch lies in between, e.g. at a segment roll);
        a smaller one is refused because the state already includes later batches. Nothing is
        written if the snapshot at this offset was written or loaded by this manager and the
        state has not changed since. Afterwards only the newest ``max_snapshots`` files remain.
        """
        if offset is None:
            offset = self.map_end_offset
        elif offset < self.map_end_offset:
            raise ValueError(
                f"snapshot offset {offset} is below the state's end offset {self.map_end_offset}"
            )
        else:
            self.map_end_offset = offset
        path = snapshots.snapshot_path(self.partition_dir, offset)
        if offset == self._last_snap_offset and not self._dirty and path.exists():
            return None
        snapshots.write_snapshot_file(path, snapshots.encode_snapshot(self._producers.values()), fsync=fsync)
        self._last_snap_offset = offset
        self._dirty = False
        self._limit_snapshot_count(keep=offset)
        if self.on_snapshot is not None:
            self.on_snapshot()
        return path

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop out-of-range snapshots and load the newest valid one (docs/semantics.md#snapshot-retention, docs/semantics.md#snapshot-loading, docs/semantics.md#producer-state-rebuild).

        Snapshots above the log end or below the log start are deleted. Unlike Kafka, the one
        exactly at the log start is kept: it describes the state at that offset and the log
        from there on is complete, so producers whose batches were all removed by retention or
        DeleteRecords keep their state across a restart, clean or not.

        Unreadable snapshots (wrong version, bad CRC, empty, short, trailing bytes) are logged,
        deleted, and the next older one is tried. Expired entries are left out. Without any
        usable snapshot the state is empty at ``log_start_offset``. The caller then replays the
        log from ``map_end_offset`` with :meth:`update` and takes a snapshot at the log end.
        """
        snapshots.remove_leftover_files(self.partition_dir)
        for offset in snapshots.list_snapshot_offsets(self.partition_dir):
            if offset > log_end_offset or offset < log_start_offset:
                self.delete_snapshot(offset)
        self._forget_all()
        for offset in reversed(snapshots.list_snapshot_offsets(self.partition_dir)):
            path = snapshots.snapshot_path(self.partition_dir, offset)
            try:
                data = path.read_bytes()
                mtime_ms = os.stat(path).st_mtime_ns // 1_000_000
                loaded = snapshots.decode_snapshot(data, mtime_ms, BatchMetadata)
            except (OSError, snapshots.CorruptSnapshotError) as exc:
                log.warning("deleting unusable producer snapshot %s: %s", path, exc)
                self._unlink(path)
                continue
            dropped = self._install(loaded)
            self.map_end_offset = offset
            self._last_snap_offset = offset
            self._dirty = dropped > 0
            return
        self.map_end_offset = log_start_offset

    def _forget_all(self) -> None:
        """No producers and no open transactions; no snapshot describes the state."""
        self._producers.clear()
        self._ongoing.clear()
        self._ongoing_heap.clear()
        self._last_snap_offset = None
        self._dirty = True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and delete every snapshot: the log now starts empty at ``offset``
        (a follower truncating below all its data). Kafka: ``truncateFullyAndStartAt``."""
        for snapshot in snapshots.list_snapshot_offsets(self.partition_dir):
            self.delete_snapshot(snapshot)
        self._forget_all()
        self.map_end_offset = offset

    def _install(self, loaded: Iterable[snapshots.SnapshotEntry]) -> int:
        """Make loaded entries live, leaving out expired ones; return how many were left out."""
        now = self._now_ms()
        dropped = 0
        producers = self._producers
        for item in loaded:
            entry = ProducerStateEntry(
                item.producer_id,
                item.epoch,
                list(item.batches)[-NUM_BATCHES_TO_RETAIN:],
                item.coordinator_epoch,
                item.current_txn_first_offset,
                item.last_timestamp,
                item.last_append_ms,
            )
            if self.is_expired(entry, now):
                dropped += 1
                producers.pop(item.producer_id, None)  # a later duplicate id replaces, Kafka-style
                continue
            producers[item.producer_id] = entry
        self.counters["expired"] += dropped
        self._reindex_open_txns()
        return dropped

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        """Delete snapshots not at a segment base, except the newest if above every base.

        That newest one is the snapshot a clean shutdown left at the log end (docs/semantics.md#snapshot-retention).
        """
        bases = set(segment_base_offsets)
        strays = [o for o in snapshots.list_snapshot_offsets(self.partition_dir) if o not in bases]
        keep = None
        if strays and (not bases or strays[-1] > max(bases)):
            keep = strays[-1]
        for offset in strays:
            if offset != keep:
                self.delete_snapshot(offset)

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot at ``offset`` if there is one (e.g. its segment was deleted)."""
        self._unlink(snapshots.snapshot_path(self.partition_dir, offset))
        if offset == self._last_snap_offset:
            self._last_snap_offset = None

    def latest_snapshot_offset(self) -> int | None:
        offsets = snapshots.list_snapshot_offsets(self.partition_dir)
        return offsets[-1] if offsets else None

    def snapshot_offsets(self) -> list[int]:
        return snapshots.list_snapshot_offsets(self.partition_dir)

    def _limit_snapshot_count(self, keep: int) -> None:
        offsets = [o for o in snapshots.list_snapshot_offsets(self.partition_dir) if o != keep]
        excess = len(offsets) + 1 - self.max_snapshots
        for offset in offsets[:excess] if excess > 0 else ():
            self.delete_snapshot(offset)

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # e.g. a read-only directory: never fatal for the broker
            log.warning("could not delete producer snapshot %s: %s", path, exc)
