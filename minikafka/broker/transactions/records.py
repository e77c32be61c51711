"""The record schemas of ``__transaction_state``, byte-compatible with Kafka's.

Key (version 0): ``int16 version, string transactional_id``. Value: ``int16 version`` then

- version 0 (what minikafka writes): ``producer_id int64, producer_epoch int16,
  transaction_timeout_ms int32, transaction_status int8, transaction_partitions`` (a nullable
  array, int32 count with -1 for null, of ``{topic string, partition_ids [int32]}``; null when the
  state is Empty), ``transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms
  int64``;
- version 1 (read only): the same fields in the flexible encoding (compact strings and arrays,
  tagged fields; previous/next producer id and client transaction version are tagged).

A null value is a tombstone: the transactional id was removed. Kafka's schemas:
``transaction-coordinator/src/main/resources/common/message/TransactionLogKey.json`` and
``TransactionLogValue.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from minikafka.broker.internal_records import Reader, RecordFormatError, Writer
from minikafka.storage.disk_format import TopicPartition

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One stored transactional id (the value of its record)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: frozenset[TopicPartition] | None  # None is written for Empty
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1


def txn_key(transactional_id: str) -> bytes:
    return bytes(Writer().i16(KEY_VERSION).string(transactional_id).buf)


def txn_value(r: TxnRecord) -> bytes:
    w = Writer().i16(VALUE_VERSION).i64(r.producer_id).i16(r.producer_epoch).i32(r.timeout_ms)
    w.i8(r.state)
    if r.partitions is None:
        w.i32(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(r.partitions):
            by_topic.setdefault(topic, []).append(partition)
        w.i32(len(by_topic))
        for topic, parts in by_topic.items():
            w.string(topic).i32(len(parts))
            for p in parts:
                w.i32(p)
    w.i64(r.last_update_ms).i64(r.start_ms)
    return bytes(w.buf)


def parse_txn_key(data: bytes) -> str:
    r = Reader(data)
    version = r.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    return r.required_string()


def parse_txn_value(data: bytes) -> TxnRecord:
    r = Reader(data)  # value version 1 is flexible: varints, compact strings and arrays
    version = r.i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown transaction log value version {version}")
    pid, epoch, timeout = r.i64(), r.i16(), r.i32()
    state = r.i8()
    parts: set[TopicPartition] | None = None
    count = r.i32() if version == 0 else r.uvarint() - 1
    if count >= 0:
        parts = set()
        for _ in range(count):
            topic = r.required_string() if version == 0 else r.required_compact_string()
            n = r.i32() if version == 0 else r.uvarint() - 1
            for _ in range(max(n, 0)):
                parts.add((topic, r.i32()))
            if version == 1:
                r.tags()
    last_update, start = r.i64(), r.i64()
    previous = following = -1
    if version == 1:
        tags = r.tags()
        if 0 in tags:
            previous = Reader(tags[0]).i64()
        if 1 in tags:
            following = Reader(tags[1]).i64()
    return TxnRecord(pid, epoch, timeout, state, None if parts is None else frozenset(parts), last_update, start,
                     previous, following)
