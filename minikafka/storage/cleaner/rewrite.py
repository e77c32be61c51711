"""One cleaning: the rewrite of groups of segments into ``.cleaned`` files and their swap into
the log (Kafka's ``Cleaner.cleanSegments`` and ``groupSegmentsBySize``,
``core/src/main/scala/kafka/log/LogCleaner.scala``; the file protocol is :mod:`minikafka.storage.swap`).

:func:`write_cleaned` runs in a worker thread with its own descriptors and writes only
``.cleaned`` files; :func:`install` runs on the event loop and checks that the cleaned segments
are still the log's before swapping them in."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kafka.record.util import encode_varint

from minikafka.storage.batch import COMPRESSION_MASK, HEADER_SIZE, INT32_MAX, BatchHeader
from minikafka.storage.cleaner.manager import CleanerConfig, Plan
from minikafka.storage.cleaner.offset_map import TransactionsSeen, build_offset_map
from minikafka.storage.cleaner.reading import (
    END,
    KEY,
    OFFSET,
    START,
    TOMBSTONE,
    TS_DELTA,
    Cancelled,
    Record,
    Throttler,
    iter_batches,
    parse_records,
    raw_records,
    untouched,
)
from minikafka.storage.log import PartitionLog
from minikafka.storage.recompress import compress, with_body
from minikafka.storage.records import read_varint
from minikafka.storage.segment import LogSegment
from minikafka.storage.swap import CLEANED, StepHook, cleaned_path, promote_cleaned, replace_with_swap
from minikafka.storage.txn_index import AbortedTxn

#: Attribute bit 6: the batch's base timestamp is its delete horizon (KIP-534).
DELETE_HORIZON_FLAG = 0x40


def _with_delete_horizon(batch: memoryview, header: BatchHeader, horizon_ms: int) -> bytearray:
    """An uncompressed batch with ``horizon_ms`` as its delete horizon: attribute bit 6, base
    timestamp the horizon, each record's timestamp delta rebased so its timestamp is unchanged."""
    raw = bytes(batch[HEADER_SIZE : header.size])
    shift = header.base_timestamp - horizon_ms
    body = bytearray()
    for start, end, _o, ts_delta, _k, _t in parse_records(raw, header):
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


def _retained_batch(batch: memoryview, header: BatchHeader, raw: bytes, kept: list[Record]) -> bytearray:
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
                batches = list(iter_batches(seg.log_path, size, throttler))
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
                    if untouched(header):
                        if keep_empty:
                            out.append(bytes(batch), header)
                        else:
                            changed = True  # an empty batch no longer needed by its producer
                        continue
                    if aborted_txn:  # an aborted transaction's records all go
                        raw, removed, kept = b"", header.records_count, []
                    else:
                        raw = raw_records(batch, header)
                        records = parse_records(raw, header)
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

