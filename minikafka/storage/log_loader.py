"""Loading a partition's log from its directory: recovery after a crash and the producer-state rebuild.

:meth:`PartitionLog.open <minikafka.storage.log.PartitionLog.open>` calls :func:`load` once, before the
log serves anything. It finishes the log cleaner's interrupted swaps, removes leftover temporary files,
opens every segment (rebuilding unusable indexes, and after an unclean shutdown re-validating every
segment from the recovery point on), drops overlapping segments, and rebuilds the producer state and
the aborted-transaction index of the recovered segments (docs/semantics.md#recovery). Every repair is
logged. Appending, reading and retention stay in :mod:`minikafka.storage.log`.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from minikafka.storage.batch import BatchHeader
from minikafka.storage.control import parse_marker
from minikafka.storage.disk_format import SEGMENT_INDEX_SUFFIXES, SEGMENT_LOG_NAME, offset_file_name
from minikafka.storage.producer_state import ProducerStateManager
from minikafka.storage.segment import LogSegment
from minikafka.storage.swap import complete_interrupted_swaps

if TYPE_CHECKING:
    from minikafka.storage.log import PartitionLog

# The repairs are logged under the log module's name, as they were before loading had its own module.
log = logging.getLogger(__name__)

_SEGMENT_NAME = SEGMENT_LOG_NAME
_INDEX_SUFFIXES = SEGMENT_INDEX_SUFFIXES
_TEMP_SUFFIXES = (".deleted", ".cleaned", ".swap")


def _close_quietly(segments: list[LogSegment]) -> None:
    for seg in segments:
        try:
            seg.close()
        except OSError:
            pass


def load(plog: PartitionLog, clean: bool, checkpoint_start: int, checkpoint_recovery: int) -> None:
    plog.dir.mkdir(parents=True, exist_ok=True)
    now = plog._now_ms()
    _remove_temporary_files(plog)
    bases = _segment_bases_on_disk(plog)
    recovered: set[int] = set()
    segments: list[LogSegment] = []
    try:
        _open_and_recover(plog, bases, segments, recovered, clean, checkpoint_recovery, now)
    except BaseException:
        _close_quietly(segments)
        raise
    segments = _drop_overlapping(plog, segments)
    _finish_load(plog, segments, bases, recovered, clean, checkpoint_start, checkpoint_recovery, now)


def _open_and_recover(plog: PartitionLog, bases: list[int], segments: list[LogSegment], recovered: set[int],
                      clean: bool, checkpoint_recovery: int, now: int) -> None:
    """Open every segment, rebuilding those with unusable indexes, then (after an unclean
    shutdown) re-validate from the recovery point on. Fills ``segments`` and ``recovered``."""
    s = plog._settings
    # After a crash every segment from the one holding the recovery point on is re-validated.
    first_unflushed = max(0, bisect.bisect_right(bases, checkpoint_recovery) - 1) if not clean else len(bases)
    for i, base in enumerate(bases):
        seg, reason = LogSegment.open(plog.dir, base, s.index_max_bytes, s.index_interval_bytes, now,
                                      revalidate=i >= first_unflushed)
        segments.append(seg)
        if reason is not None:
            # Re-validating after a crash is routine (LogManager.load sums it up in one line per data
            # dir); an index found unusable is not, and is a warning of its own.
            log.log(logging.DEBUG if i >= first_unflushed else logging.WARNING,
                    "%s: rebuilding segment %d: %s", plog.name, base, reason)
            recovered.add(base)
            if _recover_segment(plog, seg):
                _delete_files_of_later_segments(plog, bases[i + 1:], f"segment {base} was truncated")
                break
    if not clean and segments:
        start = max(0, bisect.bisect_right([g.base_offset for g in segments], checkpoint_recovery) - 1)
        log.info("%s: unclean shutdown, re-validating %d segment(s) from offset %d",
                 plog.name, len(segments) - start, segments[start].base_offset)
        for i in range(start, len(segments)):
            seg = segments[i]
            if seg.base_offset in recovered:
                continue
            recovered.add(seg.base_offset)
            if _recover_segment(plog, seg):
                for other in segments[i + 1:]:
                    log.warning("%s: deleting segment %d after the truncated segment %d",
                                plog.name, other.base_offset, seg.base_offset)
                    other.delete()
                del segments[i + 1:]
                break


def _finish_load(plog: PartitionLog, segments: list[LogSegment], bases: list[int], recovered: set[int], clean: bool,
                 checkpoint_start: int, checkpoint_recovery: int, now: int) -> None:
    s = plog._settings
    end = segments[-1].next_offset if segments else checkpoint_start
    if segments and end < checkpoint_start:
        log.warning("%s: log end %d is below the checkpointed log start %d: deleting all segments",
                    plog.name, end, checkpoint_start)
        for seg in segments:
            seg.delete()
        segments = []
    if not segments:
        start_at = max(checkpoint_start, 0)
        if bases:
            log.info("%s: starting an empty segment at %d", plog.name, start_at)
        segments = [LogSegment.create(plog.dir, start_at, s.index_max_bytes, s.index_interval_bytes, now)]
        recovered.discard(start_at)
        plog._dir_needs_sync = True
    else:
        for seg in segments[:-1]:
            if seg.base_offset in recovered:
                seg.save_indexes()
        segments[-1].make_active(rewrite_indexes=segments[-1].base_offset in recovered)
    plog._segments = segments
    plog._bases = [g.base_offset for g in segments]
    plog.log_end_offset = plog.high_watermark = segments[-1].next_offset
    plog.log_start_offset = max(checkpoint_start, segments[0].base_offset)
    plog.recovery_point = plog.log_end_offset if clean else min(checkpoint_recovery, plog.log_end_offset)
    _load_producer_state(plog, recovered.intersection(plog._bases))


def _remove_temporary_files(plog: PartitionLog) -> None:
    complete_interrupted_swaps(plog.dir, plog.name)  # the log cleaner's .cleaned/.swap files
    for path in plog.dir.iterdir():
        name = path.name
        if name.endswith(_TEMP_SUFFIXES) or name.endswith((".index.tmp", ".timeindex.tmp")):
            log.warning("%s: removing leftover file %s", plog.name, name)
            path.unlink(missing_ok=True)


def _segment_bases_on_disk(plog: PartitionLog) -> list[int]:
    bases: list[int] = []
    names = {p.name for p in plog.dir.iterdir()}
    for name in names:
        m = _SEGMENT_NAME.match(name)
        if m:
            bases.append(int(m.group(1)))
    for name in names:
        for suffix in _INDEX_SUFFIXES:
            if name.endswith(suffix) and name[:20].isdigit() and len(name) == 20 + len(suffix):
                if offset_file_name(int(name[:20]), ".log") not in names:
                    log.warning("%s: deleting index file %s without a .log", plog.name, name)
                    (plog.dir / name).unlink(missing_ok=True)
    return sorted(bases)


def _recover_segment(plog: PartitionLog, seg: LogSegment) -> bool:
    """Recover one segment; True if bytes were cut off (later segments must then go)."""
    try:
        truncated, reason = seg.recover()
    except OSError as e:
        log.error("%s: cannot read segment %d (%s): emptying it", plog.name, seg.base_offset, e)
        seg.truncate_to_empty()
        return True
    if truncated:
        log.warning("%s: segment %d truncated to %d bytes (end offset %d), %d bytes cut: %s",
                    plog.name, seg.base_offset, seg.size, seg.next_offset, truncated, reason)
        return True
    return False


def _delete_files_of_later_segments(plog: PartitionLog, bases: list[int], why: str) -> None:
    for base in bases:
        log.warning("%s: deleting segment %d: %s", plog.name, base, why)
        for suffix in (".log",) + _INDEX_SUFFIXES:
            (plog.dir / offset_file_name(base, suffix)).unlink(missing_ok=True)


def _drop_overlapping(plog: PartitionLog, segments: list[LogSegment]) -> list[LogSegment]:
    """Segments must not overlap; a gap is only reported (reads skip over it)."""
    for i in range(len(segments) - 1):
        cur, nxt = segments[i], segments[i + 1]
        if cur.next_offset > nxt.base_offset:
            for other in segments[i + 1:]:
                log.warning("%s: deleting segment %d: it overlaps segment %d (ending at %d)",
                            plog.name, other.base_offset, cur.base_offset, cur.next_offset)
                other.delete()
            return segments[: i + 1]
        if cur.next_offset < nxt.base_offset:
            log.warning("%s: offsets %d..%d are missing between segments %d and %d", plog.name,
                        cur.next_offset, nxt.base_offset - 1, cur.base_offset, nxt.base_offset)
    return segments


def _load_producer_state(plog: PartitionLog, rebuilt: set[int]) -> None:
    """Kafka's rebuild (docs/semantics.md#producer-state-rebuild), except its shortcut: a log with no snapshot at all is replayed
    from its start even after a clean shutdown, so minikafka never forgets producers whose
    snapshots were lost.

    ``rebuilt`` holds the base offsets of the segments recovered at this load: their
    aborted-transaction index is written again while their batches are replayed, so the
    state must be replayed from a snapshot at or before the first of them (later snapshots
    describe data that recovery may have cut). Other segments keep their index as it is."""
    ps = ProducerStateManager(plog.dir, plog._producer_expiration_ms, plog._now_ms,
                              max_entries=plog._producer_max_entries, on_snapshot=plog._snapshot_written)
    plog.producer_state = ps
    ps.remove_stray_snapshots(list(plog._bases))
    ps.truncate_and_reload(plog.log_start_offset, plog.log_end_offset)
    # Replay starts at the log start at the earliest; index entries of markers below it are
    # never read (a fetch starts at or above the log start).
    rebuild_from = max(min(rebuilt), plog.log_start_offset) if rebuilt else None
    if rebuild_from is not None and ps.map_end_offset > rebuild_from:
        ps.truncate_and_reload(plog.log_start_offset, rebuild_from)
    start = max(ps.map_end_offset, plog.log_start_offset)
    if start < plog.log_end_offset:
        now = plog._now_ms()
        count = 0
        for seg, pos, header in _iter_headers_from(plog, start):
            _replay(plog, seg, pos, header, now, seg.base_offset in rebuilt)
            count += 1
        log.info("%s: producer state rebuilt from offset %d to %d (%d batches replayed)",
                 plog.name, start, plog.log_end_offset, count)
    if ps.latest_snapshot_offset() != plog.log_end_offset:
        ps.take_snapshot(plog.log_end_offset)


def _replay(plog: PartitionLog, seg: LogSegment, pos: int, header: BatchHeader, now_ms: int, index: bool) -> None:
    """Replay one batch of the log into the producer state (markers close transactions, and
    with ``index`` an ABORT adds its entry to the segment's aborted-transaction index)."""
    if header.is_control and header.producer_id >= 0:
        marker = parse_marker(seg.read_batch(pos, header), header)
        if marker is not None:
            plog._apply_marker(seg, header, marker, now_ms, index)
            return
    plog.producer_state.update(header, now_ms)


def _iter_headers_from(plog: PartitionLog, offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """Segment, position and header of every batch whose last offset is >= ``offset``."""
    first = True
    for seg in plog._segments[plog._segment_index(offset):]:
        pos = 0
        if first:
            first = False
            found = seg.find_batch(offset)
            if found is None:
                continue
            pos = found[0]
        for bpos, header in seg.iter_headers(pos):
            yield seg, bpos, header
