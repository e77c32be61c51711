"""Committed offsets and group metadata, kept durably in the internal log ``__consumer_offsets``.

Why a log, as in Kafka: every change (a commit, a new generation, a deletion) is one record
batch appended to the group's partition of ``__consumer_offsets`` with Kafka's key/value schemas
(:mod:`minikafka.broker.groups.records`), and the state of a partition is rebuilt when the
coordinator loads it, by replaying the partition from its start offset: the last record of a key wins and a null value deletes it. Because each
change is a single batch, it is atomic: the partition log's crash recovery truncates a torn
batch, so a restart sees either the whole commit or none of it, never half of one. With
``--fsync`` the store awaits the fsync before a change is acknowledged, as produce does.

A plain file rewritten on each commit would be simpler but is not as safe (a rewrite of all
groups per commit, or a second journal to get atomicity), and it would not let Kafka's tools
read the offsets topic.

Compaction: the log cleaner (:mod:`minikafka.storage.cleaner`) cleans the offsets log, and the
store also compacts its own log the way every internal log does (:mod:`minikafka.broker.internal_log`),
so replay stays short without the cleaner; never while transactional offsets are pending: they live only in their transactional batch until its marker decides them.

Transactional offsets (TxnOffsetCommit): appended as one transactional batch with the producer's
id and epoch, held pending per producer id and materialised into the committed offsets only when
the COMMIT marker of that producer lands on the offsets partition (dropped on ABORT). A normal
commit of the same partition appended after the transactional one wins over it. Replaying the
log at start-up follows the same rules, so pending offsets without a marker stay pending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from minikafka.broker.groups.consumer_records import ConsumerKey, ConsumerRecord, parse_consumer_value
from minikafka.broker.groups.records import (
    OFFSETS_TOPIC,
    CommittedOffset,
    GroupKey,
    OffsetKey,
    StoredGroup,
    group_key,
    group_value,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
)
from minikafka.broker.internal_log import (
    NO_WAITS,
    InternalLog,
    Record,
    WriteWaits,
    build_batch,
    replay,
    rewrite_live,
    should_compact,
)
from minikafka.broker.internal_records import RecordFormatError
from minikafka.errors import KafkaError
from minikafka.storage.disk_format import TopicPartition
from minikafka.storage.facade import Storage

log = logging.getLogger(__name__)

#: Compact only logs of at least this many records.
COMPACT_MIN_RECORDS = 10_000



@dataclass(slots=True)
class PendingOffset:
    """A transactional offset waiting for its transaction's marker."""

    committed: CommittedOffset
    log_offset: int  # where its transactional batch is in the offsets log
    superseded: bool = False  # a normal commit of the partition was appended after it


