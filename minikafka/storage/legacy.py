"""Message format v0 and v1 ("message sets"): what Produce v0-v2 and Fetch v0-v3 carry.

The log stays v2-only. Produce v0-v2 message sets are validated as Kafka's ``LogValidator`` and
``UnifiedLog.analyzeAndValidateRecords`` validate them, then become one v2 batch (offsets are then
assigned by the log like for any batch; no producer id, so no producer state). Fetch v0-v3 gets the
stored v2 batches down-converted (Kafka's ``RecordsUtil.downConvert``): control batches skipped,
headers, producer id/epoch/sequence dropped, one message per record, or one compressed wrapper per
compressed batch. Kafka's sources:
``storage/src/main/java/org/apache/kafka/storage/internals/log/LogValidator.java``,
``clients/src/main/java/org/apache/kafka/common/record/LegacyRecord.java`` and ``RecordsUtil.java``.

A message (both magics)::

    offset int64, size int32, crc uint32 (CRC-32 of magic..end), magic int8, attributes int8,
    [timestamp int64 (magic 1 only)], key bytes (int32 length, -1 = null), value bytes

Attributes: bits 0-2 codec (a compressed message's value is a compressed message set), bit 3
LogAppendTime (magic 1). Inside a magic-1 wrapper the offsets are relative (0..n-1) and the
wrapper carries the absolute offset of the last one; magic 0 wrappers hold absolute offsets.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from minikafka.config import timestamp_bounds, topic_config
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import (
    CODEC_LZ4,
    CODEC_ZSTD,
    COMPRESSION_MASK,
    TIMESTAMP_TYPE_MASK,
    split_batches,
)
from minikafka.storage.recompress import build_batch, compress, target_codec
from minikafka.storage.records import decompress

_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LEN = struct.Struct(">i")
PREFIX_SIZE = 18
#: smallest size field of a v0 / v1 message (crc, magic, attributes, [timestamp], two lengths)
RECORD_OVERHEAD = {0: 14, 1: 22}
NO_TIMESTAMP = -1


@dataclass(slots=True)
class Message:
    """One decoded message (a record, or a compressed wrapper before it is opened)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc_valid: bool
    size: int  # whole message incl. offset and size fields

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & TIMESTAMP_TYPE_MASK)


# ---------------------------------------------------------------------- lz4 frames of magic 0
# Kafka before 0.10 computed the lz4 frame header checksum over the 4 magic bytes too; magic 0
# wrappers keep that (KafkaLZ4BlockOutputStream's "broken flag descriptor checksum"), magic 1 and v2
# use the standard frame. The checksum is the second byte of xxHash32 of the descriptor.

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes) -> int:
    """xxHash32 (seed 0) of fewer than 16 bytes: all an lz4 frame descriptor ever needs."""
    assert len(data) < 16
    h = (_P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        h = (_rotl((h + int.from_bytes(data[pos:pos + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for b in data[pos:]:
        h = (_rotl((h + b * _P5) & _M32, 11) * _P1) & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)


def _lz4_descriptor_end(frame: bytes) -> int:
    if len(frame) < 7:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "lz4 frame shorter than its header")
    return 14 if frame[4] & 0x08 else 6  # position of the header checksum byte


def _lz4_fix_header_checksum(frame: bytes) -> bytes:
    """A magic-0 lz4 frame with the standard header checksum, for the lz4 library to read."""
    end = _lz4_descriptor_end(frame)
    return frame[:end] + bytes([(xxh32_short(frame[4:end]) >> 8) & 0xFF]) + frame[end + 1:]


def _lz4_break_header_checksum(frame: bytes) -> bytes:
    """A standard lz4 frame as magic 0 carries it: no content size, checksum over magic + descriptor."""
    if frame[4] & 0x08:  # old readers do not know the content-size field
        frame = frame[:4] + bytes([frame[4] & ~0x08, frame[5], 0]) + frame[15:]
    return frame[:6] + bytes([(xxh32_short(frame[:6]) >> 8) & 0xFF]) + frame[7:]


def _bytes_field(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "message ends inside a length field")
    (n,) = _LEN.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"key or value of {n} bytes runs past the message end")
    return bytes(buf[pos : pos + n]), pos + n


def iter_messages(data: bytes | bytearray | memoryview) -> Iterator[Message]:
    """The complete messages of a message set; a trailing partial message is ignored (Kafka trims it).

    CORRUPT_MESSAGE for a size field below the v0 minimum, an unknown magic or fields that do not
    add up to the size (Kafka's ``ByteBufferLogInputStream`` and ``LegacyRecord``)."""
    buf = memoryview(data)
    pos, total = 0, len(buf)
    while total - pos >= 12:
        (size,) = _LEN.unpack_from(buf, pos + 8)
        if size < RECORD_OVERHEAD[0]:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"message size {size} is smaller than the minimum 14")
        end = pos + 12 + size
        if end > total:
            return
        offset, _size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
        if magic not in (0, 1):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"message magic {magic} in a v0/v1 message set")
        if size < RECORD_OVERHEAD[magic]:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"magic {magic} message of {size} bytes is too small")
        crc_valid = zlib.crc32(buf[pos + 16 : end]) == crc
        p = pos + PREFIX_SIZE
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _TIMESTAMP.unpack_from(buf, p)
            p += 8
        key, p = _bytes_field(buf, p, end)
        value, p = _bytes_field(buf, p, end)
        if p != end and crc_valid:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "message fields do not add up to its size")
        yield Message(offset, magic, attributes, timestamp, key, value, crc_valid, end - pos)
        pos = end


