"""RecordBatch v2 (magic 2) read by its 61-byte header only.

The produce path never decodes records: everything the broker needs (offsets, sequences,
producer id and epoch, timestamps, CRC) lives in the header. Layout (docs/semantics.md#batch-header)::

    0  baseOffset int64          27 baseTimestamp int64
    8  batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch i32  43 producerId int64
    16 magic int8                51 producerEpoch int16
    17 crc uint32                53 baseSequence int32
    21 attributes int16          57 recordsCount int32
    23 lastOffsetDelta int32     61 records...
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from minikafka.errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength, counted in every size limit
PARTITION_LEADER_EPOCH_OFFSET = 12  # after baseOffset and batchLength; outside the CRC
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2147483647

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTR_AND_MAXTS = struct.Struct(">h")
_INT64 = struct.Struct(">q")


@dataclass(slots=True)
class BatchHeader:
    """The decoded 61-byte header of one record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Parse a header at ``pos``; the caller guarantees 61 bytes are there."""
        return cls(*_HEADER.unpack_from(buf, pos))

    @property
    def size(self) -> int:
        """Whole batch size on disk and on the wire (12 + batchLength)."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)


def last_sequence(base_sequence: int, delta: int) -> int:
    """Sequence of the last record, wrapping at INT32_MAX to 0 (docs/semantics.md#sequence-arithmetic)."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def first_sequence(last_seq: int, delta: int) -> int:
    """Inverse of :func:`last_sequence`: the first sequence of a batch from its last."""
    if last_seq < delta:
        return INT32_MAX - (delta - last_seq) + 1
    return last_seq - delta


def compute_crc(buf: bytes | bytearray | memoryview, pos: int = 0, size: int | None = None) -> int:
    """CRC-32C over attributes..end of the batch starting at ``pos``."""
    if size is None:
        (batch_length,) = struct.unpack_from(">i", buf, pos + 8)
        size = LOG_OVERHEAD + batch_length
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def crc_is_valid(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite baseOffset in place; it is outside the CRC."""
    _OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place; it is outside the CRC."""
    _LEADER_EPOCH.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, now_ms: int) -> None:
    """Mark a batch LogAppendTime: set attribute bit 3, maxTimestamp := now, recompute the CRC."""
    attributes = (header.attributes | TIMESTAMP_TYPE_MASK) & 0xFFFF
    if attributes >= 0x8000:
        attributes -= 0x10000
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    header.attributes = attributes
    header.max_timestamp = now_ms
    header.crc = compute_crc(buf, pos, header.size)
    _CRC.pack_into(buf, pos + CRC_OFFSET, header.crc)


def split_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Positions and headers of the complete batches in ``buf`` (no CRC check)."""
    out: list[tuple[int, BatchHeader]] = []
    pos, end = 0, len(buf)
    while end - pos >= HEADER_SIZE:
        header = BatchHeader.parse(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            break
        out.append((pos, header))
        pos += header.size
    return out


# ----------------------------------------------------------------------------- a client's partition data

PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8  # producerId follows maxTimestamp; producerEpoch follows it
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_INT8 = struct.Struct(">b")
_PID_EPOCH = struct.Struct(">qh")
#: Legacy message-set minimum: Kafka calls a smaller length field corrupt.
_MIN_LENGTH_FIELD = 14
Buffer = bytes | bytearray | memoryview


def _next_batch(records: Buffer, pos: int) -> int | None:
    """End position of the complete batch at ``pos``; None when no complete batch is there."""
    remaining = len(records) - pos
    if remaining < LOG_OVERHEAD:
        return None
    length: int
    (length,) = _INT32.unpack_from(records, pos + 8)
    if length < _MIN_LENGTH_FIELD:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch length {length} is too small")
    if remaining < LOG_OVERHEAD + length:
        return None
    (magic,) = _INT8.unpack_from(records, pos + MAGIC_OFFSET)
    if magic < 0 or magic > 2:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic {magic}")
    return pos + LOG_OVERHEAD + length


def single_batch(records: Buffer | None, version: int) -> tuple[bytearray | memoryview, BatchHeader | None]:
    """The one v2 batch a Produce v3+ partition must carry (ProduceRequest.validateRecords), and
    its header, read here once for every later check (None for a batch too short to have one,
    which the log refuses); ``version`` is the Produce request's (zstd needs v7 or later)."""
    if not records:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a partition must carry one record batch")
    end = _next_batch(records, 0)
    if end is None:
        raise KafkaError(ErrorCode.INVALID_RECORD, "no complete record batch in the partition data")
    if records[MAGIC_OFFSET] != 2:
        raise KafkaError(ErrorCode.INVALID_RECORD, "only record batches with magic version 2 are allowed")
    header = BatchHeader.parse(records) if end >= HEADER_SIZE else None
    attributes = header.attributes if header is not None else _INT16.unpack_from(records, ATTRIBUTES_OFFSET)[0]
    if version < 7 and (attributes & COMPRESSION_MASK) == CODEC_ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs Produce v7 or later")
    if len(records) > end and _next_batch(records, end) is not None:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a partition must carry exactly one record batch")
    if isinstance(records, memoryview) and not records.readonly:
        return records[:end], header  # the request's own buffer (a large frame): appended in place
    return bytearray(records if end == len(records) else memoryview(records)[:end]), header


def is_v2_batch(records: Buffer | None) -> bool:
    """Whether partition data starts with a v2 record batch (else a v0/v1 message set, or nothing)."""
    return records is not None and len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] == 2


def is_transactional_batch(records: Buffer | None) -> bool:
    """Whether partition data starts with a transactional v2 batch (v0/v1 messages never are)."""
    if not records or len(records) < ATTRIBUTES_OFFSET + 2 or records[MAGIC_OFFSET] != 2:
        return False
    # The flag is in the low byte of the big-endian attributes: one byte read, no unpack (this
    # runs for every partition of every Produce).
    return records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_FLAG != 0


def producer_of(batch: Buffer) -> tuple[int, int]:
    """``(producer id, producer epoch)`` of a complete v2 batch."""
    producer_id, epoch = _PID_EPOCH.unpack_from(batch, PRODUCER_ID_OFFSET)
    return producer_id, epoch


def transactional_producer(records: Buffer | None) -> tuple[int, int] | None:
    """``(producer id, producer epoch)`` of partition data starting with a transactional batch, else None."""
    if records is None or not is_transactional_batch(records) or len(records) < PRODUCER_ID_OFFSET + _PID_EPOCH.size:
        return None
    return producer_of(records)