class OffsetStore(InternalLog):
    """The committed offsets and the last stored metadata of the groups of one partition."""

    topic: ClassVar[str] = OFFSETS_TOPIC

    def __init__(self, logs: Storage, partition: int, now_ms: Callable[[], int], topic_configs: dict[str, str],
                 waits: WriteWaits = NO_WAITS) -> None:
        super().__init__(logs, partition, now_ms, topic_configs, waits)
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._group_values: dict[str, bytes] = {}
        #: the live records of KIP-848 consumer groups: key -> value bytes
        self._consumer_values: dict[ConsumerKey, bytes] = {}
        #: producer id -> group -> partition -> pending transactional offset
        self._pending: dict[int, dict[str, dict[TopicPartition, PendingOffset]]] = {}

    # ------------------------------------------------------------------ loading

    def load(self) -> dict[str, StoredGroup]:
        """Open (creating if needed) the partition and replay it; the stored groups by id.

        Raises ``KafkaError(COORDINATOR_NOT_AVAILABLE)`` when the partition cannot be opened."""
        plog = self._open()
        groups: dict[str, StoredGroup] = {}
        count = 0
        for batch in replay(plog):
            header = batch.header
            if batch.commit is not None:
                self.complete_transaction(header.producer_id, batch.commit)
                continue
            if batch.records is None:
                if not header.is_control:
                    self.skipped_records += max(header.records_count, 0)
                continue
            for offset, key, value in batch.records:
                count += 1
                if key is None:
                    self.skipped_records += 1
                elif header.is_transactional:
                    self._apply_pending(header.producer_id, key, value, offset)
                else:
                    self._apply(key, value, groups)
        log.info("loaded %d offset(s) of %d group(s) and %d group record(s) from %d record(s) of %s%s",
                 sum(len(v) for v in self._offsets.values()), len(self._offsets), len(groups), count,
                 plog.name, f" ({self.skipped_records} unreadable record(s) skipped)"
                 if self.skipped_records else "")
        self._maybe_compact()
        return groups

    def _apply(self, key_bytes: bytes, value: bytes | None, groups: dict[str, StoredGroup] | None = None) -> None:
        try:
            key = parse_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if value is None:
                    self._drop_offset(key.group, tp)
                else:
                    self._offsets.setdefault(key.group, {})[tp] = parse_offset_value(value)
                self._supersede_pending(key.group, tp)
            elif isinstance(key, ConsumerKey):
                if value is None:
                    self._consumer_values.pop(key, None)
                else:
                    parse_consumer_value(key.type, value)  # refuse what cannot be replayed
                    self._consumer_values[key] = value
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

    def consumer_records(self) -> list[ConsumerRecord]:
        """The live records of the KIP-848 consumer groups of this partition (last value of each key)."""
        out = []
        for key, value in self._consumer_values.items():
            parsed = parse_consumer_value(key.type, value)
            if parsed is not None:
                out.append(ConsumerRecord(key, parsed))
        return out

    @property
    def live_keys(self) -> int:
        return sum(len(v) for v in self._offsets.values()) + len(self._group_values) + len(self._consumer_values)

    # ------------------------------------------------------------------ changes

    def _append(self, records: list[Record]) -> None:
        """Append ``records`` as one batch, then apply them; KafkaError if the append fails."""
        if not records:
            return
        plog = self._writable("offsets log")
        plog.append_from_client(build_batch(records, self._now_ms()))
        for key, value in records:
            self._apply(key, value)
        self._maybe_compact()

    def commit(self, group: str, offsets: dict[TopicPartition, CommittedOffset]) -> None:
        self._append([(offset_key(group, t, p), offset_value(c)) for (t, p), c in offsets.items()])

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> int:
        """Tombstone the committed offsets of ``partitions`` that exist; how many there were."""
        current = self.offsets(group)
        doomed = [tp for tp in dict.fromkeys(partitions) if tp in current]
        self._append([(offset_key(group, t, p), None) for t, p in doomed])
        return len(doomed)

    def append_consumer(self, records: list[ConsumerRecord], before: list[Record] | None = None) -> None:
        """Append a consumer group's records as one batch, after ``before`` (the tombstones of a
        classic group it replaces, or of the offsets of a group being deleted); KafkaError if the
        append fails."""
        self._append([*(before or ()), *(r.encode() for r in records)])

    def offset_tombstones(self, group: str) -> list[Record]:
        """A tombstone for every committed offset of ``group``."""
        return [(offset_key(group, t, p), None) for t, p in self.offsets(group)]

    def store_group(self, group: str, stored: StoredGroup) -> None:
        self._append([(group_key(group), group_value(stored))])

    def delete_group(self, group: str) -> int:
        """Tombstone every offset and the metadata of ``group``; how many offsets were removed."""
        records = self.offset_tombstones(group)
        offsets = list(self.offsets(group))
        if group in self._group_values:
            records.append((group_key(group), None))
        self._append(records)
        return len(offsets)

    # ------------------------------------------------------------------ transactional offsets

    def _apply_pending(self, producer_id: int, key_bytes: bytes, value: bytes | None, log_offset: int) -> None:
        try:
            key = parse_key(key_bytes)
            if not isinstance(key, OffsetKey) or value is None:
                raise RecordFormatError("a transactional batch may only hold offset commits")
            pending = PendingOffset(parse_offset_value(value), log_offset)
        except RecordFormatError as exc:
            self.skipped_records += 1
            log.warning("%s: skipping a transactional record: %s", OFFSETS_TOPIC, exc)
            return
        self._pending.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = pending

    def _supersede_pending(self, group: str, tp: TopicPartition) -> None:
        """A normal commit (or deletion) of ``tp`` was appended: older pending offsets lose to it."""
        for groups in self._pending.values():
            pending = groups.get(group, {}).get(tp)
            if pending is not None:
                pending.superseded = True

    def commit_transactional(self, group: str, producer_id: int, producer_epoch: int,
                             offsets: dict[TopicPartition, CommittedOffset]) -> None:
        """Append ``offsets`` as one transactional batch of the producer; they stay pending until
        :meth:`complete_transaction`. KafkaError if the append fails (e.g. 47 for a stale epoch)."""
        if not offsets:
            return
        plog = self._writable("offsets log")
        records = [(offset_key(group, t, p), offset_value(c)) for (t, p), c in offsets.items()]
        batch = build_batch(records, self._now_ms(), producer_id, producer_epoch, transactional=True)
        result = plog.append_as_coordinator(batch)
        for i, (key, value) in enumerate(records):
            self._apply_pending(producer_id, key, value, result.base_offset + i)

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT or ABORT marker is in the offsets log: materialise or drop its
        pending offsets (a superseded one stays as the newer commit left it)."""
        groups = self._pending.pop(producer_id, None)
        if not groups or not commit:
            return
        for group, pending in groups.items():
            for tp, entry in pending.items():
                if not entry.superseded:
                    self._offsets.setdefault(group, {})[tp] = entry.committed

    def has_pending(self, group: str, tp: TopicPartition) -> bool:
        """Whether ``tp`` of ``group`` has transactional offsets waiting for a marker."""
        return any(tp in groups.get(group, {}) for groups in self._pending.values())

    def pending_producers(self) -> list[int]:
        return list(self._pending)

    # ------------------------------------------------------------------ compaction

    def _maybe_compact(self) -> None:
        plog = self._log
        if plog is None or self._pending:
            return  # pending transactional offsets live only in their batches: keep them
        if should_compact(plog, self.live_keys, COMPACT_MIN_RECORDS):
            self.compact()

    def compact(self) -> None:
        """Copy the live state to a new segment and drop everything before it (see the module doc)."""
        if self._log is None or self._pending:
            return
        try:
            plog = self._writable("offsets log")
        except KafkaError:
            return  # no longer the leader: the next one compacts
        live: list[Record] = [
            (offset_key(group, t, p), offset_value(c))
            for group, offsets in self._offsets.items()
            for (t, p), c in offsets.items()
        ]
        live += [(group_key(group), value) for group, value in self._group_values.items()]
        live += [(key.encode(), value) for key, value in self._consumer_values.items()]
        before = rewrite_live(plog, live, self._now_ms())
        if before is not None:
            log.info("%s: compacted %d record(s) to %d", plog.name, before, len(live))
