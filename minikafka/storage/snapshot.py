"""Producer-state snapshot files: ``<20-digit offset>.snapshot`` in a partition directory.

A snapshot at offset N holds every producer entry as it stood after all batches below N. The
layout is minikafka's own (docs/producer-snapshot-format.md): like Kafka's version 1 it is a
2-byte version, a CRC-32C of the rest, an entry count and fixed-size big-endian fields, but it
keeps each producer's whole window of up to five batches and the broker-clock time of its last
append, so that deduplication works as well after a restart as before it. Kafka's version 1
files (one batch per producer) are read too, so minikafka can open a log directory Kafka wrote.

This module only encodes, decodes, names, lists and writes files. Deciding which snapshot to
load or delete is :class:`~minikafka.storage.producer_state.ProducerStateManager`'s job.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from crc32c import crc32c

from minikafka.storage.atomic_files import atomic_write
from minikafka.storage.batch import first_sequence
from minikafka.storage.disk_format import SNAPSHOT_NAME, SNAPSHOT_SUFFIX, offset_file_name

if TYPE_CHECKING:
    from minikafka.storage.producer_state import ProducerStateEntry

#: minikafka's format: the ASCII bytes "M1", far from Kafka's version 1 (bytes 00 01).
MINIKAFKA_VERSION = 0x4D31
#: Kafka's ``ProducerSnapshot`` version 1, the only version Kafka has written (read-only here).
KAFKA_VERSION_1 = 1

SUFFIX = SNAPSHOT_SUFFIX
TEMP_SUFFIX = ".snapshot.tmp"
DELETED_SUFFIX = ".snapshot.deleted"
_NAME = SNAPSHOT_NAME

# version int16, crc uint32 (over bytes 6..end), entry count int32
_HEADER = struct.Struct(">hIi")
HEADER_SIZE = _HEADER.size  # 10
CRC_START = 6
# minikafka entry: producer_id, epoch, coordinator_epoch, current_txn_first_offset,
# last_timestamp, last_append_ms, batch_count (uint8)
_ENTRY = struct.Struct(">qhiqqqB")
ENTRY_SIZE = _ENTRY.size  # 39
# minikafka batch: first_seq, last_seq, last_offset, offset_delta (last - first offset), timestamp
_BATCH = struct.Struct(">iiqiq")
BATCH_SIZE = _BATCH.size  # 28
# Kafka v1 entry: producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp,
# coordinator_epoch, current_txn_first_offset
_KAFKA_ENTRY = struct.Struct(">qhiqiqiq")
KAFKA_ENTRY_SIZE = _KAFKA_ENTRY.size  # 46
_CRC = struct.Struct(">I")


class CorruptSnapshotError(ValueError):
    """The bytes are not a complete, checksummed snapshot in a version minikafka reads."""


class SnapshotBatch(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class SnapshotEntry(NamedTuple):
    """One producer as read from a file (any version), before it becomes a live entry."""

    producer_id: int
    epoch: int
    coordinator_epoch: int
    current_txn_first_offset: int
    last_timestamp: int
    last_append_ms: int
    batches: list[Any]  # made by decode_snapshot's ``make_batch``, oldest first


# -- names and files -----------------------------------------------------------------------------


def snapshot_file_name(offset: int) -> str:
    return offset_file_name(offset, SUFFIX)


def snapshot_path(partition_dir: Path, offset: int) -> Path:
    return partition_dir / snapshot_file_name(offset)


def parse_snapshot_offset(name: str) -> int | None:
    """The offset in a snapshot file name, or None if ``name`` is not one."""
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


def list_snapshot_offsets(partition_dir: Path) -> list[int]:
    """Offsets of the ``.snapshot`` files in the directory, ascending."""
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return []
    offsets = []
    for name in names:
        offset = parse_snapshot_offset(name)
        if offset is not None:
            offsets.append(offset)
    offsets.sort()
    return offsets


def remove_leftover_files(partition_dir: Path) -> list[str]:
    """Delete half-written temp snapshots and ``.snapshot.deleted`` files; return their names."""
    removed: list[str] = []
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return removed
    for name in names:
        if name.endswith(TEMP_SUFFIX) or name.endswith(DELETED_SUFFIX):
            try:
                os.unlink(partition_dir / name)
                removed.append(name)
            except FileNotFoundError:
                pass
    return removed


def write_snapshot_file(path: Path, data: bytes | bytearray, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically: temp file, fsync, rename, fsync of the directory.

    A reader therefore sees either no file or the whole file under the final name. Without
    ``fsync`` a crash can still leave an empty or short file, which the loader rejects.
    """
    atomic_write(path, data, durable=fsync, temp=path.with_name(path.name[: -len(SUFFIX)] + TEMP_SUFFIX))


