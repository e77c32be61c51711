"""Loading a partition's log from its directory: recovery after a crash and the producer-state rebuild.

:meth:`PartitionLog.open <minikafka.storage.log.PartitionLog.open>` calls :func:`load` once and
builds the log from the :class:`LoadedLog` it returns (Kafka's ``LogLoader`` and its
``LoadedLogOffsets``). Loading finishes the log cleaner's interrupted swaps, removes leftover
temporary files, opens every segment (rebuilding unusable indexes, and after an unclean shutdown
re-validating every segment from the recovery point on), drops overlapping segments, and rebuilds
the producer state and the aborted-transaction index of the recovered segments
(docs/semantics.md#recovery). Every repair is logged. Appending and reading are
:mod:`minikafka.storage.log`'s.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from minikafka.storage.disk_format import SEGMENT_INDEX_SUFFIXES, SEGMENT_LOG_NAME, offset_file_name
from minikafka.storage.leader_epoch import LeaderEpochCache
from minikafka.storage.log_settings import LogSettings
from minikafka.storage.producer_replay import rebuild_producer_state
from minikafka.storage.producer_state import ProducerStateManager
from minikafka.storage.segment import LogSegment
from minikafka.storage.swap import complete_interrupted_swaps

log = logging.getLogger(__name__)

_SEGMENT_NAME = SEGMENT_LOG_NAME
_INDEX_SUFFIXES = SEGMENT_INDEX_SUFFIXES
_TEMP_SUFFIXES = (".deleted", ".cleaned", ".swap")


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What loading a partition directory found: the open segments (the last one active), the
    rebuilt producer state and the offsets the log starts from."""

    segments: tuple[LogSegment, ...]
    producer_state: ProducerStateManager
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    #: a segment file was created: the directory entry is not yet durable
    dir_needs_sync: bool
    #: the leader epochs of the log (leader-epoch-checkpoint), trimmed to the offsets loaded
    epochs: LeaderEpochCache


@dataclass(frozen=True, slots=True)
class _Dir:
    """The partition directory being loaded and what loading reads from its log's settings."""

    path: Path
    name: str
    settings: LogSettings


def _close_quietly(segments: list[LogSegment]) -> None:
    for seg in segments:
        try:
            seg.close()
        except OSError:
            pass


def load(directory: Path, name: str, settings: LogSettings, *, clean: bool, checkpoint_start: int,
         checkpoint_recovery: int, now_ms: Callable[[], int], producer_expiration_ms: int,
         producer_max_entries: int | None) -> LoadedLog:
    """Open, recover and load the partition in ``directory`` (created if missing).

    ``checkpoint_start`` and ``checkpoint_recovery`` come from the data dir's checkpoint files;
    ``clean`` says whether the last shutdown was clean (docs/semantics.md#clean-shutdown)."""
    directory.mkdir(parents=True, exist_ok=True)
    d = _Dir(directory, name, settings)
    now = now_ms()
    _remove_temporary_files(d)
    bases = _segment_bases_on_disk(d)
    recovered: set[int] = set()
    segments: list[LogSegment] = []
    try:
        _open_and_recover(d, bases, segments, recovered, clean, checkpoint_recovery, now)
    except BaseException:
        _close_quietly(segments)
        raise
    segments = _drop_overlapping(d, segments)
    segments, dir_needs_sync = _finish_segments(d, segments, bases, recovered, checkpoint_start, now)
    log_end = segments[-1].next_offset
    log_start = max(checkpoint_start, segments[0].base_offset)
    ps = ProducerStateManager(directory, producer_expiration_ms, now_ms, max_entries=producer_max_entries)
    _load_producer_state(d, ps, segments, log_start, log_end, now_ms,
                         frozenset(recovered.intersection(g.base_offset for g in segments)))
    epochs = LeaderEpochCache.load(directory)
    epochs.truncate_from_end(log_end)  # epochs of a tail that recovery cut off
    epochs.truncate_from_start(log_start)
    return LoadedLog(
        segments=tuple(segments),
        producer_state=ps,
        log_start_offset=log_start,
        log_end_offset=log_end,
        recovery_point=log_end if clean else min(checkpoint_recovery, log_end),
        dir_needs_sync=dir_needs_sync,
        epochs=epochs,
    )


def _open_and_recover(d: _Dir, bases: list[int], segments: list[LogSegment], recovered: set[int],
                      clean: bool, checkpoint_recovery: int, now: int) -> None:
    """Open every segment, rebuilding those with unusable indexes, then (after an unclean
    shutdown) re-validate from the recovery point on. Fills ``segments`` and ``recovered``."""
    s = d.settings
    # After a crash every segment from the one holding the recovery point on is re-validated.
    first_unflushed = max(0, bisect.bisect_right(bases, checkpoint_recovery) - 1) if not clean else len(bases)
    for i, base in enumerate(bases):
        seg, reason = LogSegment.open(d.path, base, s.index_max_bytes, s.index_interval_bytes, now,
                                      revalidate=i >= first_unflushed)
        segments.append(seg)
        if reason is not None:
            # Re-validating after a crash is routine (LogManager.load sums it up in one line per data
            # dir); an index found unusable is not, and is a warning of its own.
            log.log(logging.DEBUG if i >= first_unflushed else logging.WARNING,
                    "%s: rebuilding segment %d: %s", d.name, base, reason)
            recovered.add(base)
            if _recover_segment(d, seg):
                _delete_files_of_later_segments(d, bases[i + 1:], f"segment {base} was truncated")
                break
    if not clean and segments:
        start = max(0, bisect.bisect_right([g.base_offset for g in segments], checkpoint_recovery) - 1)
        log.info("%s: unclean shutdown, re-validating %d segment(s) from offset %d",
                 d.name, len(segments) - start, segments[start].base_offset)
        for i in range(start, len(segments)):
            seg = segments[i]
            if seg.base_offset in recovered:
                continue
            recovered.add(seg.base_offset)
            if _recover_segment(d, seg):
                for other in segments[i + 1:]:
                    log.warning("%s: deleting segment %d after the truncated segment %d",
                                d.name, other.base_offset, seg.base_offset)
                    other.delete()
                del segments[i + 1:]
                break


