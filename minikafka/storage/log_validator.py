"""The checks a batch passes before it is given offsets: the append rules of docs/semantics.md.

Two writers append to a partition log, and each has its own validation:

* a client (and the broker writing on a producer's behalf): :func:`validate_client_batch` runs
  steps 7-15 of docs/semantics.md#append-rules in their order, the first failure deciding the
  error. It may rewrite the batch (LogAppendTime, the topic's compression.type) and returns the
  batch to write; the records are decoded only when a step needs them.
* a follower copying the leader's log: :func:`validate_follower_records` keeps the leader's
  offsets and checks only what Kafka's replication path checks (whole batches, CRC, codec,
  offsets increasing and not below the log end, the segment size).

Kafka: ``LogValidator.java`` and ``UnifiedLog.analyzeAndValidateRecords`` in
https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/storage/internals/log/
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    set_log_append_time,
)
from minikafka.storage.log_settings import LogSettings
from minikafka.storage.recompress import recompress
from minikafka.storage.records import decode_records

_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


class OffsetsOutOfOrderError(KafkaError):
    """A follower append whose batches' last offsets do not strictly increase (Kafka's
    OffsetsOutOfOrderException): the leader's data cannot be copied as it is."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append starting below the log end (Kafka's UnexpectedAppendOffsetException):
    the follower must truncate or fetch from its log end instead."""

    def __init__(self, message: str, first_offset: int) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, message)
        self.first_offset = first_offset


def _all_records_error(header: BatchHeader, message: str) -> list[tuple[int, str | None]]:
    return [(i, message) for i in range(max(0, header.records_count))]


def validate_client_batch(batch: bytearray | memoryview | bytes, header: BatchHeader | None, s: LogSettings,
                          now_ms: int, from_client: bool) -> tuple[bytearray | memoryview, BatchHeader]:
    """Kafka's batch checks before offsets are assigned (steps 7-15); returns the writable batch
    and its header (``header`` when given, else parsed here). ``from_client`` is False for a
    batch the broker writes for a producer (its sequence is not the client's)."""
    if not isinstance(batch, bytearray) and (isinstance(batch, bytes) or batch.readonly):
        batch = bytearray(batch)
    size = len(batch)
    if header is None and size >= HEADER_SIZE:
        header = BatchHeader.parse(batch)  # (a shorter batch is refused at step 9)
    # 7. baseOffset must be 0
    if size >= 8 and (_INT64.unpack_from(batch, 0)[0] if header is None else header.base_offset) != 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "batch base offset must be 0")
    # 8. max.message.bytes
    if size > s.max_message_bytes:
        raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                         f"batch of {size} bytes exceeds max.message.bytes {s.max_message_bytes}")
    # 9. size and CRC (the header's properties are spelled out below: this runs for every batch)
    if header is None:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch of {size} bytes is smaller than a header")
    if LOG_OVERHEAD + header.batch_length != size or header.magic != 2:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch length or magic does not match")
    if crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]) != header.crc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "batch CRC-32C mismatch")
    attributes = header.attributes
    # 10. codec
    if attributes & COMPRESSION_MASK > 4:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {attributes & COMPRESSION_MASK}")
    # 11. batch checks
    count = header.last_offset_delta + 1
    if count <= 0 or header.records_count <= 0 or count != header.records_count:
        raise KafkaError(ErrorCode.INVALID_RECORD, "lastOffsetDelta + 1 must equal recordsCount")
    if attributes & CONTROL_FLAG:
        raise KafkaError(ErrorCode.INVALID_RECORD, "clients may not send control batches")
    if from_client and header.producer_id >= 0 and header.base_sequence < 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "idempotent batch without a base sequence")
    # 12-13. records: decoded only when the topic needs it
    if s.decodes_records or attributes & TIMESTAMP_TYPE_MASK:
        check_records(batch, header, s, now_ms)
    # 14. the topic's compression.type: the batch is stored with that codec (sequence numbers,
    # offsets deltas and timestamps unchanged), and must still fit max.message.bytes
    if s.codec is not None and s.codec != header.compression:
        batch = recompress(batch, header, s.codec)
        size = len(batch)
        if size > s.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes after recompression "
                             f"exceeds max.message.bytes {s.max_message_bytes}")
    if s.log_append_time:
        set_log_append_time(batch, 0, header, now_ms)
    # 15. segment.bytes
    if size > s.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                         f"batch of {size} bytes exceeds segment.bytes {s.segment_bytes}")
    return batch, header


