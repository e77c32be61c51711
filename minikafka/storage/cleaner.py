"""The log cleaner: compaction of ``cleanup.policy=compact`` (and ``compact,delete``) partitions.

Kafka's algorithm for one broker (``core/src/main/scala/kafka/log/LogCleaner.scala``,
``LogCleanerManager.scala``):

* **What is cleanable.** A partition's log splits at its *first dirty offset* (from
  ``cleaner-offset-checkpoint``; the log start when unknown) and its *first uncleanable offset*:
  the active segment's base, or the base of the first segment holding records newer than
  ``min.compaction.lag.ms``. The dirty ratio is the bytes of the dirty segments over the bytes of
  all segments up to the first uncleanable offset. A log is cleaned when its ratio reaches
  ``min.cleanable.dirty.ratio``, or when its first dirty batch is older than ``max.compaction.lag.ms``.
* **Offset map.** The dirty segments are read and the latest offset of each key noted (up to
  ``log.cleaner.dedupe.buffer.size`` worth of keys, stopping at a segment boundary).
* **Cleaning.** Every segment from the log start up to the end of the map is rewritten, in groups
  of consecutive segments whose sizes add up to at most ``segment.bytes`` (Kafka's
  ``groupSegmentsBySize``), each group into one cleaned segment: a record is kept unless a later
  record of its key is in the map, or it has no key, or it is a tombstone (null value) that was
  already in the clean part of the log and is older than ``delete.retention.ms``. Kept records keep
  their offsets; a batch that loses records keeps its base offset, last offset delta, producer id,
  epoch and base sequence. A batch that loses all its records is dropped, except the last batch of
  each producer (an empty batch, as Kafka keeps, so producer state and deduplication are the same
  after a restart) and the last batch of the group (so the cleaned segment ends where the group
  ended, which makes the crash recovery of :mod:`minikafka.storage.swap` exact).
* **Transactions.** The dirty part ends at the segment holding the last stable offset, so every
  transaction in the cleaned range is complete. Records of aborted transactions (found through the
  ``.txnindex`` entries) are removed and shadow nothing; committed transactional records are
  compacted like any other. A marker (control batch) goes once nothing needs it, as in Kafka's
  ``CleanedTransactionMetadata``: the cleaning reads the range in offset order and notes, per
  producer, whether a batch of the transaction a marker closes (data or a kept empty batch) lies
  before the marker in what it read. While one does, the marker stays, and an ABORT marker also
  keeps its ``.txnindex`` entry (written into the cleaned segment's index); so a read_committed
  reader that still meets aborted records always meets their entry and then their marker. A marker
  whose transaction has nothing left is removed in two passes, as Kafka does since KIP-534: the
  first cleaning that finds it so writes a *delete horizon* into it (attribute bit 6, the base
  timestamp set to cleaning time + ``delete.retention.ms``, record timestamp deltas rebased so
  record timestamps are unchanged) and drops its ``.txnindex`` entry; a later cleaning at or past
  the horizon removes it. A consumer that read the transaction's records before they were cleaned
  away thus has ``delete.retention.ms`` to read on to the marker, as for tombstones. A marker that
  is the last thing producer state needs stays whole: when a producer has no cached batches left
  (its last write was a marker that bumped its epoch), its markers of its current epoch are kept
  (Kafka's ``isBatchLastRecordOfProducer``), as is the last batch of each group.

Threading: :meth:`LogCleaner.clean_log` runs the planning and the swap on the caller's thread
(the event loop) and the reading and writing (:func:`write_cleaned`) on a worker thread, at no
more than ``log.cleaner.io.max.bytes.per.second``. The worker opens its own file descriptors and
never touches the live log; the swap checks that the cleaned segments are still the log's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from kafka.record.util import encode_varint

from ..config import LONG_MAX, topic_config
from ..errors import KafkaError
from . import checkpoints as ckpt
from .batch import (
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER_SIZE,
    INT32_MAX,
    TRANSACTIONAL_FLAG,
    BatchHeader,
)
from .control import parse_marker
from .log import PartitionLog
from .recompress import compress, with_body
from .records import decompress, read_varint
from .segment import LogSegment
from .swap import CLEANED, StepHook, cleaned_path, promote_cleaned, replace_with_swap
from .txn_index import AbortedTxn

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
#: Python keeps a key in the offset map for about this many bytes (Kafka: 24 per entry).
_MAP_BYTES_PER_KEY = 100
_READ_CHUNK = 1 << 20


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


# ---------------------------------------------------------------------- reading


#: One record as the cleaner sees it: ``(start, end, offset, timestamp delta, key, tombstone)``, its
#: span in the uncompressed records section first. A plain tuple: the cleaner makes one per record
#: twice per cleaning, and a class's ``__init__`` cost a third of its time.
_Record = tuple[int, int, int, int, bytes | None, bool]
START, END, OFFSET, TS_DELTA, KEY, TOMBSTONE = range(6)


def _records(raw: bytes, header: BatchHeader) -> list[_Record]:
    """Span, offset, timestamp delta, key and tombstone flag of each record (values not copied)."""
    out: list[_Record] = []
    pos = 0
    base = header.base_offset
    for _ in range(header.records_count):
        length, p = read_varint(raw, pos)
        end = p + length
        b = raw[p + 1]  # after the attributes byte: the timestamp delta
        if b < 0x80:
            ts_delta, p = (b >> 1) ^ -(b & 1), p + 2
        else:
            ts_delta, p = read_varint(raw, p + 1)
        b = raw[p]
        if b < 0x80:
            offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            offset_delta, p = read_varint(raw, p)
        key_len, p = read_varint(raw, p)
        key = raw[p : p + key_len] if key_len >= 0 else None
        p += max(key_len, 0)
        out.append((pos, end, base + offset_delta, ts_delta, key, raw[p] == 1))  # value length -1 is 0x01
        pos = end
    return out


class Throttler:
    """Sleeps the cleaning thread so that its reads and writes stay under a byte rate (Kafka's
    ``Throttler``); idle time earns at most ``WINDOW`` seconds of burst."""

    WINDOW = 0.3

    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = bytes_per_second
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.bytes = 0

    def add(self, n: int) -> None:
        self.bytes += n
        if self.rate <= 0 or self.rate >= 1e300:
            return
        now = self.clock()
        ahead = self.bytes / self.rate - (now - self.started)
        if ahead < -self.WINDOW:  # after idle time: keep at most one window of unused allowance
            self.started = now - self.bytes / self.rate - self.WINDOW
        elif ahead > 0.001:
            self.sleep(ahead)


class Cancelled(Exception):
    """The broker is stopping or the log went away: the cleaning is abandoned (files removed)."""


def _iter_batches(path: Path, size: int, throttler: Throttler) -> Any:
    """``(header, batch bytes)`` of each batch of a segment file, read with its own descriptor."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos, buf, buf_start = 0, b"", 0
        while size - pos >= HEADER_SIZE:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf, buf_start, off = os.pread(fd, min(_READ_CHUNK, size - pos), pos), pos, 0
                throttler.add(len(buf))
            header = BatchHeader.parse(buf, off)
            if pos + header.size > size or header.size < HEADER_SIZE:
                return
            if off + header.size > len(buf):
                buf, buf_start, off = os.pread(fd, max(_READ_CHUNK, header.size), pos), pos, 0
                throttler.add(len(buf))
            yield header, memoryview(buf)[off : off + header.size]
            pos += header.size
    finally:
        os.close(fd)