def _open_wrapper(wrapper: Message) -> list[Message]:
    """The inner messages of a compressed wrapper (its codec and magic checked by the caller)."""
    if wrapper.value is None:
        raise KafkaError(ErrorCode.INVALID_RECORD, "compressed message with a null value")
    if wrapper.codec == CODEC_ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs message format v2")
    if wrapper.codec == CODEC_LZ4 and wrapper.magic == 0:
        raw = decompress(CODEC_LZ4, _lz4_fix_header_checksum(wrapper.value))
    else:
        raw = decompress(wrapper.codec, wrapper.value)
    inner = list(iter_messages(raw))
    if not inner:
        raise KafkaError(ErrorCode.INVALID_RECORD, "compressed message set with no inner messages")
    return inner


@dataclass(frozen=True, slots=True)
class TopicRules:
    """The topic settings a legacy append is validated and converted with."""

    compacted: bool
    log_append_time: bool
    before_max_ms: int
    after_max_ms: int
    max_message_bytes: int
    compression_type: str

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> TopicRules:
        setting = partial(topic_config, config)
        before_max_ms, after_max_ms = timestamp_bounds(config)
        return cls(
            compacted="compact" in str(setting("cleanup.policy")),
            log_append_time=setting("message.timestamp.type") == "LogAppendTime",
            before_max_ms=before_max_ms,
            after_max_ms=after_max_ms,
            max_message_bytes=int(setting("max.message.bytes")),
            compression_type=str(setting("compression.type")),
        )


def _record_error(message: Message, wrapper: Message, rules: TopicRules, now_ms: int) -> tuple[int, str] | None:
    """Kafka's per-record checks (``validateRecord``): magic, key, timestamp. ``(error, text)`` or None."""
    if message.magic != wrapper.magic:
        return ErrorCode.INVALID_RECORD, f"message magic {message.magic} does not match outer magic {wrapper.magic}"
    if rules.compacted and message.key is None:
        return ErrorCode.INVALID_RECORD, "compacted topic cannot accept a message without key"
    if not rules.log_append_time and message.timestamp != NO_TIMESTAMP:
        if now_ms - message.timestamp > rules.before_max_ms or message.timestamp - now_ms > rules.after_max_ms:
            return ErrorCode.INVALID_TIMESTAMP, (f"timestamp {message.timestamp} is out of range "
                                                 f"[{now_ms - rules.before_max_ms}, {now_ms + rules.after_max_ms}]")
    elif wrapper.log_append_time:
        return ErrorCode.INVALID_TIMESTAMP, "producers may not set the timestamp type LogAppendTime"
    return None