def check_records(batch: bytearray | memoryview, header: BatchHeader, s: LogSettings, now_ms: int) -> None:
    """Record-level checks of docs/semantics.md#record-checks, step 13 (timestamps, LogAppendTime bit, null keys)."""
    if header.is_log_append_time:
        # Every record of such a batch reads as the batch maxTimestamp.
        if s.log_append_time or header.max_timestamp == -1:
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "producers may not set LogAppendTime",
                             _all_records_error(header, "timestamp type LogAppendTime set by the producer"))
        if s.bounded_timestamps and not (now_ms - s.before_max_ms <= header.max_timestamp
                                         <= now_ms + s.after_max_ms):
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "timestamp out of range",
                             _all_records_error(header, "timestamp out of range"))
        # In range on a CreateTime topic: the bit is rewritten to CreateTime.
        attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
        _INT16.pack_into(batch, ATTRIBUTES_OFFSET, attributes)
        header.attributes = attributes
        header.crc = compute_crc(batch, 0, header.size)
        _UINT32.pack_into(batch, CRC_OFFSET, header.crc)
        if not s.compacted:
            return
    records = decode_records(batch, header)
    if s.compacted:
        errors = [(i, "compacted topic record without a key") for i, r in enumerate(records) if r.key_is_null]
        if errors:
            raise KafkaError(ErrorCode.INVALID_RECORD, "null key on a compacted topic", errors)
    if s.bounded_timestamps and not s.log_append_time and not header.is_log_append_time:
        low, high = now_ms - s.before_max_ms, now_ms + s.after_max_ms
        errors = [(i, f"timestamp {r.timestamp} out of range [{low}, {high}]")
                  for i, r in enumerate(records) if r.timestamp != -1 and not low <= r.timestamp <= high]
        if errors:
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP, "record timestamp out of range", errors)


def validate_follower_records(records: bytes | bytearray | memoryview, s: LogSettings,
                              log_end_offset: int) -> list[tuple[int, BatchHeader]]:
    """Positions and headers of the leader's batches in ``records``, checked as Kafka checks a
    replicated append: each batch whole, magic 2, its CRC and codec valid (else CORRUPT_MESSAGE);
    then the last offsets strictly increasing (:class:`OffsetsOutOfOrderError`), the first
    batch not below ``log_end_offset`` (:class:`UnexpectedAppendOffsetError`) and the whole set
    within segment.bytes (RECORD_LIST_TOO_LARGE). max.message.bytes is not applied: the leader
    accepted the batches, under settings the follower may not have yet.

    minikafka also refuses a negative lastOffsetDelta (CORRUPT_MESSAGE): its indexes and
    recovery rely on every batch ending at or after its base offset."""
    view = memoryview(records)
    out: list[tuple[int, BatchHeader]] = []
    pos, end = 0, len(view)
    monotonic, last = True, -1
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{end - pos} trailing bytes are not a whole batch")
        header = BatchHeader.parse(view, pos)
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end or header.magic != 2:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"batch at offset {header.base_offset} is torn or not magic 2")
        if crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]) != header.crc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"CRC-32C mismatch in the batch at offset {header.base_offset}")
        if header.attributes & COMPRESSION_MASK > 4 or header.last_offset_delta < 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE,
                             f"batch at offset {header.base_offset} has a bad codec or lastOffsetDelta")
        if last >= header.last_offset:
            monotonic = False
        last = header.last_offset
        out.append((pos, header))
        pos += size
    if not monotonic:
        raise OffsetsOutOfOrderError(f"last offsets {[h.last_offset for _, h in out]} do not increase")
    if out and out[0][1].base_offset < log_end_offset:
        first = out[0][1].base_offset
        raise UnexpectedAppendOffsetError(f"first offset {first} is below the log end offset {log_end_offset}", first)
    if end > s.segment_bytes:
        raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE, f"{end} bytes of batches exceed segment.bytes {s.segment_bytes}")
    return out