class AbortedRanges:
    """Which transactional batches belong to aborted transactions, from the ``.txnindex`` entries
    of the whole log. The cleaned range lies below the last stable offset, so every transaction
    there is complete: a transactional batch outside every aborted range was committed."""

    def __init__(self, entries: list[AbortedTxn]) -> None:
        self.entries = entries
        ranges: dict[int, list[tuple[int, int]]] = {}
        for txn in entries:
            ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        self._firsts = {pid: [r[0] for r in sorted(rs)] for pid, rs in ranges.items()}
        self._lasts = {pid: [r[1] for r in sorted(rs)] for pid, rs in ranges.items()}

    def contains(self, header: BatchHeader) -> bool:
        firsts = self._firsts.get(header.producer_id)
        if not firsts or not header.attributes & TRANSACTIONAL_FLAG:
            return False
        i = bisect_right(firsts, header.base_offset) - 1
        return i >= 0 and header.base_offset <= self._lasts[header.producer_id][i]


#: Attribute bit 6: the batch's base timestamp is its delete horizon (KIP-534).
DELETE_HORIZON_FLAG = 0x40


class TransactionsSeen:
    """Which markers a cleaning still needs, found while it reads its range in offset order
    (Kafka's ``CleanedTransactionMetadata``): per producer, whether a batch of its current
    transaction has been read since its last marker. The aborted transactions come from the
    ``.txnindex`` entries; one becomes current for its producer once the reading reaches its
    first offset."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # producer -> (entry, a batch was read)
        self._committed: set[int] = set()  # producers with a batch read since their last marker

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._aborted.setdefault(txn.producer_id, (txn, False))
            self._next += 1

    def on_data(self, header: BatchHeader) -> bool:
        """Note a data batch (empty ones too); True if it belongs to an aborted transaction."""
        self._reach(header.last_offset)
        if not header.attributes & TRANSACTIONAL_FLAG:
            return False
        pid = header.producer_id
        current = self._aborted.get(pid)
        if current is not None:
            self._aborted[pid] = (current[0], True)
            return True
        self._committed.add(pid)
        return False

    def on_control(self, batch: memoryview, header: BatchHeader) -> tuple[bool, AbortedTxn | None]:
        """Note a control batch: whether nothing before it needs it any more, and the
        ``.txnindex`` entry it keeps (an ABORT marker whose transaction has batches left)."""
        self._reach(header.last_offset)
        marker = parse_marker(batch, header)
        pid = header.producer_id
        if marker is None:
            return header.records_count <= 0, None  # an emptied control batch; other kinds stay
        if marker.commit:
            needed = pid in self._committed
            self._committed.discard(pid)
            return not needed, None
        current = self._aborted.pop(pid, None)
        if current is not None and current[1]:
            return False, current[0]
        return True, None


def _with_delete_horizon(batch: memoryview, header: BatchHeader, horizon_ms: int) -> bytearray:
    """An uncompressed batch with ``horizon_ms`` as its delete horizon: attribute bit 6, base
    timestamp the horizon, each record's timestamp delta rebased so its timestamp is unchanged."""
    raw = bytes(batch[HEADER_SIZE : header.size])
    shift = header.base_timestamp - horizon_ms
    body = bytearray()
    for start, end, _o, ts_delta, _k, _t in _records(raw, header):
        _length, p = read_varint(raw, start)
        _old, after_ts = read_varint(raw, p + 1)
        record = bytearray(raw[p : p + 1])
        encode_varint(ts_delta + shift, record.append)
        record += raw[after_ts:end]
        encode_varint(len(record), body.append)
        body += record
    rebuilt = BatchHeader(**{name: getattr(header, name) for name in BatchHeader.__dataclass_fields__})
    rebuilt.base_timestamp = horizon_ms
    return with_body(rebuilt, header.attributes | DELETE_HORIZON_FLAG, bytes(body))


