"""Transaction markers: the control batches that end a transaction on a partition.

A marker is a v2 batch with the transactional and control attribute bits set (0x30), one record
and no sequence. Its record key is ``int16 version 0, int16 type`` (ABORT 0, COMMIT 1) and its
value ``int16 version 0, int32 coordinator epoch``. Layout as Kafka writes it in
``clients/src/main/java/org/apache/kafka/common/record/MemoryRecords.java``
(``withEndTransactionMarker``) and ``EndTransactionMarker.java``; rules: docs/semantics.md#txn-markers.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from minikafka.errors import KafkaError
from minikafka.storage.batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    compute_crc,
)
from minikafka.storage.records import read_varint

ABORT = 0
COMMIT = 1
MARKER_ATTRIBUTES = TRANSACTIONAL_FLAG | CONTROL_FLAG

# record: length varint 16, attributes 0, timestampDelta 0, offsetDelta 0, key length varint 4,
# key (version, type), value length varint 6, value (version, coordinator epoch), 0 headers
_RECORD = struct.Struct(">bbbbbhhbhib")
_HEADER = struct.Struct(">qiibIhiqqqhii")
MARKER_SIZE = HEADER_SIZE + _RECORD.size  # 78
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class Marker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp: int, base_offset: int = 0, leader_epoch: int = 0) -> bytearray:
    """The 78 bytes of one COMMIT or ABORT marker batch, CRC included."""
    buf = bytearray(MARKER_SIZE)
    _HEADER.pack_into(buf, 0, base_offset, MARKER_SIZE - LOG_OVERHEAD, leader_epoch, 2, 0,
                      MARKER_ATTRIBUTES, 0, timestamp, timestamp, producer_id, producer_epoch,
                      NO_SEQUENCE, 1)
    # zig-zag varints: 16 -> 0x20, 4 -> 0x08, 6 -> 0x0c
    _RECORD.pack_into(buf, HEADER_SIZE, 0x20, 0, 0, 0, 0x08, 0, COMMIT if commit else ABORT,
                      0x0C, 0, coordinator_epoch, 0)
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, MARKER_SIZE))
    return buf


def parse_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> Marker | None:
    """The marker a control batch carries, or None for another control type (or a compressed
    or malformed one, which no writer produces). Reads the first record only, as Kafka does."""
    if header.compression != 0 or header.records_count < 1:
        return None
    try:
        pos = HEADER_SIZE
        _length, pos = read_varint(batch, pos)
        pos += 1  # attributes
        _ts, pos = read_varint(batch, pos)
        _off, pos = read_varint(batch, pos)
        key_len, pos = read_varint(batch, pos)
        if key_len < 4 or pos + key_len > len(batch):
            return None
        version, kind = _KEY.unpack_from(batch, pos)
        pos += key_len
        if version < 0 or kind not in (ABORT, COMMIT):
            return None
        value_len, pos = read_varint(batch, pos)
        if value_len < 6 or pos + value_len > len(batch):
            return None
        _vversion, coordinator_epoch = _VALUE.unpack_from(batch, pos)
    except (KafkaError, struct.error):
        return None
    return Marker(kind == COMMIT, coordinator_epoch)