def _raise_record_errors(errors: list[tuple[int, int, str]]) -> None:
    if not errors:
        return
    code = ErrorCode.INVALID_TIMESTAMP if any(e[1] == ErrorCode.INVALID_TIMESTAMP for e in errors) \
        else ErrorCode.INVALID_RECORD
    raise KafkaError(code, f"{len(errors)} record(s) rejected: {errors[0][2]}", [(i, text) for i, _c, text in errors])


def message_set_to_batch(data: bytes | bytearray | memoryview, rules: TopicRules, now_ms: int) -> bytearray | None:
    """Validate a v0/v1 message set and convert it to one v2 client batch (base offset 0).

    None when it holds no complete message (Kafka appends nothing and answers without error).
    Raises the KafkaError Kafka answers: MESSAGE_TOO_LARGE, CORRUPT_MESSAGE (size, CRC, codec),
    INVALID_RECORD (mixed magics, several compressed wrappers, nested compression, null keys on
    compacted topics), INVALID_TIMESTAMP, UNSUPPORTED_COMPRESSION_TYPE."""
    wrappers = list(iter_messages(data))
    if not wrappers:
        return None
    source_codec = 0
    for w in wrappers:  # Kafka's analyzeAndValidateRecords, per shallow message
        if w.size > rules.max_message_bytes:
            raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                             f"message of {w.size} bytes exceeds max.message.bytes {rules.max_message_bytes}")
        if not w.crc_valid:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"message at offset {w.offset} fails its CRC")
        if w.codec > CODEC_ZSTD:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {w.codec}")
        if w.codec:
            source_codec = w.codec
    if source_codec and len(wrappers) > 1:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a compressed message set must be one wrapper message")
    records: list[tuple[int, bytes | None, bytes | None]] = []
    for w in wrappers:  # Kafka's validateBatch and validateRecord
        if w.magic != wrappers[0].magic:
            raise KafkaError(ErrorCode.INVALID_RECORD,
                             f"message magic {w.magic} differs from the first message's {wrappers[0].magic}")
        errors: list[tuple[int, int, str]] = []
        inner = _open_wrapper(w) if w.codec else [w]
        for index, m in enumerate(inner):
            if w.codec:
                if m.codec:
                    errors.append((index, ErrorCode.INVALID_RECORD, "nested compression inside a wrapper message"))
                    continue
                if not m.crc_valid and m.magic == w.magic:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"inner message {index} fails its CRC")
                if w.log_append_time:  # inner messages read as the wrapper's timestamp
                    m.timestamp = w.timestamp
            error = _record_error(m, w, rules, now_ms)
            if error is not None:
                errors.append((index, *error))
            elif not errors:
                records.append((m.timestamp, m.key, m.value))
        _raise_record_errors(errors)
    return build_batch(records, target_codec(rules.compression_type, source_codec))


# ---------------------------------------------------------------------- down-conversion (Fetch v0-v3)