def _untouched(header: BatchHeader) -> bool:
    """Markers (control batches) and batches without records are kept as they are."""
    return bool(header.attributes & CONTROL_FLAG) or header.records_count <= 0


def _raw_records(batch: memoryview, header: BatchHeader) -> bytes:
    body = batch[HEADER_SIZE : header.size]
    return decompress(header.compression, body) if header.compression else bytes(body)


# ---------------------------------------------------------------------- one cleaning


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


@dataclass
class CleanedGroup:
    base: int
    old: list[LogSegment]
    bytes_read: int
    bytes_written: int
    unchanged: bool


@dataclass
class CleanResult:
    groups: list[CleanedGroup] = field(default_factory=list)
    map_end: int = 0
    records_removed: int = 0

    @property
    def bytes_read(self) -> int:
        return sum(g.bytes_read for g in self.groups)

    @property
    def bytes_written(self) -> int:
        return sum(g.bytes_written for g in self.groups if not g.unchanged)


def build_offset_map(plan: Plan, throttler: Throttler, cancelled: threading.Event) -> tuple[dict[bytes, int], int]:
    """Latest offset of each key in the dirty segments, and the offset the map reaches."""
    latest: dict[bytes, int] = {}
    end = plan.first_dirty
    for seg, size in zip(plan.segments, plan.sizes, strict=True):
        if seg.next_offset <= plan.first_dirty:
            continue
        if latest and len(latest) >= plan.max_map_keys:
            break  # full: the map ends at this segment boundary
        for header, batch in _iter_batches(seg.log_path, size, throttler):
            if cancelled.is_set():
                raise Cancelled
            if _untouched(header) or plan.aborted_ranges.contains(header):
                continue  # aborted records shadow nothing
            first_dirty = plan.first_dirty
            for _start, _end, offset, _ts, key, _tomb in _records(_raw_records(batch, header), header):
                if key is not None and offset >= first_dirty:
                    latest[key] = offset
        end = seg.next_offset
    return latest, end


