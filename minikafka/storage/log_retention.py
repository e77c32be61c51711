"""Which whole segments retention removes from the front of a partition log.

Three rules, applied in this order by :meth:`PartitionLog.apply_retention
<minikafka.storage.log.PartitionLog.apply_retention>`: segments entirely below the log start
offset (DeleteRecords), then, on topics whose cleanup.policy includes ``delete``, segments older
than retention.ms and segments beyond retention.bytes. Each function only chooses; the log
deletes (and never its only segment). Kafka: ``UnifiedLog.deleteOldSegments`` in
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java
"""

from __future__ import annotations

from collections.abc import Sequence

from minikafka.storage.segment import LogSegment


def below_log_start(segments: Sequence[LogSegment], log_start: int) -> list[LogSegment]:
    """Segments whose every offset is below ``log_start`` (the next segment starts at or below it)."""
    return [seg for i, seg in enumerate(segments[:-1]) if segments[i + 1].base_offset <= log_start]


def past_retention_ms(segments: Sequence[LogSegment], retention_ms: int, now_ms: int) -> list[LogSegment]:
    """The oldest segments whose largest timestamp is more than ``retention_ms`` before ``now_ms``."""
    doomed = []
    for seg in segments:
        if seg.is_empty or now_ms - seg.largest_timestamp <= retention_ms:
            break
        doomed.append(seg)
    return doomed


def past_retention_bytes(segments: Sequence[LogSegment], retention_bytes: int) -> list[LogSegment]:
    """The oldest segments whose removal keeps the log at or above ``retention_bytes``."""
    excess = sum(seg.size for seg in segments) - retention_bytes
    doomed = []
    for seg in segments:
        if seg.is_empty or excess - seg.size < 0:
            break
        excess -= seg.size
        doomed.append(seg)
    return doomed