def _finish_segments(d: _Dir, segments: list[LogSegment], bases: list[int], recovered: set[int],
                     checkpoint_start: int, now: int) -> tuple[list[LogSegment], bool]:
    """Save rebuilt indexes and make the last segment active, starting an empty one when nothing
    usable is left. Returns the segments and whether a segment file was created."""
    s = d.settings
    end = segments[-1].next_offset if segments else checkpoint_start
    if segments and end < checkpoint_start:
        log.warning("%s: log end %d is below the checkpointed log start %d: deleting all segments",
                    d.name, end, checkpoint_start)
        for seg in segments:
            seg.delete()
        segments = []
    if not segments:
        start_at = max(checkpoint_start, 0)
        if bases:
            log.info("%s: starting an empty segment at %d", d.name, start_at)
        recovered.discard(start_at)
        return [LogSegment.create(d.path, start_at, s.index_max_bytes, s.index_interval_bytes, now)], True
    for seg in segments[:-1]:
        if seg.base_offset in recovered:
            seg.save_indexes()
    segments[-1].make_active(rewrite_indexes=segments[-1].base_offset in recovered)
    return segments, False


def _remove_temporary_files(d: _Dir) -> None:
    complete_interrupted_swaps(d.path, d.name)  # the log cleaner's .cleaned/.swap files
    for path in d.path.iterdir():
        name = path.name
        if name.endswith(_TEMP_SUFFIXES) or name.endswith((".index.tmp", ".timeindex.tmp")):
            log.warning("%s: removing leftover file %s", d.name, name)
            path.unlink(missing_ok=True)


def _segment_bases_on_disk(d: _Dir) -> list[int]:
    bases: list[int] = []
    names = {p.name for p in d.path.iterdir()}
    for name in names:
        m = _SEGMENT_NAME.match(name)
        if m:
            bases.append(int(m.group(1)))
    for name in names:
        for suffix in _INDEX_SUFFIXES:
            if name.endswith(suffix) and name[:20].isdigit() and len(name) == 20 + len(suffix):
                if offset_file_name(int(name[:20]), ".log") not in names:
                    log.warning("%s: deleting index file %s without a .log", d.name, name)
                    (d.path / name).unlink(missing_ok=True)
    return sorted(bases)


def _recover_segment(d: _Dir, seg: LogSegment) -> bool:
    """Recover one segment; True if bytes were cut off (later segments must then go)."""
    try:
        truncated, reason = seg.recover()
    except OSError as e:
        log.error("%s: cannot read segment %d (%s): emptying it", d.name, seg.base_offset, e)
        seg.truncate_to_empty()
        return True
    if truncated:
        log.warning("%s: segment %d truncated to %d bytes (end offset %d), %d bytes cut: %s",
                    d.name, seg.base_offset, seg.size, seg.next_offset, truncated, reason)
        return True
    return False


def _delete_files_of_later_segments(d: _Dir, bases: list[int], why: str) -> None:
    for base in bases:
        log.warning("%s: deleting segment %d: %s", d.name, base, why)
        for suffix in (".log",) + _INDEX_SUFFIXES:
            (d.path / offset_file_name(base, suffix)).unlink(missing_ok=True)


def _drop_overlapping(d: _Dir, segments: list[LogSegment]) -> list[LogSegment]:
    """Segments must not overlap; a gap is only reported (reads skip over it)."""
    for i in range(len(segments) - 1):
        cur, nxt = segments[i], segments[i + 1]
        if cur.next_offset > nxt.base_offset:
            for other in segments[i + 1:]:
                log.warning("%s: deleting segment %d: it overlaps segment %d (ending at %d)",
                            d.name, other.base_offset, cur.base_offset, cur.next_offset)
                other.delete()
            return segments[: i + 1]
        if cur.next_offset < nxt.base_offset:
            log.warning("%s: offsets %d..%d are missing between segments %d and %d", d.name,
                        cur.next_offset, nxt.base_offset - 1, cur.base_offset, nxt.base_offset)
    return segments


def _load_producer_state(d: _Dir, ps: ProducerStateManager, segments: list[LogSegment], log_start: int,
                         log_end: int, now_ms: Callable[[], int], rebuilt: frozenset[int]) -> None:
    """Kafka's rebuild (docs/semantics.md#producer-state-rebuild), except its shortcut: a log with no snapshot at all is replayed
    from its start even after a clean shutdown, so minikafka never forgets producers whose
    snapshots were lost.

    ``rebuilt`` holds the base offsets of the segments recovered at this load: their
    aborted-transaction index is written again while their batches are replayed, so the
    state must be replayed from a snapshot at or before the first of them (later snapshots
    describe data that recovery may have cut). Other segments keep their index as it is."""
    ps.remove_stray_snapshots([seg.base_offset for seg in segments])
    rebuild_producer_state(ps, segments, log_start, log_end, now_ms(), d.name, rebuilt)
