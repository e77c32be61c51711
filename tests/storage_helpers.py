"""Helpers for the storage tests: batches built by kafka-python, logs over tmp dirs."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from minikafka.config import BrokerConfig
from minikafka.storage.log import PartitionLog
from tests.batches import batch_of_records

TS = 1_700_000_000_000


def make_batch(
    producer_id: int = -1,
    epoch: int = -1,
    base_sequence: int = -1,
    count: int = 1,
    timestamp: int = TS,
    timestamps: list[int] | None = None,
    codec: int = 0,
    value: bytes = b"value",
    key: bytes | None = b"key",
    headers: list[tuple[str, bytes]] | None = None,
) -> bytearray:
    """One v2 batch as a client sends it (baseOffset 0), built by kafka-python."""
    stamps = timestamps if timestamps is not None else [timestamp + i for i in range(count)]
    return batch_of_records([(key, value, ts, headers or []) for ts in stamps], codec, producer_id, epoch,
                            base_sequence)


def topic_config(**overrides: Any) -> dict[str, Any]:
    """Fully populated topic settings; ``segment_bytes=100`` sets ``segment.bytes``."""
    config = BrokerConfig().topic_defaults()
    for name, value in overrides.items():
        config[name.replace("_", ".")] = value
    return config


def open_log(directory: Path, config: dict[str, Any] | None = None, **kwargs: Any) -> PartitionLog:
    return PartitionLog.open("t", 0, directory, config or topic_config(), **kwargs)


def kafka_batches(data: bytes | memoryview) -> list[DefaultRecordBatch]:
    """Every batch in ``data`` as kafka-python's reader sees it."""
    records = MemoryRecords(bytes(data))
    out = []
    while records.has_next():
        out.append(records.next_batch())
    return out


def batch_positions(log_file: Path) -> list[tuple[int, int, int]]:
    """``(position, base offset, size)`` of each batch in a .log file, read with struct only."""
    data = log_file.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, base, 12 + length))
        pos += 12 + length
    return out


def segment_files(directory: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def crash(plog: PartitionLog) -> None:
    """Drop a log as a killed process would (see :meth:`PartitionLog.abandon`)."""
    plog.abandon()