# -- encoding ------------------------------------------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytearray:
    """minikafka's format for these entries, built in one buffer."""
    entries = list(entries)
    size = HEADER_SIZE + ENTRY_SIZE * len(entries)
    for entry in entries:
        size += BATCH_SIZE * len(entry.batches)
    buf = bytearray(size)
    pos = HEADER_SIZE
    pack_entry = _ENTRY.pack_into
    pack_batch = _BATCH.pack_into
    for entry in entries:
        batches = entry.batches
        pack_entry(
            buf,
            pos,
            entry.producer_id,
            entry.epoch,
            entry.coordinator_epoch,
            entry.current_txn_first_offset,
            entry.last_timestamp,
            entry.last_append_ms,
            len(batches),
        )
        pos += ENTRY_SIZE
        for m in batches:
            pack_batch(
                buf, pos, m.first_seq, m.last_seq, m.last_offset, m.last_offset - m.first_offset, m.timestamp
            )
            pos += BATCH_SIZE
    _HEADER.pack_into(buf, 0, MINIKAFKA_VERSION, 0, len(entries))
    _CRC.pack_into(buf, 2, crc32c(memoryview(buf)[CRC_START:]))
    return buf


# -- decoding ------------------------------------------------------------------------------------


BatchFactory = Callable[[int, int, int, int, int], Any]


def decode_snapshot(
    data: bytes | bytearray | memoryview,
    kafka_append_ms: int,
    make_batch: BatchFactory = SnapshotBatch,
) -> list[SnapshotEntry]:
    """Entries of a snapshot file's bytes; raise :class:`CorruptSnapshotError` on anything off.

    Rejected: fewer than 10 bytes, a version other than minikafka's or Kafka's 1, a CRC that does
    not match bytes 6..end, a negative count, entries running past the end, and bytes left over
    after the last entry. ``kafka_append_ms`` stands in for the last-append time that Kafka's
    files do not record (the caller passes the file's modification time). Each batch is built
    as ``make_batch(first_seq, last_seq, first_offset, last_offset, timestamp)``.
    """
    size = len(data)
    if size < HEADER_SIZE:
        raise CorruptSnapshotError(f"{size} bytes, shorter than the {HEADER_SIZE}-byte header")
    version, stored_crc, count = _HEADER.unpack_from(data, 0)
    if version not in (MINIKAFKA_VERSION, KAFKA_VERSION_1):
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    actual_crc = crc32c(memoryview(data)[CRC_START:])
    if actual_crc != stored_crc:
        raise CorruptSnapshotError(f"CRC mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}")
    if count < 0:
        raise CorruptSnapshotError(f"negative entry count {count}")
    if version == KAFKA_VERSION_1:
        return _decode_kafka_v1(data, count, kafka_append_ms, make_batch)
    return _decode_minikafka(data, count, make_batch)


def _decode_minikafka(
    data: bytes | bytearray | memoryview, count: int, make_batch: BatchFactory
) -> list[SnapshotEntry]:
    size = len(data)
    if HEADER_SIZE + count * ENTRY_SIZE > size:
        raise CorruptSnapshotError(f"{count} entries cannot fit in {size} bytes")
    entries = []
    pos = HEADER_SIZE
    unpack_entry = _ENTRY.unpack_from
    unpack_batch = _BATCH.unpack_from
    for _ in range(count):
        if pos + ENTRY_SIZE > size:
            raise CorruptSnapshotError(f"entry at byte {pos} runs past the end ({size} bytes)")
        pid, epoch, coordinator_epoch, txn_first, last_ts, last_append_ms, n = unpack_entry(data, pos)
        pos += ENTRY_SIZE
        if pos + n * BATCH_SIZE > size:
            raise CorruptSnapshotError(f"{n} batches at byte {pos} run past the end ({size} bytes)")
        batches = []
        for _ in range(n):
            first_seq, last_seq, last_offset, offset_delta, timestamp = unpack_batch(data, pos)
            pos += BATCH_SIZE
            batches.append(
                make_batch(first_seq, last_seq, last_offset - offset_delta, last_offset, timestamp)
            )
        entries.append(
            SnapshotEntry(pid, epoch, coordinator_epoch, txn_first, last_ts, last_append_ms, batches)
        )
    if pos != size:
        raise CorruptSnapshotError(f"{size - pos} trailing bytes after {count} entries")
    return entries


def _decode_kafka_v1(
    data: bytes | bytearray | memoryview, count: int, append_ms: int, make_batch: BatchFactory
) -> list[SnapshotEntry]:
    expected = HEADER_SIZE + count * KAFKA_ENTRY_SIZE
    if expected != len(data):
        raise CorruptSnapshotError(
            f"Kafka v1 snapshot with {count} entries must be {expected} bytes, not {len(data)}"
        )
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch, txn_first) = (
            _KAFKA_ENTRY.unpack_from(data, HEADER_SIZE + i * KAFKA_ENTRY_SIZE)
        )
        batches = []
        if last_offset >= 0:
            first_seq = first_sequence(last_seq, offset_delta) if last_seq >= 0 else last_seq
            batches.append(
                make_batch(first_seq, last_seq, last_offset - offset_delta, last_offset, timestamp)
            )
        entries.append(SnapshotEntry(pid, epoch, coordinator_epoch, txn_first, timestamp, append_ms, batches))
    return entries
