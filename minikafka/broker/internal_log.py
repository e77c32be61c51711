"""What the coordinators' internal logs share: one-partition topics the broker itself writes.

``__consumer_offsets`` (committed offsets, :mod:`minikafka.broker.groups.offset_store`) and
``__transaction_state`` (transactional ids, :mod:`minikafka.broker.transactions.state_log`) are
both key/value logs replayed when their coordinator loads a partition (at start-up, one partition
after the other), where the last record of a key wins and a null value deletes it. A store works
on one partition, through the storage facade (:mod:`minikafka.storage.facade`). Both are
``cleanup.policy=compact`` topics, which the log cleaner (:mod:`minikafka.storage.cleaner`) cleans
like any other; each also keeps its own log bounded, so that replay stays short when
``log.cleaner.enable`` is false or the cleaner lags behind: when the
log holds more than ``COMPACT_FACTOR`` times as many records as there are live keys (and at
least a minimum), it rolls a new segment, appends a copy of the live state there and moves the
log start offset to the first record of that copy; the older segments are deleted. A crash at
any point leaves a log whose replay gives the same state: before the log start moves, the copy
only repeats values that are already current.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from minikafka._kafka_codec import quiet_kafka_imports
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.batch import BatchHeader, split_batches
from minikafka.storage.control import parse_marker
from minikafka.storage.facade import PartitionStorage, Storage

with quiet_kafka_imports():  # kafka-python warns while it loads (see _kafka_codec)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

if TYPE_CHECKING:
    from minikafka.broker.flusher import Flusher
    from minikafka.config import BrokerConfig

log = logging.getLogger(__name__)

#: Compact when the log holds this many times more records than there are live keys.
COMPACT_FACTOR = 2
#: Batch size limit while copying the live state during compaction.
_COPY_BATCH_BYTES = 256 * 1024
_READ_BYTES = 1 << 20

#: Partitions of an internal topic a single broker creates (a cluster has the settings'
#: ``offsets.topic.num.partitions`` and ``transaction.state.log.num.partitions`` instead).
INTERNAL_TOPIC_PARTITIONS = 1

Record = tuple[bytes, bytes | None]


def build_batch(records: Sequence[Record], timestamp: int, producer_id: int = -1, producer_epoch: int = -1,
                transactional: bool = False) -> bytearray:
    """One uncompressed v2 batch of ``records`` (a transactional one with a producer id when asked)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 30)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytearray(builder.build())


def internal_topic_configs(segment_bytes: int) -> dict[str, str]:
    """Topic settings of an internal log: compacted (by its owner), no time or size retention."""
    return {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
            "segment.bytes": str(segment_bytes)}


def open_internal_log(logs: Storage, topic: str, partition: int, configs: dict[str, str]) -> PartitionStorage:
    """``partition`` of ``topic``, creating the topic or restoring its settings.

    Raises ``KafkaError(COORDINATOR_NOT_AVAILABLE)`` when the partition cannot be opened."""
    if topic not in logs.topics():
        logs.create_topic(topic, INTERNAL_TOPIC_PARTITIONS, dict(configs))
    else:
        current = logs.topics()[topic].configs
        missing = {k: v for k, v in configs.items() if k != "segment.bytes" and current.get(k) != v}
        if missing:
            log.warning("%s: setting %s (no time or size retention on an internal log)", topic, missing)
            logs.alter_topic_configs(topic, missing, incremental=True)
    plog = logs.get_log(topic, partition)
    if plog is None:
        raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} is offline")
    return plog


@dataclass(slots=True)
class ReplayedBatch:
    """One batch read back from an internal log: its header and, unless it is a control batch
    or unreadable, its records (``(offset, key, value)``, records below the log start left out)."""

    header: BatchHeader
    records: list[tuple[int, bytes | None, bytes | None]] | None
    commit: bool | None = None  # for a transaction marker: True for COMMIT, False for ABORT


def replay(plog: PartitionStorage) -> Iterator[ReplayedBatch]:
    """Every batch from the log start to the end; a read error ends the replay (logged)."""
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
                marker = parse_marker(data[pos : pos + header.size], header)
                yield ReplayedBatch(header, None, None if marker is None else marker.commit)
                continue
            try:
                decoded = list(DefaultRecordBatch(data[pos : pos + header.size]))
            except Exception as exc:  # a batch the codec cannot read (written by an admin client)
                log.warning("%s: skipping unreadable batch at offset %d: %s", plog.name, header.base_offset, exc)
                yield ReplayedBatch(header, None)
                continue
            yield ReplayedBatch(header, [
                (rec.offset, None if rec.key is None else bytes(rec.key),
                 None if rec.value is None else bytes(rec.value))
                for rec in decoded if rec.offset >= start
            ])


