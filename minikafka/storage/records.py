"""Decoding the records inside one batch — only where a header is not enough.

The append path never comes here with default topic settings. Records are decoded only for
timestamp lookups (ListOffsets), for topics with finite ``message.timestamp.*.max.ms`` bounds and
for the null-key check of compacted topics. Layout and rejection rules: docs/semantics.md#records.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import HEADER_SIZE, BatchHeader


@dataclass(slots=True)
class RecordInfo:
    offset: int
    timestamp: int
    key_is_null: bool


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The uncompressed records section of a batch with compression ``codec`` (1-4).

    A codec whose library is not installed is UNSUPPORTED_COMPRESSION_TYPE; a stream that does
    not decompress is CORRUPT_MESSAGE."""
    from kafka import codec as kc  # imported lazily: only timestamp lookups and bounded topics need it

    codecs = {
        1: (kc.has_gzip, kc.gzip_decode, "gzip"),
        2: (kc.has_snappy, kc.snappy_decode, "snappy"),
        3: (kc.has_lz4, kc.lz4_decode, "lz4"),
        4: (kc.has_zstd, kc.zstd_decode, "zstd"),
    }
    if codec not in codecs:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    available, decode, name = codecs[codec]
    if not available():
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"no {name} library installed")
    try:
        decoded: bytes = decode(bytes(data))
        return decoded
    except Exception as e:  # each library raises its own error types
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"{name} data does not decompress: {e}") from e


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag varint/varlong at ``pos``: ``(value, next position)``; storage's one varint decoder.

    Most fields of a record (attributes, deltas, short lengths) take one or two bytes, decoded here
    without a loop; ``bench/codecs.py`` measures it. A varint the buffer cuts short, or one longer
    than 64 bits, is INVALID_RECORD."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        c = buf[pos + 1]
        if c < 0x80:
            v = (b & 0x7F) | (c << 7)
            return (v >> 1) ^ -(v & 1), pos + 2
    except IndexError:
        raise KafkaError(ErrorCode.INVALID_RECORD, "premature end of a varint") from None
    return read_varint_loop(buf, pos)


def read_varint_loop(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """:func:`read_varint` for three bytes and more: a byte at a time, checked."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise KafkaError(ErrorCode.INVALID_RECORD, "premature end of a varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.INVALID_RECORD, "varint too long")


def decode_records(batch: bytes | bytearray | memoryview, header: BatchHeader | None = None) -> list[RecordInfo]:
    """Offset, timestamp and key-nullness of every record of one batch.

    Raises ``KafkaError(INVALID_RECORD)`` for the framing errors Kafka's reader rejects."""
    if header is None:
        header = BatchHeader.parse(batch)
    body = memoryview(batch)[HEADER_SIZE : header.size]
    raw = decompress(header.compression, body) if header.compression else bytes(body)
    count = header.records_count
    if count < 0:
        raise KafkaError(ErrorCode.INVALID_RECORD, "negative record count")
    log_append = header.is_log_append_time
    out: list[RecordInfo] = []
    pos = 0
    for _ in range(count):
        length, pos = read_varint(raw, pos)
        end = pos + length
        if length < 0 or end > len(raw):
            raise KafkaError(ErrorCode.INVALID_RECORD, "record length past the end of the batch")
        pos += 1  # attributes
        ts_delta, pos = read_varint(raw, pos)
        offset_delta, pos = read_varint(raw, pos)
        key_len, pos = read_varint(raw, pos)
        key_null = key_len < 0
        if key_len > 0:
            pos += key_len
        value_len, pos = read_varint(raw, pos)
        if value_len > 0:
            pos += value_len
        headers, pos = read_varint(raw, pos)
        if headers < 0 or headers > end - pos:
            raise KafkaError(ErrorCode.INVALID_RECORD, "bad header count")
        for _h in range(headers):
            hk, pos = read_varint(raw, pos)
            if hk < 0:
                raise KafkaError(ErrorCode.INVALID_RECORD, "negative header key length")
            pos += hk
            hv, pos = read_varint(raw, pos)
            if hv > 0:
                pos += hv
        if pos != end:
            raise KafkaError(ErrorCode.INVALID_RECORD, "record fields do not add up to its length")
        timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
        out.append(RecordInfo(header.base_offset + offset_delta, timestamp, key_null))
    if pos != len(raw):
        raise KafkaError(ErrorCode.INVALID_RECORD, "bytes left over after the last record")
    return out