def encode_message(magic: int, offset: int, attributes: int, timestamp: int, key: bytes | None,
                   value: bytes | None) -> bytes:
    """One v0/v1 message with its CRC."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _TIMESTAMP.pack(timestamp)
    for field in (key, value):
        body += _LEN.pack(-1) if field is None else _LEN.pack(len(field)) + field
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + bytes(body)


def _compress_legacy(codec: int, magic: int, data: bytes) -> bytes:
    if codec == CODEC_LZ4 and magic == 0:
        return _lz4_break_header_checksum(compress(CODEC_LZ4, data))
    return compress(codec, data)


def _convert_batch(batch: bytes | memoryview, magic: int, fetch_offset: int) -> bytes:
    """One stored v2 batch as v0/v1 messages (b"" when nothing of it is left to send)."""
    from kafka.record.default_records import DefaultRecordBatch

    decoded = DefaultRecordBatch(bytes(batch))
    codec = decoded.compression_type
    if codec == CODEC_ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd batches cannot be down-converted")
    lat = decoded.timestamp_type == 1
    ts_attr = TIMESTAMP_TYPE_MASK if lat and magic == 1 else 0
    records = [r for r in decoded if codec or r.offset >= fetch_offset]
    if not records:
        return b""
    if not codec:
        return b"".join(encode_message(magic, r.offset, ts_attr, r.timestamp, r.key, r.value) for r in records)
    base = records[0].offset
    inner = b"".join(
        encode_message(magic, r.offset - base if magic == 1 else r.offset, ts_attr, r.timestamp, r.key, r.value)
        for r in records)
    wrapper_ts = decoded.max_timestamp if lat else max(r.timestamp for r in records)
    return encode_message(magic, records[-1].offset, codec | ts_attr, wrapper_ts, None,
                          _compress_legacy(codec, magic, inner))


def down_convert(data: bytes | bytearray | memoryview, magic: int, fetch_offset: int, max_bytes: int,
                 min_one: bool) -> bytes:
    """Stored v2 batches (as a read returned them) as a v0/v1 message set of at most ``max_bytes``
    (or the first converted batch whole when ``min_one``), whole messages only.

    Control batches are skipped; records of an uncompressed batch before ``fetch_offset`` too
    (a compressed batch goes whole, as Kafka sends it)."""
    out: list[bytes] = []
    size = 0
    for pos, header in split_batches(data):
        if header.is_control:
            continue
        converted = _convert_batch(memoryview(data)[pos : pos + header.size], magic, fetch_offset)
        if not converted:
            continue
        if size + len(converted) > max_bytes and not (min_one and not out):
            if header.compression:
                break
            converted = _whole_messages(converted, max_bytes - size)
            if not converted:
                break
        out.append(converted)
        size += len(converted)
    return b"".join(out)


def _whole_messages(message_set: bytes, limit: int) -> bytes:
    """The longest prefix of whole messages within ``limit`` bytes."""
    pos = 0
    while pos + 12 <= len(message_set):
        (size,) = _LEN.unpack_from(message_set, pos + 8)
        if pos + 12 + size > limit:
            break
        pos += 12 + size
    return message_set[:pos]


def read_down_converted(partition_log: Any, data: bytes | memoryview, version: int, fetch_offset: int,
                        limit: int, min_one: bool) -> bytes:
    """Fetch v0-v3: what ``partition_log.read`` returned, as magic 0 (v0-v1) or magic 1 (v2-v3).

    UNSUPPORTED_VERSION when the topic has ``message.downconversion.enable=false`` (Kafka's answer).
    When the batches read convert to nothing (control batches only), the next ones are read, so a
    consumer is never stuck in front of records it cannot see."""
    enabled = str(partition_log.config.get("message.downconversion.enable", True)).lower()
    if enabled in ("false", "0"):
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "down-conversion is disabled for this topic")
    magic = 0 if version <= 1 else 1
    for _ in range(64):  # bounded: each round moves past at least one whole batch
        converted = down_convert(data, magic, fetch_offset, limit, min_one)
        batches = split_batches(data)
        if converted or not batches:
            if version <= 2 and len(converted) > limit:
                # Fetch v0-v2 limits are hard (Kafka sets no "at least one message" there): whole
                # messages within the limit, or else the first one cut, which old clients take as
                # "message too large for the fetch size".
                return down_convert(data, magic, fetch_offset, limit, False) or converted[:limit]
            return converted
        fetch_offset = batches[-1][1].next_offset
        if fetch_offset >= partition_log.log_end_offset:
            return b""
        data = partition_log.read(fetch_offset, limit, min_one=min_one)
    return b""


def offsets_before(partition_log: Any, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """ListOffsets v0: up to ``max_num_offsets`` segment start offsets, newest first, of segments
    last modified at or before ``timestamp`` (-1: the high watermark, -2: the log start), plus the
    high watermark when the active segment has data (Kafka's ``legacyFetchOffsetsBefore``)."""
    segments = partition_log.segments
    points: list[tuple[int, int]] = []
    for seg in segments:
        try:
            modified = int(os.stat(seg.log_path).st_mtime * 1000)
        except OSError:
            modified = now_ms
        points.append((max(seg.base_offset, partition_log.log_start_offset), modified))
    if segments and segments[-1].size > 0:
        points.append((partition_log.high_watermark, now_ms))
    if timestamp == -1:
        start = len(points) - 1
    elif timestamp == -2:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    offsets = [points[start - j][0] for j in range(count)]
    return sorted(offsets, reverse=True)