def should_compact(plog: PartitionStorage, live_keys: int, min_records: int) -> bool:
    total = plog.log_end_offset - plog.log_start_offset
    return total >= min_records and total > COMPACT_FACTOR * live_keys


def rewrite_live(plog: PartitionStorage, live: Iterable[Record], now_ms: int) -> int | None:
    """Copy ``live`` to a new segment and drop everything before it; the number of records
    before, or None when the compaction failed (the log stays as it was)."""
    before = plog.log_end_offset - plog.log_start_offset
    try:
        plog.roll()
        start = plog.log_end_offset
        chunk: list[Record] = []
        size = 0
        for key, value in live:
            chunk.append((key, value))
            size += len(key) + len(value or b"") + 32
            if size >= _COPY_BATCH_BYTES:
                plog.append_from_client(build_batch(chunk, now_ms))
                chunk, size = [], 0
        if chunk:
            plog.append_from_client(build_batch(chunk, now_ms))
        plog.delete_records(start)
    except KafkaError as exc:
        log.error("%s: compaction failed (the log stays as it was): %s", plog.name, exc)
        return None
    return before


class Replication(Protocol):
    """A cluster broker's part in its coordinators' writes: they append only to a partition this
    broker leads, and a change is acknowledged once every in-sync replica has it (Kafka's
    coordinators append with acks=all). Both raise KafkaError (NOT_LEADER_OR_FOLLOWER,
    NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT), which a coordinator answers as Kafka does
    (:func:`~minikafka.broker.internal_records.append_error`)."""

    def check_writable(self, topic: str, partition: int) -> None: ...

    async def replicated(self, topic: str, partition: int, offset: int) -> None: ...


@dataclass(frozen=True, slots=True)
class WriteWaits:
    """What a change to an internal log waits for before it is acknowledged: its fsync
    (``--fsync``), and in a cluster the in-sync replicas (``replication``)."""

    flush: Callable[[PartitionStorage], Awaitable[Any]] | None = None
    replication: Replication | None = None


#: A single broker without --fsync: a change is acknowledged once appended.
NO_WAITS = WriteWaits()


class InternalLog:
    """A store of one partition of an internal log: where the partition is, the clock, and what a
    change waits for before it is acknowledged (:class:`WriteWaits`)."""

    #: the internal topic the store's partition belongs to
    topic: ClassVar[str]

    def __init__(self, logs: Storage, partition: int, now_ms: Callable[[], int], topic_configs: dict[str, str],
                 waits: WriteWaits = NO_WAITS) -> None:
        self._logs = logs
        self.partition = partition
        self._now_ms = now_ms
        self._topic_configs = topic_configs
        self._waits = waits
        self._log: PartitionStorage | None = None
        self.skipped_records = 0

    @classmethod
    def factory(cls, logs: Storage, config: BrokerConfig, segment_setting: str, now_ms: Callable[[], int],
                flusher: Flusher, replication: Replication | None = None) -> Callable[[int], Self]:
        """What makes the store of one partition of the internal log in ``logs`` whose segment size
        is the setting ``segment_setting``; with ``--fsync`` its changes wait for ``flusher``, in a
        cluster for ``replication``."""
        waits = WriteWaits(flusher.flush if config.fsync else None, replication)
        configs = internal_topic_configs(config.get(segment_setting))
        return lambda partition: cls(logs, partition, now_ms, configs, waits)

    def _open(self) -> PartitionStorage:
        plog = open_internal_log(self._logs, self.topic, self.partition, self._topic_configs)
        self._log = plog
        return plog

    def _writable(self, what: str) -> PartitionStorage:
        """The open log, to append to; KafkaError when it is not open (COORDINATOR_NOT_AVAILABLE)
        or, in a cluster, this broker no longer leads it (NOT_LEADER_OR_FOLLOWER: a follower's
        replica must only ever hold what its leader wrote) or its ISR is below the minimum."""
        plog = self._log
        if plog is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the {what} is not open")
        if self._waits.replication is not None:
            self._waits.replication.check_writable(self.topic, self.partition)
        return plog

    @property
    def waits(self) -> bool:
        """Whether a change waits for anything before it is acknowledged (see :meth:`sync`)."""
        return self._waits.flush is not None or self._waits.replication is not None

    async def sync(self) -> None:
        """Wait until what was appended is on disk (with ``--fsync``) and, in a cluster, in every
        in-sync replica; KafkaError when it cannot be."""
        plog = self._log
        if plog is None:
            return
        if self._waits.flush is not None:
            await self._waits.flush(plog)
        if self._waits.replication is not None:
            await self._waits.replication.replicated(self.topic, self.partition, plog.log_end_offset)
