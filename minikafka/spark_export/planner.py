"""Plan a read: which partitions, which offset range of each, and the slices Spark tasks read.

Runs once per query on the driver. Offsets are resolved against the files as they are at that
moment (earliest = log start offset, latest = the offset after the last complete batch), so a
read of a directory a broker is writing sees one consistent cut of every partition.

Each Spark input partition is a run of consecutive slices of one partition, read one after the
other by one task, as Spark's Kafka source plans one task per topic-partition offset range: a
task costs Spark a fixed amount of work however little it reads (about 0.06-0.08 s of CPU for a
Python data source), so the slices of a partition's segments are packed together up to
``maxBytesPerPartition`` bytes (default 1 GiB: one task per partition for most reads, and no task
much longer than a few seconds). A segment larger than that bound is first split at offset-index
entries, each cut checked against the batch header it points at. ``maxRecordsPerPartition`` then
splits input partitions by offset count, and ``minPartitions`` packs to a smaller bound and splits
the widest input partitions until there are enough.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, replace

from minikafka.spark_export.errors import DataLossError, ExportOptionError
from minikafka.spark_export.files import Files, RangeFile
from minikafka.spark_export.indexes import OffsetIndex
from minikafka.spark_export.layout import PartitionDir, SegmentFile, list_partitions
from minikafka.spark_export.offsets import (
    header_at,
    load_offset_index,
    log_end_offset,
    offset_for_timestamp,
    position_for_offset,
)
from minikafka.spark_export.options import EARLIEST, LATEST, OffsetLimit, ReadOptions
from minikafka.spark_export.scan import SegmentSlice
from minikafka.spark_export.transactions import AbortedTxn, transaction_state
from minikafka.storage.disk_format import TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """The offsets ``[start, end)`` to read from one partition, and its bounds on disk."""

    pdir: PartitionDir
    start: int
    end: int
    log_start: int
    log_end: int
    #: With read_committed: the aborted transactions of the partition (their batches are skipped).
    aborted: tuple[AbortedTxn, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return (self.pdir.topic, self.pdir.partition)


def select_partitions(partitions: list[PartitionDir], opts: ReadOptions) -> list[PartitionDir]:
    """The partitions the topic options ask for; internal topics only when named."""
    if opts.assign is not None:
        by_tp = {(p.topic, p.partition): p for p in partitions}
        missing = [f"{t}-{n}" for t, n in opts.assign if (t, n) not in by_tp]
        if missing:
            raise ExportOptionError(f"assigned partitions not found in {opts.path}: {', '.join(missing)}")
        return [by_tp[tp] for tp in sorted(set(opts.assign))]
    if opts.subscribe is not None:
        topics = set(opts.subscribe)
        return [p for p in partitions if p.topic in topics]
    if opts.subscribe_pattern is not None:
        pattern = re.compile(opts.subscribe_pattern)
        return [p for p in partitions if not p.is_internal and pattern.fullmatch(p.topic)]
    return [p for p in partitions if not p.is_internal]


def partition_bounds(files: Files, pdir: PartitionDir) -> tuple[int, int]:
    """(log start offset, log end offset) of a partition; for a cluster's replica the end is its
    high watermark when that is lower."""
    if not pdir.segments:
        start = pdir.checkpoint_start or 0
        return start, start
    end = log_end_offset(files, pdir)
    if pdir.high_watermark is not None:  # a cluster's replica: what lies above was never committed
        end = min(end, pdir.high_watermark)
    start = pdir.segments[0].base_offset
    if pdir.checkpoint_start is not None:
        start = max(start, pdir.checkpoint_start)
    return min(start, end), end


def readable_bounds(files: Files, pdir: PartitionDir, opts: ReadOptions) -> tuple[int, int, tuple[AbortedTxn, ...]]:
    """(log start offset, end of what this read may return, aborted transactions): the end is the
    log end offset, or with ``read_committed`` the last stable offset of the files (nothing from
    an open transaction on), and only then are aborted transactions looked for."""
    log_start, log_end = partition_bounds(files, pdir)
    if not opts.read_committed:
        return log_start, log_end, ()
    state = transaction_state(files, pdir, log_end)
    return log_start, max(log_start, state.last_stable_offset), state.aborted


def _check_keys(limit: OffsetLimit, selected: list[PartitionDir], option: str) -> None:
    wanted = {(p.topic, p.partition) for p in selected}
    given = set(limit.per_partition or {})
    if given != wanted:
        fmt = ", ".join(f"{t}-{n}" for t, n in sorted(given))
        have = ", ".join(f"{t}-{n}" for t, n in sorted(wanted))
        raise ExportOptionError(
            f"If {option} contains specific offsets, you must specify all TopicPartitions. "
            f"Use -1 for latest, -2 for earliest. Specified: {{{fmt}}} Assigned: {{{have}}}"
        )


def _resolve(files: Files, limit: OffsetLimit, pdir: PartitionDir, log_start: int, log_end: int, starting: bool,
             no_match_latest: bool) -> int:
    tp = (pdir.topic, pdir.partition)
    if limit.kind == "earliest":
        return log_start
    if limit.kind == "latest":
        return log_end
    if limit.kind == "offsets":
        value = (limit.per_partition or {})[tp]
        return log_start if value == EARLIEST else log_end if value == LATEST else value
    timestamp = limit.timestamp if limit.kind == "timestamp" else (limit.per_partition or {})[tp]
    assert timestamp is not None
    found = offset_for_timestamp(files, pdir, timestamp, log_start)
    if found is not None:
        return min(found, log_end)
    if starting and not no_match_latest:
        raise ExportOptionError(f"No offset matched from request of topic-partition {pdir.topic}-{pdir.partition} "
                                f"and timestamp {timestamp}.")
    return log_end


def resolve_ranges(files: Files, selected: list[PartitionDir], opts: ReadOptions) -> list[PartitionRange]:
    for limit, option in ((opts.starting, "startingOffsets"), (opts.ending, "endingOffsets")):
        if limit.kind in ("offsets", "timestamps"):
            _check_keys(limit, selected, option if limit.kind == "offsets" else option + "ByTimestamp")
    out: list[PartitionRange] = []
    for pdir in selected:
        log_start, log_end, aborted = readable_bounds(files, pdir, opts)
        start = _resolve(files, opts.starting, pdir, log_start, log_end, True, opts.no_match_latest)
        end = _resolve(files, opts.ending, pdir, log_start, log_end, False, opts.no_match_latest)
        name = f"{pdir.topic}-{pdir.partition}"
        if start > end:
            raise ExportOptionError(f"{name}: the resolved starting offset {start} is greater than the ending "
                                    f"offset {end}")
        if start < log_start:
            if opts.fail_on_data_loss:
                raise DataLossError(f"{name}: starting offset {start} is below the log start offset {log_start}.")
            start = log_start
        if end > log_end:
            if opts.fail_on_data_loss:
                raise DataLossError(f"{name}: ending offset {end} is beyond the log end offset {log_end}.")
            end = log_end
        out.append(PartitionRange(pdir, start, max(start, end), log_start, log_end, aborted))
    return out


class _SegmentCache:
    """Open files and loaded offset indexes, shared by all the splitting steps."""

    def __init__(self, files: Files) -> None:
        self.files = files
        self._indexes: dict[str, OffsetIndex] = {}
        self._fds: dict[str, RangeFile] = {}

    def index(self, seg: SegmentFile) -> OffsetIndex:
        if seg.log_path not in self._indexes:
            self._indexes[seg.log_path] = load_offset_index(self.files, seg)
        return self._indexes[seg.log_path]

    def fd(self, seg: SegmentFile) -> RangeFile:
        if seg.log_path not in self._fds:
            self._fds[seg.log_path] = self.files.open(seg.log_path)
        return self._fds[seg.log_path]

    def position(self, seg: SegmentFile, offset: int) -> int:
        if offset <= seg.base_offset:
            return 0
        try:
            return position_for_offset(self.fd(seg), seg, self.index(seg), offset)
        except FileNotFoundError:  # deleted by retention since it was listed: the task reports it
            return 0

    def close(self) -> None:
        for fd in self._fds.values():
            fd.close()
        self._fds.clear()


def _byte_cuts(cache: _SegmentCache, seg: SegmentFile, sl: SegmentSlice, max_bytes: int) -> list[SegmentSlice]:
    """Split ``sl`` at offset-index entries into pieces of at most ``max_bytes`` where the index
    is dense enough (a piece grows past it only when no entry falls inside)."""
    end_pos = sl.end_position
    if end_pos - sl.start_position <= max_bytes:
        return [sl]
    index = cache.index(seg)
    try:
        cache.fd(seg)
    except FileNotFoundError:
        return [sl]
    entries = [(p, o) for o, p in zip(index.offsets, index.positions, strict=True) if sl.start_position < p < end_pos]
    cand_positions = [p for p, _ in entries]
    pieces: list[SegmentSlice] = []
    cur = sl
    i = 0
    while i < len(entries) and end_pos - cur.start_position > max_bytes:
        j = bisect_right(cand_positions, cur.start_position + max_bytes) - 1
        j = max(j, i)
        position, last_offset = entries[j]
        i = j + 1
        header = header_at(cache.fd(seg), position, seg.size)
        if header is None or header.last_offset != last_offset:
            continue
        cut = header.base_offset
        if cut >= cur.end_offset:
            break
        if cut <= cur.start_offset:
            continue
        pieces.append(replace(cur, end_position=position, end_offset=cut, at_log_end=False))
        cur = replace(cur, start_position=position, start_offset=cut)
    pieces.append(cur)
    return pieces


#: Consecutive slices of one partition, in offset order, with their segments: one input partition.
_Run = list[tuple[SegmentSlice, SegmentFile]]


def _nbytes(run: _Run) -> int:
    return sum(s.end_position - s.start_position for s, _ in run)


def _span(run: _Run) -> int:
    return run[-1][0].end_offset - run[0][0].start_offset


def _pack(pieces: _Run, max_bytes: int) -> list[_Run]:
    """Consecutive pieces of one partition, packed in order into runs of at most ``max_bytes``
    (a piece larger than that, where the index left no cut, is a run of its own)."""
    runs: list[_Run] = []
    size = 0
    for piece in pieces:
        length = piece[0].end_position - piece[0].start_position
        if not runs or size + length > max_bytes:
            runs.append([])
            size = 0
        runs[-1].append(piece)
        size += length
    return runs


def _clip(cache: _SegmentCache, seg: SegmentFile, sl: SegmentSlice, lo: int, hi: int) -> SegmentSlice:
    """The offsets ``[lo, hi)`` of ``sl``, starting at the index entry at or before ``lo``."""
    start_pos = sl.start_position if lo == sl.start_offset else max(sl.start_position, cache.position(seg, lo))
    return replace(sl, start_position=start_pos, start_offset=lo, end_offset=hi)


def _offset_split(cache: _SegmentCache, run: _Run, parts: int) -> list[_Run]:
    """Split ``run`` into ``parts`` runs of (nearly) equal offset counts."""
    lo, span = run[0][0].start_offset, _span(run)
    parts = max(1, min(parts, span))
    bounds = [lo + span * k // parts for k in range(parts + 1)]
    return [[(_clip(cache, seg, sl, max(a, sl.start_offset), min(b, sl.end_offset)), seg)
             for sl, seg in run if sl.start_offset < b and sl.end_offset > a]
            for a, b in zip(bounds, bounds[1:], strict=False)]


def plan_partitions(files: Files, ranges: list[PartitionRange], opts: ReadOptions) -> list[tuple[SegmentSlice, ...]]:
    """The input partitions of a read: each the slices one task reads, in offset order."""
    cache = _SegmentCache(files)
    try:
        runs = _plan(cache, ranges, opts, opts.max_bytes_per_partition)
        if opts.min_partitions and len(runs) < opts.min_partitions:
            smaller = max(1, sum(_nbytes(r) for r in runs) // opts.min_partitions)
            if smaller < opts.max_bytes_per_partition:
                runs = _plan(cache, ranges, opts, smaller)
            while len(runs) < opts.min_partitions:
                widest = max(range(len(runs)), key=lambda i: _span(runs[i]))
                if _span(runs[widest]) < 2:
                    break
                runs[widest : widest + 1] = _offset_split(cache, runs[widest], 2)
        return [tuple(s for s, _ in run) for run in runs]
    finally:
        cache.close()


def _plan(cache: _SegmentCache, ranges: list[PartitionRange], opts: ReadOptions, max_bytes: int) -> list[_Run]:
    out: list[_Run] = []
    for rng in ranges:
        if rng.start >= rng.end:
            continue
        pieces: _Run = []
        segments = rng.pdir.segments
        for i, seg in enumerate(segments):
            is_last = i == len(segments) - 1
            seg_end = rng.log_end if is_last else segments[i + 1].base_offset
            lo, hi = max(rng.start, seg.base_offset), min(rng.end, seg_end)
            if lo >= hi:
                continue
            sl = SegmentSlice(
                topic=rng.pdir.topic,
                partition=rng.pdir.partition,
                log_path=seg.log_path,
                base_offset=seg.base_offset,
                start_position=cache.position(seg, lo),
                end_position=seg.size,
                start_offset=lo,
                end_offset=hi,
                at_log_end=is_last,
                aborted=tuple(a for a in rng.aborted if a.last_offset >= lo and a.first_offset < hi),
            )
            pieces.extend((p, seg) for p in _byte_cuts(cache, seg, sl, max_bytes))
        runs = _pack(pieces, max_bytes)
        if opts.max_records_per_partition:
            limit = opts.max_records_per_partition
            runs = [part for run in runs for part in _offset_split(cache, run, -(-_span(run) // limit))]
        out.extend(runs)
    return out


def plan_read(opts: ReadOptions) -> tuple[list[PartitionRange], list[tuple[SegmentSlice, ...]]]:
    """The offset range of every selected partition and the input partitions that cover them."""
    files = opts.storage.files()
    selected = select_partitions(list_partitions(files), opts)
    ranges = resolve_ranges(files, selected, opts)
    return ranges, plan_partitions(files, ranges, opts)


def plan_ranges(opts: ReadOptions) -> tuple[list[PartitionRange], list[SegmentSlice]]:
    """The offset range of every selected partition and the slices that cover them."""
    ranges, parts = plan_read(opts)
    return ranges, [sl for part in parts for sl in part]


def plan(opts: ReadOptions) -> list[SegmentSlice]:
    """All slices of a read, in topic, partition, offset order."""
    return plan_ranges(opts)[1]
