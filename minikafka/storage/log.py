"""One partition's log: its segments, offsets, producer state, appends and reads.

A :class:`PartitionLog` owns the partition directory ``<topic>-<n>``. Client appends are checked by
:mod:`.log_validator` (docs/semantics.md#append-rules, steps 7-15) and given offsets here
(docs/semantics.md#offset-assignment) without decoding records (unless the topic asks for
timestamp bounds or compaction); reads return whole batches straight from the ``.log`` files.
:meth:`PartitionLog.open` builds the log from what :mod:`.log_loader` loaded and recovered
(docs/semantics.md#recovery). A follower's appends keep the leader's offsets and epochs, and
it truncates its log on a leader change (:meth:`PartitionLog.append_as_follower`,
:meth:`PartitionLog.truncate_to`).

Threading: everything runs on the broker's event loop except :meth:`PartitionLog.flush`, which may be
called from a worker thread (fsync is slow). ``flush`` only touches duplicated file descriptors and a
few integers, under ``_lock``, which roll and segment deletion also take.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import wall_clock_ms
from ..errors import ErrorCode, KafkaError
from .batch import PARTITION_LEADER_EPOCH_OFFSET, BatchHeader
from .control import Marker, build_marker
from .disk_format import offset_file_name
from .log_loader import LoadedLog, load
from .log_settings import LogSettings
from .log_validator import validate_client_batch
from .producer_replay import apply_marker
from .producer_state import DEFAULT_EXPIRATION_MS, ProducerStateEntry
from .records import decode_records
from .segment import LogSegment

log = logging.getLogger(__name__)

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


@dataclass(slots=True)
class AppendResult:
    base_offset: int  # first offset of the batch (the original one for a duplicate)
    last_offset: int
    log_append_time: int  # -1 on CreateTime topics, broker time on LogAppendTime, cached ts for a duplicate
    log_start_offset: int
    duplicate: bool


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
        self._segments: list[LogSegment] = list(loaded.segments)
        self._bases: list[int] = [seg.base_offset for seg in self._segments]
        self._lock = threading.Lock()
        self.log_start_offset = loaded.log_start_offset
        self.log_end_offset = loaded.log_end_offset
        self.high_watermark = loaded.log_end_offset
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
        batch, header, now_ms = self._validate(batch, now_ms, True, header)
        seg = self._segment_for(header, len(batch), now_ms)
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
        batch, header, now_ms = self._validate(batch, now_ms, False)
        seg = self._segment_for(header, len(batch), now_ms)
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
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.name} is closed")
        if now_ms is None:
            now_ms = self._now_ms()
        batch = build_marker(producer_id, producer_epoch, commit, coordinator_epoch, now_ms)
        header = BatchHeader.parse(batch)
        seg = self._segment_for(header, len(batch), now_ms)  # Kafka rolls before the producer checks
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        return self._write(seg, batch, header, now_ms, Marker(commit, coordinator_epoch))

    def _validate(self, batch: bytearray | memoryview | bytes, now_ms: int | None, from_client: bool,
                  header: BatchHeader | None = None) -> tuple[bytearray | memoryview, BatchHeader, int]:
        """Steps 7-15 (:func:`~minikafka.storage.log_validator.validate_client_batch`) on an open
        log; returns the writable batch, its header and the append time."""
        if self._closed:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{self.name} is closed")
        if now_ms is None:
            now_ms = self._now_ms()
        batch, header = validate_client_batch(batch, header, self._settings, now_ms, from_client)
        return batch, header, now_ms

    def _segment_for(self, header: BatchHeader, size: int, now_ms: int) -> LogSegment:
        """16. The active segment, rolled first if this batch would not fit its limits."""
        seg = self._segments[-1]
        s = self._settings
        reason = seg.should_roll(size, self.log_end_offset + header.last_offset_delta, header.max_timestamp,
                                 now_ms, s.segment_bytes, s.segment_ms)
        if reason is not None:
            self._roll(reason, now_ms)
            seg = self._segments[-1]
        return seg

    def _write(self, seg: LogSegment, batch: bytearray | memoryview, header: BatchHeader, now_ms: int,
               marker: Marker | None = None) -> AppendResult:
        """Give the batch the next offset, write it and record it in the producer state."""
        leo = self.log_end_offset
        _INT64.pack_into(batch, 0, leo)  # baseOffset and partitionLeaderEpoch: outside the CRC
        _INT32.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, 0)
        header.base_offset = leo
        header.partition_leader_epoch = 0
        try:
            seg.append(batch, header)
        except OSError as e:
            log.error("%s: write failed: %s", self.name, e)
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"write failed: {e}") from e
        delta = header.last_offset_delta
        self.log_end_offset = self.high_watermark = leo + delta + 1
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

    def _roll(self, reason: str, now_ms: int) -> None:
        old = self._segments[-1]
        if old.is_empty:
            return
        new_base = self.log_end_offset
        s = self._settings
        try:
            new = LogSegment.create(self.dir, new_base, s.index_max_bytes, s.index_interval_bytes, now_ms)
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot create segment {new_base}: {e}") from e
        with self._lock:
            old.on_become_inactive()
            self._segments.append(new)
            self._bases.append(new_base)
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
        return list(self._bases)

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)

    def _delete_segments(self, doomed: list[LogSegment], reason: str) -> None:
        """Remove whole segments from the front of the log (never the only one)."""
        if not doomed:
            return
        if len(doomed) == len(self._segments):
            self._roll(reason, self._now_ms())
        with self._lock:
            gone = {id(seg) for seg in doomed}
            self._segments = [seg for seg in self._segments if id(seg) not in gone]
            self._bases = [seg.base_offset for seg in self._segments]
        for seg in doomed:
            seg.delete()
            self.producer_state.delete_snapshot(seg.base_offset)
            log.info("%s: deleted segment %d (%s)", self.name, seg.base_offset, reason)
        if self._segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self._segments[0].base_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes, and segments entirely below
        the log start offset. Returns how many segments were deleted."""
        s = self._settings
        deleted = 0
        # segments entirely below the log start offset (DeleteRecords)
        below = [seg for i, seg in enumerate(self._segments[:-1])
                 if self._segments[i + 1].base_offset <= self.log_start_offset]
        self._delete_segments(below, "below the log start offset")
        deleted += len(below)
        if s.retention_ms >= 0 and s.deletes:
            doomed = []
            for seg in self._segments:
                if seg.is_empty or now_ms - seg.largest_timestamp <= s.retention_ms:
                    break
                doomed.append(seg)
            self._delete_segments(doomed, f"retention.ms {s.retention_ms}")
            deleted += len(doomed)
        if s.retention_bytes >= 0 and s.deletes:
            excess = self.size_bytes - s.retention_bytes
            doomed = []
            for seg in self._segments:
                if seg.is_empty or excess - seg.size < 0:
                    break
                excess -= seg.size
                doomed.append(seg)
            self._delete_segments(doomed, f"retention.bytes {s.retention_bytes}")
            deleted += len(doomed)
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
            log.info("%s: log start offset moved to %d", self.name, offset)
            below = [seg for i, seg in enumerate(self._segments[:-1])
                     if self._segments[i + 1].base_offset <= offset]
            self._delete_segments(below, "below the log start offset")
        return self.log_start_offset

    @property
    def closed(self) -> bool:
        return self._closed

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put ``new`` in place of the consecutive segments ``old`` (the log cleaner's swap; the
        files are already renamed). The old segments' descriptors are closed."""
        with self._lock:
            i = next(k for k, seg in enumerate(self._segments) if seg is old[0])
            if [id(seg) for seg in self._segments[i : i + len(old)]] != [id(seg) for seg in old]:
                raise ValueError(f"{self.name}: segments {[s.base_offset for s in old]} are no longer consecutive")
            self._segments[i : i + len(old)] = [new]
            self._bases = [seg.base_offset for seg in self._segments]
        for seg in old:
            seg.abandon()

    def update_config(self, config: dict[str, Any]) -> None:
        self.config = dict(config)
        self._settings = LogSettings.from_config(self.config)
        self._segments[-1].index_interval_bytes = self._settings.index_interval_bytes

    # ================================================================== reading

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _locate(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        """Segment, position and header of the batch holding ``offset`` (or the first after it)."""
        segments = self._segments
        i = self._segment_index(offset)
        found = segments[i].find_batch(offset)
        while found is None and i + 1 < len(segments):  # a gap between segments
            i += 1
            found = segments[i].find_batch(offset)
        return None if found is None else (segments[i], found[0], found[1])

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
        located = self._locate(offset)
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
        data = seg.pread(pos, min(max_bytes, end_pos - pos))
        n = len(data)
        if pos + n >= end_pos:
            return data  # up to the segment end or the limit: whole batches
        # Cut after the last whole batch: start from the closest indexed batch boundary.
        end = max(pos, seg.offset_index.position_at_or_before(pos + n)) - pos
        while n - end >= 12:
            (length,) = struct.unpack_from(">i", data, end + 8)
            if end + 12 + length > n:
                break
            end += 12 + length
        return data if end == n else memoryview(data)[:end]

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions a read_committed client needs
        for the offsets ``[fetch_offset, upper_bound)``, selected as Kafka selects them: from the
        segment holding ``fetch_offset`` on, every index entry whose marker is at or after the
        fetch offset and whose first offset is below the bound, stopping after the first entry
        whose last stable offset reaches the bound."""
        out: list[tuple[int, int]] = []
        for seg in self._segments[self._segment_index(fetch_offset):]:
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out.extend((txn.producer_id, txn.first_offset) for txn in found)
            if complete:
                break
        return out

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
            i = bisect.bisect_right(self._bases, seg.base_offset)
            upper = self._bases[i] if i < len(self._bases) else self.log_end_offset
        return self.collect_aborted_transactions(offset, upper)

    def _first_record_at_or_after(self, seg: LogSegment, pos: int, timestamp: int) -> tuple[int, int] | None:
        for bpos, header in seg.iter_headers(pos):
            if header.last_offset < self.log_start_offset or header.max_timestamp < timestamp:
                continue
            for record in decode_records(seg.read_batch(bpos, header), header):
                if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                    return record.offset, record.timestamp
        return None

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with a timestamp >= ``timestamp``, or None."""
        for seg in self._segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= self.log_start_offset:
                continue
            entry = seg.time_index.lookup_below(timestamp)
            pos = seg.offset_index.lookup(entry[1])[1] if entry is not None else 0
            found = self._first_record_at_or_after(seg, pos, timestamp)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        """``(offset, timestamp)`` of the first record carrying the largest timestamp; (-1, -1) if empty."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.is_empty or seg.next_offset <= self.log_start_offset:
                continue
            if best is None or seg.max_timestamp > best.max_timestamp:
                best = seg
        if best is None:
            return -1, -1
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is None:
            return best.offset_of_max_timestamp, best.max_timestamp
        pos, header = found
        if header.is_log_append_time:
            return max(header.base_offset, self.log_start_offset), header.max_timestamp
        records = decode_records(best.read_batch(pos, header), header)
        if not records:  # an empty batch the log cleaner kept for its producer
            return max(header.base_offset, self.log_start_offset), best.max_timestamp
        top = max(r.timestamp for r in records)
        offset = next(r.offset for r in records if r.timestamp == top)
        return offset, best.max_timestamp

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
            fds: list[int] = []
            try:
                for seg in self._segments:
                    if seg.next_offset > self.recovery_point or seg is self._segments[-1]:
                        fds.extend(seg.dup_fds())
            except OSError:
                for fd in fds:
                    os.close(fd)
                raise
            snapshots, self._snapshots_to_sync = self._snapshots_to_sync, []
            sync_dir, self._dir_needs_sync = self._dir_needs_sync, False
            self._roll_flush_pending = False
        try:
            for fd in fds:
                os.fsync(fd)
            for offset in snapshots:
                _fsync_path(self.dir / offset_file_name(offset, ".snapshot"))
            if sync_dir:
                _fsync_path(self.dir)
        except OSError as e:
            with self._lock:
                self._snapshots_to_sync[:0] = snapshots
                self._dir_needs_sync = self._dir_needs_sync or sync_dir
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{self.name}: fsync failed: {e}") from e
        finally:
            for fd in fds:
                os.close(fd)
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
            for seg in self._segments:
                seg.on_become_inactive()
            for seg in self._segments:
                try:
                    os.fsync(seg.fd)
                except OSError as e:
                    log.error("%s: fsync of segment %d failed: %s", self.name, seg.base_offset, e)
            try:
                for offset in self._snapshots_to_sync:
                    _fsync_path(self.dir / offset_file_name(offset, ".snapshot"))
                for seg in self._segments:
                    _fsync_path(seg.offset_index.path)
                    _fsync_path(seg.time_index.path)
                    _fsync_path(seg.txn_index.path)
                _fsync_path(self.dir)
            except OSError as e:
                log.error("%s: fsync at close failed: %s", self.name, e)
            self._snapshots_to_sync = []
            for seg in self._segments:
                seg.close()
            self.recovery_point = self.log_end_offset

    def delete(self) -> None:
        """Close without a snapshot and remove every file (topic deletion)."""
        with self._lock:
            self._closed = True
            for seg in self._segments:
                seg.delete()
            self._segments = []


def _fsync_path(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
