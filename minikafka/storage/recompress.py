"""Building and recompressing v2 record batches: the append path's conversions.

The log stores v2 batches only. Two appends need new batch bytes rather than the client's:

* a topic whose ``compression.type`` names a codec (not ``producer``) stores every batch with that
  codec, as Kafka does (``LogValidator``: source and target compression differ, so the batch is
  rebuilt). A v2 batch's records section does not depend on the codec, so recompression is
  "decompress the section, compress it with the topic's codec, rewrite attributes, length and
  CRC"; offsets deltas, timestamps, producer id, epoch and sequence are unchanged, so idempotent
  producer state works the same on such topics;
* message sets of format v0/v1 (Produce v0-v2) become one v2 batch (:func:`build_batch`).

Kafka compresses whatever the gain (its builder has no "send uncompressed if larger" rule), and so
does this module: a batch on a gzip topic is always gzip.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kafka.record.util import encode_varint

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
)
from minikafka.storage.records import decompress

#: ``compression.type`` values -> codec id (None: keep the producer's codec).
TOPIC_CODECS: dict[str, int | None] = {
    "producer": None, "uncompressed": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4,
}
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


def target_codec(compression_type: str, source_codec: int) -> int:
    """The codec a batch is stored with on a topic with this ``compression.type``."""
    codec = TOPIC_CODECS.get(str(compression_type), None)
    return source_codec if codec is None else codec


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed with ``codec`` (1-4), as a v2 batch (or a v1 wrapper) carries it."""
    from kafka import codec as kc  # lazily: only topics with a codec and old clients need it

    encoders = {
        1: (kc.has_gzip, kc.gzip_encode, "gzip"),
        2: (kc.has_snappy, kc.snappy_encode, "snappy"),
        3: (kc.has_lz4, kc.lz4_encode, "lz4"),
        4: (kc.has_zstd, kc.zstd_encode, "zstd"),
    }
    available, encode, name = encoders[codec]
    if not available():
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"no {name} library installed")
    return bytes(encode(data))


def with_body(header: BatchHeader, attributes: int, body: bytes) -> bytearray:
    """A batch with ``header``'s fields, ``attributes`` and the records section ``body``."""
    out = bytearray(HEADER_SIZE + len(body))
    _HEADER.pack_into(out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
                      header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
                      header.base_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
                      header.base_sequence, header.records_count)
    out[HEADER_SIZE:] = body
    _CRC.pack_into(out, CRC_OFFSET, compute_crc(out, 0, len(out)))
    return out


def recompress(batch: bytes | bytearray | memoryview, header: BatchHeader, codec: int) -> bytearray:
    """``batch`` with its records section stored under ``codec`` instead of its own."""
    body = memoryview(batch)[HEADER_SIZE : header.size]
    raw = decompress(header.compression, body) if header.compression else bytes(body)
    packed = compress(codec, raw) if codec else raw
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    out = with_body(header, attributes, packed)
    new = BatchHeader.parse(out)
    header.batch_length, header.attributes, header.crc = new.batch_length, new.attributes, new.crc
    return out


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None) -> None:
    """Append one v2 record without headers to ``out``."""
    body = bytearray(b"\x00")  # attributes
    write = body.append
    timestamp_delta = (timestamp_delta + (1 << 63)) % (1 << 64) - (1 << 63)  # int64, as Java wraps it
    encode_varint(timestamp_delta, write)
    encode_varint(offset_delta, write)
    for field in (key, value):
        if field is None:
            encode_varint(-1, write)
        else:
            encode_varint(len(field), write)
            body += field
    encode_varint(0, write)  # no headers
    encode_varint(len(body), out.append)
    out += body


def build_batch(records: Sequence[tuple[int, bytes | None, bytes | None]], codec: int,
                log_append_time: bool = False) -> bytearray:
    """One client-style v2 batch (base offset 0, no producer id) of ``(timestamp, key, value)``.

    ``log_append_time`` sets the timestamp-type bit, as a v1 wrapper with that bit carries it;
    the log then answers it as Kafka does."""
    if not records:
        raise KafkaError(ErrorCode.INVALID_RECORD, "a batch needs at least one record")
    base_ts = records[0][0]
    max_ts = max(ts for ts, _k, _v in records)
    raw = bytearray()
    for i, (ts, key, value) in enumerate(records):
        encode_record(raw, i, ts - base_ts, key, value)
    attributes = codec | (TIMESTAMP_TYPE_MASK if log_append_time else 0)
    header = BatchHeader(0, 0, 0, 2, 0, attributes, len(records) - 1, base_ts, max_ts, NO_PRODUCER_ID,
                         NO_PRODUCER_EPOCH, NO_SEQUENCE, len(records))
    return with_body(header, attributes, compress(codec, bytes(raw)) if codec else bytes(raw))


def batch_codec(batch: bytes | bytearray | memoryview) -> int:
    attributes: int
    (attributes,) = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_OFFSET)
    return attributes & COMPRESSION_MASK
