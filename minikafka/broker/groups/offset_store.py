"""Committed offsets and group metadata, kept durably in the internal log ``__consumer_offsets``.

Why a log, as in Kafka: every change (a commit, a new generation, a deletion) is one record
batch appended to partition 0 of ``__consumer_offsets`` with Kafka's key/value schemas
(:mod:`minikafka.broker.groups.records`), and the state is rebuilt at start by replaying the log
from its start offset: the last record of a key wins and a null value deletes it. Because each
change is a single batch, it is atomic: the partition log's crash recovery truncates a torn
batch, so a restart sees either the whole commit or none of it, never half of one. With
``--fsync`` the store awaits the fsync before a change is acknowledged, as produce does.

A plain file rewritten on each commit would be simpler but is not as safe (a rewrite of all
groups per commit, or a second journal to get atomicity), and it would not let Kafka's tools
read the offsets topic.

Compaction: minikafka has no log cleaner, so the store compacts its own log. When the log holds
more than ``COMPACT_FACTOR`` times as many records as there are live keys (and at least
``COMPACT_MIN_RECORDS``), it rolls a new segment, appends a copy of the live state there and
moves the log start offset to the first record of that copy; the older segments are deleted.
A crash at any point of this leaves a log whose replay gives the same state: before the log
start moves, the copy only repeats values that are already current.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import split_batches
from minikafka.storage.log import PartitionLog
from minikafka.storage.log_manager import LogManager

from .records import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    RecordFormatError,
    StoredGroup,
    group_key,
    group_value,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
)

log = logging.getLogger("minikafka.groups.store")

#: Compact when the log holds this many times more records than there are live keys ...
COMPACT_FACTOR = 2
#: ... and at least this many records.
COMPACT_MIN_RECORDS = 10_000
#: Batch size limit while copying the live state during compaction.
_COPY_BATCH_BYTES = 256 * 1024
_READ_BYTES = 1 << 20

TopicPartition = tuple[str, int]
Record = tuple[bytes, bytes | None]


def _build_batch(records: list[Record], timestamp: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytearray(builder.build())


class OffsetStore:
    """The committed offsets of every group and the last stored metadata of each group."""

    def __init__(self, logs: LogManager, attach: Callable[[PartitionLog], None], now_ms: Callable[[], int],
                 topic_configs: dict[str, str], flush: Callable[[PartitionLog], Any] | None = None) -> None:
        self._logs = logs
        self._attach = attach
        self._now_ms = now_ms
        self._topic_configs = topic_configs
        self._flush = flush
        self._log: PartitionLog | None = None
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._group_values: dict[str, bytes] = {}
        self.skipped_records = 0

    # ------------------------------------------------------------------ loading

    def load(self) -> dict[str, StoredGroup]:
        """Open (creating if needed) the offsets log and replay it; the stored groups by id.

        Raises ``KafkaError(COORDINATOR_NOT_AVAILABLE)`` when the log cannot be opened."""
        logs = self._logs
        if OFFSETS_TOPIC not in logs.topics():
            logs.create_topic(OFFSETS_TOPIC, 1, dict(self._topic_configs))
        else:
            current = logs.topics()[OFFSETS_TOPIC].configs
            missing = {k: v for k, v in self._topic_configs.items() if k != "segment.bytes" and current.get(k) != v}
            if missing:
                log.warning("%s: setting %s (no time or size retention on the offsets log)", OFFSETS_TOPIC, missing)
                logs.alter_topic_configs(OFFSETS_TOPIC, missing, incremental=True)
        plog = logs.get_log(OFFSETS_TOPIC, 0)
        if plog is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-0 is offline")
        self._attach(plog)
        self._log = plog
        groups: dict[str, StoredGroup] = {}
        count = 0
        for key, value in self._replay(plog):
            count += 1
            self._apply(key, value, groups)
        log.info("loaded %d offset(s) of %d group(s) and %d group record(s) from %d record(s) of %s-0%s",
                 sum(len(v) for v in self._offsets.values()), len(self._offsets), len(groups), count,
                 OFFSETS_TOPIC, f" ({self.skipped_records} unreadable record(s) skipped)"
                 if self.skipped_records else "")
        self._maybe_compact()
        return groups

    def _replay(self, plog: PartitionLog) -> Iterable[Record]:
        start = offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            try:
                data = bytes(plog.read(offset, _READ_BYTES))
            except KafkaError as exc:
                log.error("%s: replay stopped at offset %d: %s", plog.name, offset, exc)
                return
            batches = split_batches(data)
            if not batches:
                log.error("%s: replay stopped at offset %d: no batch there", plog.name, offset)
                return
            for pos, header in batches:
                offset = max(offset, header.next_offset)
                if header.is_control:
                    continue
                try:
                    records = list(DefaultRecordBatch(data[pos : pos + header.size]))
                except Exception as exc:  # a batch the codec cannot read (written by an admin client)
                    log.warning("%s: skipping unreadable batch at offset %d: %s", plog.name, header.base_offset, exc)
                    self.skipped_records += max(header.records_count, 0)
                    continue
                for rec in records:
                    if rec.offset < start:
                        continue
                    if rec.key is None:
                        self.skipped_records += 1
                        continue
                    yield bytes(rec.key), None if rec.value is None else bytes(rec.value)

    def _apply(self, key_bytes: bytes, value: bytes | None, groups: dict[str, StoredGroup] | None = None) -> None:
        try:
            key = parse_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if value is None:
                    self._drop_offset(key.group, tp)
                else:
                    self._offsets.setdefault(key.group, {})[tp] = parse_offset_value(value)
            elif isinstance(key, GroupKey):
                if value is None:
                    self._group_values.pop(key.group, None)
                    if groups is not None:
                        groups.pop(key.group, None)
                else:
                    parsed = parse_group_value(value)
                    self._group_values[key.group] = value
                    if groups is not None:
                        groups[key.group] = parsed
        except RecordFormatError as exc:
            self.skipped_records += 1
            log.warning("%s: skipping a record that is not an offsets record: %s", OFFSETS_TOPIC, exc)

    def _drop_offset(self, group: str, tp: TopicPartition) -> CommittedOffset | None:
        offsets = self._offsets.get(group)
        if offsets is None:
            return None
        removed = offsets.pop(tp, None)
        if not offsets:
            del self._offsets[group]
        return removed

    # ------------------------------------------------------------------ queries

    def offsets(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        """The committed offsets of ``group`` (do not modify)."""
        return self._offsets.get(group, {})

    def groups_with_offsets(self) -> list[str]:
        return list(self._offsets)

    @property
    def live_keys(self) -> int:
        return sum(len(v) for v in self._offsets.values()) + len(self._group_values)

    # ------------------------------------------------------------------ changes

    def _append(self, records: list[Record]) -> None:
        """Append ``records`` as one batch, then apply them; KafkaError if the append fails."""
        plog = self._log
        if plog is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the offsets log is not open")
        if not records:
            return
        plog.append_from_client(_build_batch(records, self._now_ms()))
        for key, value in records:
            self._apply(key, value)
        self._maybe_compact()

    @property
    def fsync(self) -> bool:
        """Whether changes are fsynced before they are acknowledged (``--fsync``)."""
        return self._flush is not None

    async def sync(self) -> None:
        """Wait until what was appended is on disk (only with ``--fsync``)."""
        if self._flush is not None and self._log is not None:
            await self._flush(self._log)

    def commit(self, group: str, offsets: dict[TopicPartition, CommittedOffset]) -> None:
        self._append([(offset_key(group, t, p), offset_value(c)) for (t, p), c in offsets.items()])

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> int:
        """Tombstone the committed offsets of ``partitions`` that exist; how many there were."""
        current = self.offsets(group)
        doomed = [tp for tp in dict.fromkeys(partitions) if tp in current]
        self._append([(offset_key(group, t, p), None) for t, p in doomed])
        return len(doomed)

    def store_group(self, group: str, stored: StoredGroup) -> None:
        self._append([(group_key(group), group_value(stored))])

    def delete_group(self, group: str) -> int:
        """Tombstone every offset and the metadata of ``group``; how many offsets were removed."""
        offsets = list(self.offsets(group))
        records: list[Record] = [(offset_key(group, t, p), None) for t, p in offsets]
        if group in self._group_values:
            records.append((group_key(group), None))
        self._append(records)
        return len(offsets)

    # ------------------------------------------------------------------ compaction

    def _maybe_compact(self) -> None:
        plog = self._log
        if plog is None:
            return
        total = plog.log_end_offset - plog.log_start_offset
        if total >= COMPACT_MIN_RECORDS and total > COMPACT_FACTOR * self.live_keys:
            self.compact()

    def compact(self) -> None:
        """Copy the live state to a new segment and drop everything before it (see the module doc)."""
        plog = self._log
        if plog is None:
            return
        before = plog.log_end_offset - plog.log_start_offset
        live: list[Record] = [
            (offset_key(group, t, p), offset_value(c))
            for group, offsets in self._offsets.items()
            for (t, p), c in offsets.items()
        ]
        live += [(group_key(group), value) for group, value in self._group_values.items()]
        try:
            plog.roll()
            start = plog.log_end_offset
            chunk: list[Record] = []
            size = 0
            now = self._now_ms()
            for key, value in live:
                chunk.append((key, value))
                size += len(key) + len(value or b"") + 32
                if size >= _COPY_BATCH_BYTES:
                    plog.append_from_client(_build_batch(chunk, now))
                    chunk, size = [], 0
            if chunk:
                plog.append_from_client(_build_batch(chunk, now))
            plog.delete_records(start)
        except KafkaError as exc:
            log.error("%s: compaction failed (the log stays as it was): %s", plog.name, exc)
            return
        log.info("%s: compacted %d record(s) to %d", plog.name, before, len(live))
