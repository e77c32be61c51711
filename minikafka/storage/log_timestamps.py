"""ListOffsets by timestamp over a partition's segments: the time index narrows the search, the
one batch found is decoded (docs/semantics.md#indexes).

Kafka: ``UnifiedLog.fetchOffsetByTimestamp`` and ``LogSegment.findOffsetByTimestamp`` in
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/log/
"""

from __future__ import annotations

from collections.abc import Sequence

from minikafka.storage.records import decode_records
from minikafka.storage.segment import LogSegment


def _first_record_at_or_after(seg: LogSegment, pos: int, timestamp: int, log_start: int) -> tuple[int, int] | None:
    for bpos, header in seg.iter_headers(pos):
        if header.last_offset < log_start or header.max_timestamp < timestamp:
            continue
        for record in decode_records(seg.read_batch(bpos, header), header):
            if record.timestamp >= timestamp and record.offset >= log_start:
                return record.offset, record.timestamp
    return None


def offset_for_timestamp(segments: Sequence[LogSegment], log_start: int, timestamp: int) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record at or above ``log_start`` with a timestamp >=
    ``timestamp``, or None."""
    for seg in segments:
        if seg.max_timestamp < timestamp or seg.next_offset <= log_start:
            continue
        entry = seg.time_index.lookup_below(timestamp)
        pos = seg.offset_index.lookup(entry[1])[1] if entry is not None else 0
        found = _first_record_at_or_after(seg, pos, timestamp, log_start)
        if found is not None:
            return found
    return None


def max_timestamp_offset(segments: Sequence[LogSegment], log_start: int) -> tuple[int, int]:
    """``(offset, timestamp)`` of the first record carrying the largest timestamp; (-1, -1) if empty."""
    best: LogSegment | None = None
    for seg in segments:
        if seg.is_empty or seg.next_offset <= log_start:
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
        return max(header.base_offset, log_start), header.max_timestamp
    records = decode_records(best.read_batch(pos, header), header)
    if not records:  # an empty batch the log cleaner kept for its producer
        return max(header.base_offset, log_start), best.max_timestamp
    top = max(r.timestamp for r in records)
    offset = next(r.offset for r in records if r.timestamp == top)
    return offset, best.max_timestamp
