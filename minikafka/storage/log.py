"""One partition's log: its segments, offsets, producer state, appends and reads.

A :class:`PartitionLog` owns the partition directory ``<topic>-<n>``. Client appends are checked by
:mod:`.log_validator` (docs/semantics.md#append-rules, steps 7-15) and given offsets here
(docs/semantics.md#offset-assignment), records undecoded unless the topic needs them; reads return
whole batches straight from the ``.log`` files. :meth:`PartitionLog.open` builds the log from what
:mod:`.log_loader` loaded and recovered (docs/semantics.md#recovery). A follower appends with the
leader's offsets and epochs and truncates on a leader change (:meth:`PartitionLog.append_as_follower`,
:meth:`PartitionLog.truncate_to`).

Threading: everything runs on the broker's event loop except :meth:`PartitionLog.flush`, which may be
called from a worker thread (fsync is slow). ``flush`` only touches duplicated file descriptors and a
few integers, under ``_lock``, which roll and segment deletion also take.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minikafka.clock import wall_clock_ms
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.append_result import AppendResult
from minikafka.storage.batch import PARTITION_LEADER_EPOCH_OFFSET, BatchHeader
from minikafka.storage.control import Marker, build_marker
from minikafka.storage.log_durability import close_files, dup_unflushed_fds, fsync_flushed
from minikafka.storage.log_loader import LoadedLog, load
from minikafka.storage.log_retention import below_log_start, past_retention_bytes, past_retention_ms
from minikafka.storage.log_segments import LogSegments
from minikafka.storage.log_settings import LogSettings
from minikafka.storage.log_timestamps import max_timestamp_offset, offset_for_timestamp
from minikafka.storage.log_validator import validate_client_batch, validate_follower_records
from minikafka.storage.producer_replay import apply_marker, rebuild_producer_state, replay_batch
from minikafka.storage.producer_state import DEFAULT_EXPIRATION_MS, ProducerStateEntry
from minikafka.storage.segment import LogSegment

log = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class PartitionLog:
    """A partition's segments plus the offsets and producer state that go with them.

    Build one with :meth:`PartitionLog.open`, which creates the directory or loads (and if needed
    recovers) what is there."""

    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Path,
        config: dict[str, Any],
        loaded: LoadedLog,
        *,
        now_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        """A log over segments already opened and recovered (:meth:`open` loads them)."""
        self.topic = topic
        self.partition = partition
        self.dir = Path(directory)
        self.config = dict(config)
        self._settings = LogSettings.from_config(self.config)
        self._now_ms = now_ms
        self._segments = LogSegments(loaded.segments)
        self._lock = threading.Lock()
        self.log_start_offset = loaded.log_start_offset
        self.log_end_offset = loaded.log_end_offset
        self.high_watermark = loaded.log_end_offset
        self.epochs = loaded.epochs
        self.leader_epoch = max(self.epochs.latest_epoch, 0)  # stamped on what it appends as leader
        self.replicated = False  # set in a cluster: the high watermark follows the replicas, not appends
        self.recovery_point = loaded.recovery_point
        self.on_append: Callable[[PartitionLog], None] | None = None
        #: told of every producer snapshot file written once the log is open (set by the opener)
        self.on_snapshot: Callable[[], None] | None = None
        self.producer_state = loaded.producer_state
        self.producer_state.on_snapshot = self._snapshot_written
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms()
        self._roll_flush_pending = False
        self._snapshots_to_sync: list[int] = []
        self._dir_needs_sync = loaded.dir_needs_sync
        self._closed = False

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self._segments)})")

    # ================================================================== loading

    @classmethod
    def open(
        cls,
        topic: str,
        partition: int,
        directory: str | Path,
        config: dict[str, Any],
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        clean: bool = True,
        now_ms: Callable[[], int] = wall_clock_ms,
        producer_expiration_ms: int = DEFAULT_EXPIRATION_MS,
        producer_max_entries: int | None = None,
    ) -> PartitionLog:
        """Open (creating if missing) and load the partition in ``directory``.

        ``log_start_offset`` and ``recovery_point`` come from the directory's checkpoint files;
        ``clean`` says whether the last shutdown was clean (docs/semantics.md#clean-shutdown)."""
        directory = Path(directory)
        loaded = load(directory, f"{topic}-{partition}", LogSettings.from_config(config), clean=clean,
                      checkpoint_start=max(0, log_start_offset), checkpoint_recovery=max(0, recovery_point),
                      now_ms=now_ms, producer_expiration_ms=producer_expiration_ms,
                      producer_max_entries=producer_max_entries)
        return cls(topic, partition, directory, config, loaded, now_ms=now_ms)

    def _snapshot_written(self) -> None:
        if self.on_snapshot is not None:
            self.on_snapshot()

    # ================================================================== appending

    def append_from_client(self, batch: bytearray | memoryview | bytes, now_ms: int | None = None,
                           header: BatchHeader | None = None) -> AppendResult:
        """Validate, assign offsets to and append one client batch (see the module docstring).

        ``header`` is the batch's own, when the caller has parsed it already (the Produce handler
        has: :func:`~minikafka.storage.batch.single_batch`); it is checked here like a parsed one."""
        now_ms = self._append_time(now_ms)
        batch, header = validate_client_batch(batch, header, self._settings, now_ms, True)  # 7-15
        seg = self._segment_for(len(batch), self.log_end_offset + header.last_offset_delta, header.max_timestamp,
                                now_ms)
        # 17. producer state (raises 45/47, 89 when full; returns the cached batch for a duplicate)
        dup = self.producer_state.check(header)
        if dup is not None:
            return AppendResult(dup.first_offset, dup.last_offset, dup.timestamp, self.log_start_offset, True)
        return self._write(seg, batch, header, now_ms)

    def append_as_coordinator(self, batch: bytearray | memoryview | bytes, now_ms: int | None = None) -> AppendResult:
        """Append a batch the broker writes on a producer's behalf (a transactional offset commit).

        The batch is validated like a client's and its producer epoch must not be older than the
        partition's (47), but sequences are not checked: the broker, not the producer, numbered it.
        A transactional batch opens the producer's transaction here like any transactional data."""
        now_ms = self._append_time(now_ms)
        batch, header = validate_client_batch(batch, None, self._settings, now_ms, False)
        seg = self._segment_for(len(batch), self.log_end_offset + header.last_offset_delta, header.max_timestamp,
                                now_ms)
        if header.producer_id >= 0:
            self.producer_state.check_epoch(header.producer_id, header.producer_epoch)
        return self._write(seg, batch, header, now_ms)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      now_ms: int | None = None) -> AppendResult:
        """Append a COMMIT or ABORT marker for ``producer_id`` and close its transaction here.

        Checked in Kafka's order: a producer epoch older than the partition's entry is 47, an entry
        coordinator epoch newer than the marker's is 52; otherwise the marker is always written
        (it takes one offset even when the producer wrote nothing here, and a duplicate marker
        completes nothing). The last stable offset moves, so ``on_append`` is told.
        Rules: docs/semantics.md#txn-markers."""
        now_ms = self._append_time(now_ms)
        batch = build_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        header = BatchHeader.parse(batch)
        seg = self._segment_for(len(batch), self.log_end_offset + header.last_offset_delta, header.max_timestamp,
                                now_ms)  # Kafka rolls before the producer checks
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        return self._write(seg, batch, header, now_ms, Marker(commit, coordinator_epoch))

    def _append_time(self, now_ms: int | None) -> int:
        """``now_ms``, else the clock; an append to a closed log is NOT_LEADER_OR_FOLLOWER (6)."""
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.name} is closed")
        return self._now_ms() if now_ms is None else now_ms

    def _segment_for(self, size: int, last_offset: int, max_timestamp: int, now_ms: int,
                     next_offset: int = 0) -> LogSegment:
        """16. The active segment, rolled first (at ``next_offset`` if above the log end) when ``size``
        bytes ending at ``last_offset`` would not fit its limits."""
        seg = self._segments.active
        s = self._settings
        reason = seg.should_roll(size, last_offset, max_timestamp, now_ms, s.segment_bytes, s.segment_ms)
        if reason is not None:
            self._roll(reason, now_ms, next_offset)
            seg = self._segments.active
        return seg

    def _write(self, seg: LogSegment, batch: bytearray | memoryview, header: BatchHeader, now_ms: int,
               marker: Marker | None = None) -> AppendResult:
        """Give the batch the next offset, write it and record it in the producer state."""
        leo = self.log_end_offset
        _INT64.pack_into(batch, 0, leo)  # baseOffset and partitionLeaderEpoch: outside the CRC
        epoch = header.partition_leader_epoch = self.leader_epoch
        _INT32.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, epoch)
        header.base_offset = leo
        self.epochs.assign(epoch, leo)  # changes nothing unless the epoch is new
        self._append_to(seg, batch, header)
        delta = header.last_offset_delta
        self.log_end_offset = leo + delta + 1
        if not self.replicated:
            self.high_watermark = self.log_end_offset
        if marker is None:
            self.producer_state.update(header, now_ms)
        else:
            apply_marker(self.producer_state, seg, header, marker, now_ms, self.name)
        s = self._settings
        self._unflushed_messages += delta + 1
        if self._unflushed_messages >= s.flush_messages:
            self.flush()
        if self.on_append is not None:
            self.on_append(self)
        return AppendResult(leo, leo + delta, now_ms if s.log_append_time else -1, self.log_start_offset, False)

    def _append_to(self, seg: LogSegment, batch: bytearray | memoryview, header: BatchHeader) -> None:
        try:
            seg.append(batch, header)
        except OSError as e:
            log.error("%s: write failed: %s", self.name, e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"write failed: {e}") from e

    # ================================================================== the follower's writes

    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> AppendResult | None:
        """Append batches copied from the leader, keeping their base offsets and partitionLeaderEpoch.

        Checked as Kafka checks a replicated append (:func:`~.log_validator.validate_follower_records`:
        offsets increasing and not below the log end). The log rolls once for the whole set, at
        the first batch's offset. Producer state is recorded without being judged (no duplicate
        or sequence check, an older epoch accepted), markers close transactions and index
        aborts, so a follower that becomes leader has the leader's state. The high watermark is
        left alone: a follower learns it from the leader (:meth:`update_high_watermark`).
        Returns None for no batches. Kafka: ``UnifiedLog.appendAsFollower``."""
        now_ms = self._append_time(now_ms)
        s = self._settings
        batches = validate_follower_records(records, s, self.log_end_offset)
        if not batches:
            return None
        view = memoryview(records)
        first, last = batches[0][1], batches[-1][1]
        seg = self._segment_for(len(view), last.last_offset, max(h.max_timestamp for _, h in batches), now_ms,
                               first.base_offset)
        for pos, header in batches:
            batch, seg_pos = view[pos : pos + header.size], seg.size
            self.epochs.assign(header.partition_leader_epoch, header.base_offset)
            self._append_to(seg, batch, header)
            self.log_end_offset = header.next_offset
            replay_batch(self.producer_state, seg, seg_pos, header, now_ms, self.name, True, batch)
            self._unflushed_messages += header.last_offset_delta + 1
        if self._unflushed_messages >= s.flush_messages:
            self.flush()
        if self.on_append is not None:
            self.on_append(self)
        return AppendResult(first.base_offset, last.last_offset, -1, self.log_start_offset, False)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark a follower learned from its leader, within [log start, log end]."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    def truncate_to(self, offset: int, *, fully: bool = False) -> bool:
        """Drop every offset from ``offset`` on (a follower whose log diverged from the new leader's).

        Segments above it are deleted, the one holding it is cut at the batch holding it (with its
        index and aborted-transaction entries), and the producer state is rebuilt from the newest
        snapshot at or below the new log end plus the log after it (later snapshots are deleted).
        The log start offset is capped at ``offset``, the high watermark at the new log end; an
        ``offset`` below every segment empties the log and starts it there. Returns False when
        ``offset`` is at or past the log end (nothing to do). ``fully`` empties the log wherever
        ``offset`` is and starts it there, with no epochs (a follower below its leader's log start).
        Kafka: ``UnifiedLog.truncateTo``, ``truncateFullyAndStartAt``."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to the negative offset {offset}")
        now = self._append_time(None)
        if offset >= self.log_end_offset and not fully:
            self.epochs.truncate_from_end(offset)  # an empty leadership's entry at the log end goes
            return False
        log.info("%s: truncating to offset %d (log end %d)", self.name, offset, self.log_end_offset)
        s = self._settings
        ps = self.producer_state
        doomed = list(self._segments) if fully else self._segments.above(offset)
        try:
            fresh = (LogSegment.create(self.dir, offset, s.index_max_bytes, s.index_interval_bytes, now)
                     if len(doomed) == len(self._segments) else None)
            with self._lock:
                if fresh is None:
                    self._segments.remove(doomed)
                else:
                    self._segments.reset([fresh])
                self._dir_needs_sync = True
                self._snapshots_to_sync = [o for o in self._snapshots_to_sync if o <= offset]
            active = self._segments.cut_files(doomed, offset, now, afresh=fresh is not None)
            if fresh is not None:
                ps.truncate_fully_and_start_at(offset)
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.name}: truncation failed: {e}") from e
        self.log_end_offset = active.next_offset
        self.log_start_offset = min(offset, self.log_start_offset) if fresh is None else offset
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.high_watermark = self.log_end_offset if fully else min(self.high_watermark, self.log_end_offset)
        if fully:
            self.epochs.clear()
        else:
            self.epochs.truncate_from_end(self.log_end_offset)
        rebuild_producer_state(ps, self._segments, self.log_start_offset, self.log_end_offset, now, self.name)
        return True

    # ================================================================== transactions

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (never below the log start), or None."""
        first = self.producer_state.first_unstable_offset()
        if first is None:
            return None
        return max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The offset read_committed consumers read up to: the first unstable offset when it is
        below the high watermark, else the high watermark (docs/semantics.md#txn-lso)."""
        first = self.first_unstable_offset
        hw = self.high_watermark
        return first if first is not None and first < hw else hw

    # ================================================================== producer-state queries

    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only live view of the partition's producer entries (DescribeProducers, metrics)."""
        return self.producer_state.producers()

    def producer_counters(self) -> Mapping[str, int]:
        """Duplicates answered, out-of-order and fenced batches refused, entries expired."""
        return self.producer_state.counters

    def expire_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` at ``now_ms``; how many went."""
        return self.producer_state.expire(now_ms)

    # ================================================================== segments

    def roll(self) -> None:
        """Start a new segment at the LEO now (no-op while the active segment is empty)."""
        self._roll("requested", self._now_ms())

    def _roll(self, reason: str, now_ms: int, next_offset: int = 0) -> None:
        """Start a new segment at the log end, or at ``next_offset`` when that is higher (a
        follower copying a leader's log that has a gap)."""
        old = self._segments.active
        new_base = max(self.log_end_offset, next_offset)
        if old.is_empty and new_base == old.base_offset:
            return
        s = self._settings
        try:
            new = LogSegment.create(self.dir, new_base, s.index_max_bytes, s.index_interval_bytes, now_ms)
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create segment {new_base}: {e}") from e
        with self._lock:
            self._segments.add(new)
            self._roll_flush_pending = True
            self._dir_needs_sync = True
        # Kafka writes the producer snapshot before the new segment gets data; its fsync is left
        # to the next flush, like Kafka's background flush of the rolled segment.
        try:
            self.producer_state.take_snapshot(new_base, fsync=False)
        except OSError as e:  # only costs a longer replay after a crash; never fails the append
            log.error("%s: producer snapshot at %d failed: %s", self.name, new_base, e)
        else:
            with self._lock:
                self._snapshots_to_sync.append(new_base)
        log.info("%s: rolled segment %d -> %d (%s)", self.name, old.base_offset, new_base, reason)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    def segment_base_offsets(self) -> list[int]:
        return self._segments.base_offsets()

    @property
    def size_bytes(self) -> int:
        return self._segments.size_bytes

    def _delete_segments(self, doomed: list[LogSegment], reason: str) -> int:
        """Remove whole segments from the front of the log (never the only one); how many went."""
        if not doomed:
            return 0
        if len(doomed) == len(self._segments):
            self._roll(reason, self._now_ms())
        with self._lock:
            self._segments.remove(doomed)
        for seg in doomed:
            seg.delete()
            self.producer_state.delete_snapshot(seg.base_offset)
            log.info("%s: deleted segment %d (%s)", self.name, seg.base_offset, reason)
        if self._segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self._segments[0].base_offset
            self.epochs.truncate_from_start(self.log_start_offset)
        return len(doomed)

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments entirely below the log start offset, then those past retention.ms
        and retention.bytes (:mod:`.log_retention`). Returns how many segments were deleted."""
        s = self._settings
        deleted = self._delete_segments(below_log_start(self._segments, self.log_start_offset),
                                        "below the log start offset")
        if s.retention_ms >= 0 and s.deletes:
            deleted += self._delete_segments(past_retention_ms(self._segments, s.retention_ms, now_ms),
                                             f"retention.ms {s.retention_ms}")
        if s.retention_bytes >= 0 and s.deletes:
            deleted += self._delete_segments(past_retention_bytes(self._segments, s.retention_bytes),
                                             f"retention.bytes {s.retention_bytes}")
        return deleted

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 = high watermark)."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside [0, {self.high_watermark}]")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epochs.truncate_from_start(offset)
            log.info("%s: log start offset moved to %d", self.name, offset)
            self._delete_segments(below_log_start(self._segments, offset), "below the log start offset")
        return self.log_start_offset

    @property
    def closed(self) -> bool:
        return self._closed

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put ``new`` in place of the consecutive segments ``old`` (the log cleaner's swap; the
        files are already renamed). The old segments' descriptors are closed."""
        with self._lock:
            try:
                self._segments.replace(old, new)
            except ValueError as e:
                raise ValueError(f"{self.name}: {e}") from None
        for seg in old:
            seg.abandon()

    def update_config(self, config: dict[str, Any]) -> None:
        self.config = dict(config)
        self._settings = LogSettings.from_config(self.config)
        self._segments.active.index_interval_bytes = self._settings.index_interval_bytes

    # ================================================================== reading

    def _read_span(self, offset: int, max_bytes: int, min_one: bool,
                   max_offset: int | None) -> tuple[LogSegment, int, BatchHeader, int, int] | None:
        """Where a read starts and may end: ``(segment, position, first batch header, end position,
        Kafka's fetch size)``, or None when nothing is readable. The fetch size is what Kafka's
        segment read would return (it may end inside a batch; :meth:`read` cuts that batch off)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if offset >= limit:
            return None
        located = self._segments.locate(offset)
        if located is None:
            return None
        seg, pos, header = located
        end_pos = seg.size
        if limit < seg.next_offset:
            at_limit = seg.find_batch(limit)
            if at_limit is not None:
                end_pos = at_limit[0]
        if pos >= end_pos:
            return None
        wanted = max(max_bytes, header.size) if min_one else max_bytes
        return seg, pos, header, end_pos, min(end_pos - pos, wanted)

    def read(self, offset: int, max_bytes: int, min_one: bool = True,
             max_offset: int | None = None) -> bytes | memoryview:
        """Whole batches from the one containing ``offset``, within one segment, up to ``max_bytes``
        (at least one batch when ``min_one``), none at or beyond ``max_offset`` (read_committed
        passes the last stable offset, a batch boundary)."""
        span = self._read_span(offset, max_bytes, min_one, max_offset)
        if span is None:
            return b""
        seg, pos, header, end_pos, _size = span
        if header.size > max_bytes:
            return seg.read_batch(pos, header) if min_one else b""
        return seg.read_whole_batches(pos, min(max_bytes, end_pos - pos), end_pos)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions a read_committed client needs
        for the offsets ``[fetch_offset, upper_bound)``, selected as Kafka selects them: from the
        segment holding ``fetch_offset`` on, every index entry whose marker is at or after the
        fetch offset and whose first offset is below the bound, stopping after the first entry
        whose last stable offset reaches the bound."""
        return self._segments.collect_aborted(fetch_offset, upper_bound)

    def aborted_transactions_for_read(self, offset: int, max_bytes: int, min_one: bool = True,
                                      max_offset: int | None = None) -> list[tuple[int, int]]:
        """The aborted transactions to send with :meth:`read` of the same arguments (empty when
        nothing is readable). The upper bound is Kafka's: the offset of the first offset-index
        entry at or beyond the end of Kafka's fetch size in that segment, else the next
        segment's base, else the log end."""
        span = self._read_span(offset, max_bytes, min_one, max_offset)
        if span is None:
            return []
        seg, pos, _header, _end, size = span
        upper = seg.offset_index.upper_bound_offset(pos + size)
        if upper is None:
            upper = self._segments.base_after(seg)
            if upper is None:
                upper = self.log_end_offset
        return self.collect_aborted_transactions(offset, upper)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with a timestamp >= ``timestamp``, or None."""
        return offset_for_timestamp(self._segments, self.log_start_offset, timestamp)

    def max_timestamp_offset(self) -> tuple[int, int]:
        """``(offset, timestamp)`` of the first record carrying the largest timestamp; (-1, -1) if empty."""
        return max_timestamp_offset(self._segments, self.log_start_offset)

    # ================================================================== durability

    @property
    def dirty(self) -> bool:
        """True while appended bytes (or a roll's snapshot) are not yet fsynced."""
        return self.recovery_point < self.log_end_offset or bool(self._snapshots_to_sync)

    def flush_due(self, now_ms: int) -> bool:
        """Whether a flush is owed: a segment was rolled (Kafka flushes it in the background) or
        flush.ms has passed since the last flush. The broker runs :meth:`flush` off the loop."""
        if not self.dirty:
            return False
        return self._roll_flush_pending or now_ms - self._last_flush_ms >= self._settings.flush_ms

    def flush(self) -> None:
        """fsync the log and index files (and pending snapshots) and advance the recovery point.

        Safe to call from a worker thread while the event loop keeps appending."""
        with self._lock:
            if self._closed:
                return
            target = self.log_end_offset
            fds = dup_unflushed_fds(self._segments, self.recovery_point)
            snapshots, self._snapshots_to_sync = self._snapshots_to_sync, []
            sync_dir, self._dir_needs_sync = self._dir_needs_sync, False
            self._roll_flush_pending = False
        try:
            fsync_flushed(self.dir, fds, snapshots, sync_dir)
        except OSError as e:
            with self._lock:
                self._snapshots_to_sync[:0] = snapshots
                self._dir_needs_sync = self._dir_needs_sync or sync_dir
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.name}: fsync failed: {e}") from e
        with self._lock:
            if target > self.recovery_point:
                self.recovery_point = target
            self._unflushed_messages = 0
            self._last_flush_ms = self._now_ms()

    def abandon(self) -> None:
        """Drop the log as a crash would: no snapshot, no trim, no fsync (tests and fault injection)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for seg in self._segments:
                seg.abandon()

    def close(self) -> None:
        """Clean close: snapshot at the LEO, trim the indexes, fsync everything."""
        if self._closed:
            return
        try:
            self.producer_state.take_snapshot(self.log_end_offset)
        except OSError as e:  # the next load replays from an older snapshot instead
            log.error("%s: producer snapshot at %d failed: %s", self.name, self.log_end_offset, e)
        with self._lock:
            self._closed = True
            close_files(self.name, self.dir, self._segments, self._snapshots_to_sync)
            self._snapshots_to_sync = []
            self.recovery_point = self.log_end_offset

    def delete(self) -> None:
        """Close without a snapshot and remove every file (topic deletion)."""
        with self._lock:
            self._closed = True
            for seg in self._segments.reset([]):
                seg.delete()