def group_segments(segments: list[LogSegment], sizes: list[int], cfg: CleanerConfig) -> list[list[int]]:
    """Indexes of consecutive segments cleaned into one (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[int]] = []
    i = 0
    while i < len(segments):
        group = [i]
        size = sizes[i]
        index_bytes = len(segments[i].offset_index) * 8
        time_bytes = len(segments[i].time_index) * 12
        j = i + 1
        while j < len(segments):
            nxt = segments[j]
            if (size + sizes[j] > cfg.segment_bytes
                    or index_bytes + len(nxt.offset_index) * 8 > cfg.index_max_bytes
                    or time_bytes + len(nxt.time_index) * 12 > cfg.index_max_bytes
                    or nxt.next_offset - 1 - segments[i].base_offset > INT32_MAX):
                break
            size += sizes[j]
            index_bytes += len(nxt.offset_index) * 8
            time_bytes += len(nxt.time_index) * 12
            group.append(j)
            j += 1
        groups.append(group)
        i = j
    return groups


def _retained_batch(batch: memoryview, header: BatchHeader, raw: bytes, kept: list[_Record]) -> bytearray:
    """The batch with only ``kept`` records (same base offset, last offset delta, producer fields)."""
    attributes = header.attributes
    rebuilt = BatchHeader(**{name: getattr(header, name) for name in BatchHeader.__dataclass_fields__})
    rebuilt.records_count = len(kept)
    if not kept:  # an empty batch: the header alone, uncompressed
        return with_body(rebuilt, attributes & ~COMPRESSION_MASK, b"")
    body = b"".join(raw[r[START] : r[END]] for r in kept)
    packed = compress(header.compression, body) if header.compression else body
    if not header.is_log_append_time:
        rebuilt.max_timestamp = max(header.base_timestamp + r[TS_DELTA] for r in kept)
    return with_body(rebuilt, attributes, packed)


def write_cleaned(plan: Plan, throttler: Throttler, cancelled: threading.Event,
                  hook: StepHook | None = None) -> CleanResult:
    """Build the offset map and write every group's ``.cleaned`` files (fsynced). Thread-safe:
    reads the segment files with its own descriptors and writes only ``.cleaned`` files."""
    step = hook or (lambda _s: None)
    latest, map_end = build_offset_map(plan, throttler, cancelled)
    result = CleanResult(map_end=map_end)
    in_range = [i for i, seg in enumerate(plan.segments) if seg.base_offset < map_end]
    segments = [plan.segments[i] for i in in_range]
    sizes = [plan.sizes[i] for i in in_range]
    newest = [plan.newest[i] for i in in_range]
    aborted = [plan.aborted[i] for i in in_range]
    cfg = plan.config
    last_of_producer = set(plan.producer_last_offsets.items())
    txns = TransactionsSeen([t for t in plan.aborted_ranges.entries if t.first_offset < map_end])
    for group in group_segments(segments, sizes, cfg):
        olds = [segments[i] for i in group]
        base = olds[0].base_offset
        out = LogSegment(plan.directory, base, cfg.index_max_bytes, cfg.index_interval_bytes, plan.now_ms)
        out.log_path = cleaned_path(plan.directory, base, ".log")
        out.offset_index.path = cleaned_path(plan.directory, base, ".index")
        out.time_index.path = cleaned_path(plan.directory, base, ".timeindex")
        out.fd = os.open(out.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        read = 0
        changed = False
        entries: list[AbortedTxn] = []  # the cleaned segment's .txnindex
        try:
            for k, i in enumerate(group):
                seg, size = segments[i], sizes[i]
                read += size
                # tombstones go once cleaned before (below the first dirty offset) and old enough
                drop_tombstones = (seg.next_offset <= plan.first_dirty
                                   and plan.now_ms - newest[i] > cfg.delete_retention_ms)
                batches = list(_iter_batches(seg.log_path, size, throttler))
                for n, (header, batch) in enumerate(batches):
                    if cancelled.is_set():
                        raise Cancelled
                    last_of_group = k == len(olds) - 1 and n == len(batches) - 1
                    keep_empty = last_of_group or (header.producer_id, header.last_offset) in last_of_producer
                    if header.is_control:
                        kept_batch = _clean_control(batch, header, txns, entries, plan, keep_empty)
                        if kept_batch is not None:
                            out.append(bytes(kept_batch), BatchHeader.parse(kept_batch))
                        changed |= kept_batch is not batch
                        continue
                    aborted_txn = txns.on_data(header)
                    if _untouched(header):
                        if keep_empty:
                            out.append(bytes(batch), header)
                        else:
                            changed = True  # an empty batch no longer needed by its producer
                        continue
                    if aborted_txn:  # an aborted transaction's records all go
                        raw, removed, kept = b"", header.records_count, []
                    else:
                        raw = _raw_records(batch, header)
                        records = _records(raw, header)
                        kept = [r for r in records
                                if r[KEY] is not None and latest.get(r[KEY], r[OFFSET]) <= r[OFFSET]
                                and not (r[TOMBSTONE] and drop_tombstones)]
                        removed = len(records) - len(kept)
                    if not removed:
                        out.append(bytes(batch), header)
                        continue
                    changed = True
                    result.records_removed += removed
                    if not kept and not keep_empty:
                        continue
                    new = _retained_batch(batch, header, raw, kept)
                    out.append(new, BatchHeader.parse(new))
                step("batch-written")
            if entries != [t for i in group for t in aborted[i]]:
                changed = True  # entries of markers that went, or of transactions with nothing left
            if not changed and len(olds) == 1:
                result.groups.append(CleanedGroup(base, olds, read, 0, True))
                out.close()
                for suffix in (".log", ".index", ".timeindex"):
                    cleaned_path(plan.directory, base, suffix).unlink(missing_ok=True)
                continue
            out.time_index.maybe_append(out.max_timestamp, out.offset_of_max_timestamp)
            os.fsync(out.fd)
            step("cleaned-log-synced")
            out.offset_index.save()
            out.time_index.save()
            _write_aborted(cleaned_path(plan.directory, base, ".txnindex"), entries)
            step("cleaned-indexes-saved")
            throttler.add(out.size)
            result.groups.append(CleanedGroup(base, olds, read, out.size, False))
        except BaseException:
            remove_cleaned(plan.directory)
            raise
        finally:
            if out.fd >= 0:
                os.close(out.fd)
                out.fd = -1
    return result


def _clean_control(batch: memoryview, header: BatchHeader, txns: TransactionsSeen, entries: list[AbortedTxn],
                   plan: Plan, keep: bool) -> memoryview | bytearray | None:
    """What becomes of a control batch: ``batch`` itself (kept as it is), a copy carrying its
    delete horizon (its transaction has nothing left: removed by a cleaning past the horizon), or
    None (removed). An ABORT marker still needed adds its ``.txnindex`` entry to ``entries``."""
    removable, entry = txns.on_control(batch, header)
    if entry is not None:
        entries.append(entry)
    if (not removable or keep
            or plan.producer_marker_epochs.get(header.producer_id) == header.producer_epoch):
        return batch
    if header.records_count <= 0:
        return None
    if not header.attributes & DELETE_HORIZON_FLAG:
        return _with_delete_horizon(batch, header, plan.now_ms + plan.config.delete_retention_ms)
    return None if header.base_timestamp <= plan.now_ms else batch


def _write_aborted(path: Path, entries: list[AbortedTxn]) -> None:
    """The cleaned segment's ``.txnindex``: the entries of the ABORT markers whose transactions
    still have batches in it, fsynced; no file when there is none, as for any segment."""
    if not entries:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(t.encode() for t in entries))
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_cleaned(directory: Path) -> None:
    for entry in os.listdir(directory):
        if entry.endswith(CLEANED) or entry.endswith(CLEANED + ".tmp"):
            (directory / entry).unlink(missing_ok=True)


def install(plog: PartitionLog, result: CleanResult, now_ms: int, hook: StepHook | None = None) -> bool:
    """Swap the cleaned groups into ``plog`` (event loop). False, with the ``.cleaned`` files
    removed, if the log changed under the cleaning (closed, or segments deleted by retention)."""
    current = plog.segments
    ids = {id(s) for s in current}
    if plog.closed or any(id(s) not in ids for g in result.groups for s in g.old):
        remove_cleaned(plog.dir)
        return False
    changed = [g for g in result.groups if not g.unchanged]
    promote_cleaned(plog.dir, [g.base for g in changed], hook)
    for group in changed:
        replace_with_swap(plog.dir, group.base, [s.base_offset for s in group.old], hook)
        cfg = CleanerConfig.from_config(plog.config)
        new, reason = LogSegment.open(plog.dir, group.base, cfg.index_max_bytes, cfg.index_interval_bytes,
                                      now_ms)
        if reason is not None:
            new.recover()
            new.save_indexes()
        plog.replace_segments(group.old, new)
    return True


# ---------------------------------------------------------------------- the service


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
        self.data_dir = Path(data_dir)
        self._logs = logs
        self.now_ms = now_ms
        self.io_bytes_per_second = io_bytes_per_second
        self.max_map_keys = max(1000, dedupe_buffer_bytes // _MAP_BYTES_PER_KEY)
        self.cancelled = threading.Event()
        self.stats = CleanerStats()
        self.hook: StepHook | None = None
        self.checkpoints = ckpt.read_offset_checkpoint(self.data_dir / CLEANER_CHECKPOINT) \
            if (self.data_dir / CLEANER_CHECKPOINT).exists() else {}
        self._uncleanable: set[tuple[str, int]] = set()

    def _key(self, plog: PartitionLog) -> tuple[str, int]:
        return plog.topic, plog.partition

    def dirtiest(self) -> tuple[PartitionLog, Cleanable] | None:
        """The compacted log most in need of cleaning (None if none qualifies); also updates the
        backlog metric (largest dirty ratio)."""
        now = self.now_ms()
        best: tuple[PartitionLog, Cleanable] | None = None
        top = 0.0
        for plog in self._logs():
            if not is_compacted(plog) or self._key(plog) in self._uncleanable or plog.closed:
                continue
            c = cleanable(plog, self.checkpoints.get(self._key(plog)), now)
            top = max(top, c.ratio)
            min_ratio = CleanerConfig.from_config(plog.config).min_ratio
            if c.dirty_bytes and (c.must_clean or c.ratio >= min_ratio):
                if best is None or c.must_clean > best[1].must_clean or c.ratio > best[1].ratio:
                    best = (plog, c)
        self.stats.max_dirty_ratio = top
        return best

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
            self.checkpoints[self._key(plog)] = result.map_end
            self.write_checkpoint()
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
        self._uncleanable.add(self._key(plog))

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

    def write_checkpoint(self) -> None:
        live = {self._key(p) for p in self._logs()}
        self.checkpoints = {k: v for k, v in self.checkpoints.items() if k in live}
        ckpt.write_offset_checkpoint(self.data_dir / CLEANER_CHECKPOINT, self.checkpoints)



