"""Feeding batches that are in the log into the partition's producer state.

Three paths share it: appends (a transaction marker closes its producer's transaction and an
ABORT indexes it), the loader rebuilding the state after a restart, and a follower rewinding
the state when it truncates its log. The rebuild is Kafka's ``rebuildProducerState``
(docs/semantics.md#producer-state-rebuild): load the newest usable snapshot at or below the log
end, replay the batches after it, and leave a snapshot at the log end.
Kafka: https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Sequence

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import BatchHeader
from minikafka.storage.control import Marker, parse_marker
from minikafka.storage.producer_state import ProducerStateManager
from minikafka.storage.segment import LogSegment
from minikafka.storage.txn_index import AbortedTxn

# Logged under the log module's name, like the rest of a partition log's story.
log = logging.getLogger(__name__)


def apply_marker(ps: ProducerStateManager, seg: LogSegment, header: BatchHeader, marker: Marker,
                 now_ms: int | None, name: str, index: bool = True) -> None:
    """Close the producer's transaction for a marker at ``header.base_offset``; an ABORT that
    closes a transaction adds an entry to the segment's aborted-transaction index, whose last
    stable offset is the first offset of the oldest transaction still open (else the offset
    after the marker)."""
    first = ps.apply_marker(header, marker.coordinator_epoch, now_ms)
    if not index or marker.commit or first < 0:
        return
    oldest_open = ps.first_unstable_offset()
    lso = header.base_offset + 1 if oldest_open is None else oldest_open
    try:
        seg.txn_index.append(AbortedTxn(header.producer_id, first, header.base_offset, lso))
    except OSError as e:
        log.error("%s: cannot write the aborted-transaction index of segment %d: %s", name, seg.base_offset, e)
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"txnindex write failed: {e}") from e


def replay_batch(ps: ProducerStateManager, seg: LogSegment, pos: int, header: BatchHeader, now_ms: int | None,
                 name: str, index: bool, batch: bytes | bytearray | memoryview | None = None) -> None:
    """Record one batch now in the log at ``header.base_offset`` (position ``pos`` of ``seg``)
    without judging it: a marker closes its producer's transaction (with ``index`` an ABORT adds
    its index entry), any other batch updates its producer. ``batch`` is the batch's bytes when
    the caller has them; a marker is read from the segment otherwise."""
    if header.is_control and header.producer_id >= 0:
        marker = parse_marker(seg.read_batch(pos, header) if batch is None else batch, header)
        if marker is not None:
            apply_marker(ps, seg, header, marker, now_ms, name, index)
            return
    ps.update(header, now_ms)


def iter_headers_from(segments: Sequence[LogSegment], offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """Segment, position and header of every batch whose last offset is >= ``offset``."""
    first = True
    start = max(0, bisect.bisect_right([seg.base_offset for seg in segments], offset) - 1)
    for seg in segments[start:]:
        pos = 0
        if first:
            first = False
            found = seg.find_batch(offset)
            if found is None:
                continue
            pos = found[0]
        for bpos, header in seg.iter_headers(pos):
            yield seg, bpos, header


def rebuild_producer_state(ps: ProducerStateManager, segments: Sequence[LogSegment], log_start_offset: int,
                           log_end_offset: int, now_ms: int, name: str,
                           rebuilt: frozenset[int] = frozenset()) -> None:
    """Reload ``ps`` from the newest usable snapshot in ``[log_start_offset, log_end_offset]``,
    replay the log after it and take a snapshot at the log end.

    ``rebuilt`` holds the base offsets of segments whose aborted-transaction index is written
    again while their batches are replayed, so the state is replayed from a snapshot at or
    before the first of them (later snapshots describe data that recovery may have cut).
    Other segments keep their index as it is."""
    ps.truncate_and_reload(log_start_offset, log_end_offset)
    # Replay starts at the log start at the earliest; index entries of markers below it are
    # never read (a fetch starts at or above the log start).
    rebuild_from = max(min(rebuilt), log_start_offset) if rebuilt else None
    if rebuild_from is not None and ps.map_end_offset > rebuild_from:
        ps.truncate_and_reload(log_start_offset, rebuild_from)
    start = max(ps.map_end_offset, log_start_offset)
    if start < log_end_offset:
        count = 0
        for seg, pos, header in iter_headers_from(segments, start):
            replay_batch(ps, seg, pos, header, now_ms, name, seg.base_offset in rebuilt)
            count += 1
        log.info("%s: producer state rebuilt from offset %d to %d (%d batches replayed)",
                 name, start, log_end_offset, count)
    if ps.latest_snapshot_offset() != log_end_offset:
        ps.take_snapshot(log_end_offset)
