"""The transaction coordinator: transactional ids, epochs, commit and abort.

The rules and their order are Kafka's
(``core/src/main/scala/kafka/coordinator/transaction/TransactionCoordinator.scala``,
``TransactionMetadata.scala``); what differs comes from running one broker:

- a transactional id's state lives in its partition of ``__transaction_state`` (:mod:`.state_log`);
  every change is appended (and fsynced with ``--fsync``) before memory changes and before the
  client's answer. The coordinator serves the ids of the partitions it has loaded
  (:meth:`TransactionCoordinator.load_partition`, all of them at start); ids of a partition still
  loading get COORDINATOR_LOAD_IN_PROGRESS, those of a partition not served here NOT_COORDINATOR;
- transaction markers go through a :class:`~minikafka.broker.transactions.markers.MarkerWriter`:
  a single broker appends them to its own logs; a cluster's coordinator sends WriteTxnMarkers to
  each partition's leader (:mod:`minikafka.broker.cluster.markers`), retried until the current
  leader has them in its ISR. A COMMIT/ABORT on ``__consumer_offsets`` completes the transaction's
  offsets in the group coordinator of that partition;
- everything runs on the broker's event loop, so a "pending transition" only exists while a
  write waits for its fsync or while markers are being written (the Prepare* states);
- the coordinator epoch written into markers is the leader epoch of the id's partition of
  ``__transaction_state`` (always 0 on a single broker, whose log never changes leader), so a
  partition leader refuses the markers of a coordinator that lost its partition;
- only the transaction protocol of clients before KIP-890 part 2 is served (EndTxn v0-v4).

The rules, in the project's words: ``docs/semantics.md#transactions``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from minikafka.broker.coordinator_runtime import CoordinatorPartitions, CoordinatorTasks
from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.broker.internal_log import INTERNAL_TOPIC_PARTITIONS
from minikafka.broker.internal_records import RecordFormatError, append_error, partition_for
from minikafka.broker.transactions.markers import MarkerWriter, TxnMarker
from minikafka.broker.transactions.metadata import EXHAUSTED_EPOCH, STATES_BY_NAME, TxnMetadata, TxnState
from minikafka.broker.transactions.state_log import TxnStateLog
from minikafka.errors import ErrorCode, KafkaError
from minikafka.storage.disk_format import TopicPartition

if TYPE_CHECKING:
    from minikafka.config import BrokerConfig
    from minikafka.storage.producer_ids import ProducerIdAllocator

log = logging.getLogger(__name__)

S = TxnState
#: Pause before markers that failed with a retriable error are written again.
MARKER_RETRY_SECONDS = 1.0
#: Marker errors after which this transaction's marker is not retried on that partition (Kafka
#: stops: a newer producer epoch or coordinator owns the partition).
_MARKER_STOP = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


def offsets_partition(group_id: str, partitions: int = INTERNAL_TOPIC_PARTITIONS) -> TopicPartition:
    """The ``__consumer_offsets`` partition of a group (of ``partitions``: one on a single broker)."""
    return OFFSETS_TOPIC, partition_for(group_id, partitions)


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker serves (see the
    module docstring)."""

    def __init__(self, config: BrokerConfig, stores: Callable[[int], TxnStateLog], markers: MarkerWriter,
                 clock: Callable[[], float], producer_ids: ProducerIdAllocator,
                 partitions: int = INTERNAL_TOPIC_PARTITIONS, offsets_partitions: int = INTERNAL_TOPIC_PARTITIONS
                 ) -> None:
        """``stores`` makes the (not yet loaded) store of a partition of ``__transaction_state`` (of
        ``partitions``); ``markers`` writes the markers that end transactions; ``__consumer_offsets``
        has ``offsets_partitions``."""
        self._clock = clock
        self._markers = markers
        self._producer_ids = producer_ids
        self._config = config
        self._make_store = stores
        self._offsets_partitions = offsets_partitions
        self.max_timeout_ms = int(config.get("transaction.max.timeout.ms"))
        self.abort_interval_ms = int(config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
        self.expiration_ms = int(config.get("transactional.id.expiration.ms"))
        self.expiry_interval_ms = int(config.get("transaction.remove.expired.transaction.cleanup.interval.ms"))
        self.kafka_partitions = max(1, int(config.get("transaction.state.log.num.partitions")))
        #: the ids of every partition loaded here
        self.txns: dict[str, TxnMetadata] = {}
        self.active = False
        self.partitions = CoordinatorPartitions(TxnStateLog.topic, partitions)
        #: the store of each partition loaded here
        self.stores: dict[int, TxnStateLog] = {}
        #: the coordinator epoch of each partition loaded here (its leader epoch in a cluster)
        self.coordinator_epochs: dict[int, int] = {}
        self._tasks = CoordinatorTasks()
        self._timers: list[asyncio.TimerHandle] = []

    def _now(self) -> int:
        return int(self._clock())

    # ================================================================== lifecycle

    async def start(self, load_all: bool = True) -> None:
        """Load every partition of ``__transaction_state`` (one at a time, as a broker elected
        leader of them would); the coordinator is unavailable when one cannot be loaded. In a
        cluster (``load_all`` False) it starts with none: each is loaded when this broker is
        elected its leader (:meth:`on_election`)."""
        self._tasks.start()
        self.active = True
        for partition in range(self.partitions.count) if load_all else ():
            if not await self.load_partition(partition):
                log.error("the transaction coordinator is unavailable: cannot load its log")
                self.active = False
                return
        self._schedule(self.abort_interval_ms, self._abort_timed_out_task)
        self._schedule(self.expiry_interval_ms, self._expire_task)
        log.info("transaction coordinator loaded %d transactional id(s)", len(self.txns))

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became the leader of ``partition`` of ``__transaction_state`` at
        ``coordinator_epoch``: load its ids in the background (COORDINATOR_LOAD_IN_PROGRESS
        meanwhile); already served, only its coordinator epoch moves on."""
        if not self.active:
            return
        if partition in self.partitions.served():
            self.coordinator_epochs[partition] = coordinator_epoch
            return
        self._tasks.spawn(self.load_partition(partition, coordinator_epoch))

    async def load_partition(self, partition: int, coordinator_epoch: int = 0) -> bool:
        """Become the coordinator of the ids of ``partition`` (Kafka: ``onElection``): replay it;
        transactions found in Prepare* get their markers again. Until the replay is done the ids
        answer COORDINATOR_LOAD_IN_PROGRESS. False when the partition cannot be loaded (or was
        unloaded meanwhile)."""
        self.coordinator_epochs[partition] = coordinator_epoch
        loaded = await self.partitions.load(partition, lambda: self._replay(partition))
        for meta in loaded or ():
            if meta.state.is_prepare:
                log.info("transaction %r was in %s: writing its markers again", meta.transactional_id,
                         meta.state.display)
                self._start_markers(meta)
        return loaded is not None

    def _replay(self, partition: int) -> list[TxnMetadata]:
        store = self._make_store(partition)
        stored = store.load()
        self.stores[partition] = store
        loaded = [TxnMetadata.from_record(txn_id, r) for txn_id, r in stored.items()]
        self.txns.update((meta.transactional_id, meta) for meta in loaded)
        return loaded

    def unload_partition(self, partition: int) -> int:
        """Stop coordinating the ids of ``partition`` (Kafka: ``onResignation``): they answer
        NOT_COORDINATOR; markers being written for them stop. How many ids were dropped."""
        if not self.partitions.remove(partition):
            return 0
        self.stores.pop(partition, None)
        doomed = [txn_id for txn_id in self.txns if self.partitions.partition_of(txn_id) == partition]
        for txn_id in doomed:
            del self.txns[txn_id]
        log.info("unloaded %d transactional id(s) of %s-%d", len(doomed), TxnStateLog.topic, partition)
        return len(doomed)

    def _store_of(self, transactional_id: str) -> TxnStateLog:
        return self.partitions.store_of(self.stores, transactional_id)

    def _is_current(self, meta: TxnMetadata) -> bool:
        """Whether ``meta`` is still coordinated here (not closed, its partition not unloaded)."""
        return self.active and self.txns.get(meta.transactional_id) is meta

    def close(self) -> None:
        if not self.active:
            return
        self.active = False
        for timer in self._timers:
            timer.cancel()
        self._tasks.cancel_all()

    def _schedule(self, interval_ms: int, action: Any) -> None:

        def fire() -> None:
            if not self.active:
                return
            try:
                action()
            except Exception:
                log.exception("transaction coordinator task %s failed", action.__name__)
            self._schedule(interval_ms, action)

        self._timers = [t for t in self._timers if not t.cancelled()]
        self._timers.append(self._tasks.loop.call_later(max(interval_ms, 10) / 1000, fire))

    # ================================================================== writes

    async def _persist(self, meta: TxnMetadata, state: TxnState, **fields: Any) -> int:
        """Write ``meta``'s next record, then take it into memory; NONE or the write's error."""
        record = meta.record(state, now_ms=self._now(), **fields)
        meta.pending = state
        try:
            store = self._store_of(meta.transactional_id)
            store.append(meta.transactional_id, record)
            await store.sync()
        except (KafkaError, OSError, RecordFormatError) as exc:  # the last: an id too long for the key
            log.warning("transaction %r: writing %s failed: %s", meta.transactional_id, state.display, exc)
            return append_error(exc)
        finally:
            meta.pending = None
        meta.apply(record)
        return ErrorCode.NONE

    def _check_id(self, transactional_id: str | None) -> int | None:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.partitions.error_for(transactional_id)

    # ================================================================== InitProducerId

    async def init_producer_id(self, transactional_id: str | None, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> tuple[int, int, int]:
        """(error, producer id, epoch) for InitProducerId with a transactional id; PRODUCER_FENCED
        is the caller's to map for old versions."""
        fail = (-1, -1)
        if (producer_id == -1) != (producer_epoch == -1):
            return ErrorCode.INVALID_REQUEST, *fail
        if transactional_id == "" or transactional_id is None:
            return ErrorCode.INVALID_REQUEST, *fail
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, *fail
        error = self._check_id(transactional_id)
        if error is not None:
            return error, *fail
        meta = self.txns.get(transactional_id)
        new = meta is None
        if meta is None:
            meta = TxnMetadata(transactional_id, self._producer_ids.allocate(), -1, timeout_ms)
            self.txns[transactional_id] = meta
        try:
            return await self._init_transit(meta, timeout_ms, producer_id, producer_epoch)
        finally:
            if new and meta.producer_epoch == -1 and self.txns.get(transactional_id) is meta:
                del self.txns[transactional_id]  # its first record was never written

    async def _init_transit(self, meta: TxnMetadata, timeout_ms: int, pid_in: int,
                            epoch_in: int) -> tuple[int, int, int]:
        fail = (-1, -1)
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, *fail
        given = pid_in != -1
        if given and not (meta.producer_epoch == -1 or pid_in == meta.producer_id
                          or (pid_in == meta.previous_producer_id and epoch_in >= EXHAUSTED_EPOCH)):
            return ErrorCode.PRODUCER_FENCED, *fail
        if meta.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS, *fail
        if meta.state is S.ONGOING:
            error = await self._fence_and_abort(meta)
            return (error or ErrorCode.CONCURRENT_TRANSACTIONS), *fail
        epoch = meta.producer_epoch
        pid = meta.producer_id
        last_epoch = meta.last_producer_epoch
        previous = meta.previous_producer_id
        if epoch >= EXHAUSTED_EPOCH and (not given or epoch_in == epoch):
            previous, pid, new_epoch = meta.producer_id, self._producer_ids.allocate(), 0
            last_epoch = epoch if given else -1
        elif not given or epoch == -1 or epoch_in == epoch:
            new_epoch = epoch + 1
            last_epoch = epoch if given else -1
        elif epoch_in == meta.last_producer_epoch:
            new_epoch = epoch  # the previous bump was applied but its answer was lost
        else:
            return ErrorCode.PRODUCER_FENCED, *fail
        error = await self._persist(meta, S.EMPTY, producer_id=pid, epoch=new_epoch, timeout_ms=timeout_ms,
                                    partitions=set(), start_ms=-1)
        if error:
            return error, *fail
        meta.last_producer_epoch = last_epoch
        meta.previous_producer_id = previous
        log.info("transactional id %r: producer id %d epoch %d", meta.transactional_id, pid, new_epoch)
        return ErrorCode.NONE, pid, new_epoch

    async def _fence_and_abort(self, meta: TxnMetadata) -> int:
        """Abort an Ongoing transaction with epoch + 1, fencing its producer (InitProducerId on
        an open transaction, or a timeout); the markers follow after PrepareAbort is written."""
        self._fence(meta)
        return await self._abort_fenced(meta)

    @staticmethod
    def _fence(meta: TxnMetadata) -> None:
        """Raise the epoch in memory at once, before PrepareAbort is written, as Kafka does: the
        old producer's requests are PRODUCER_FENCED while that write waits for its fsync. After
        a fence whose write failed the epoch is already raised and is not raised again."""
        if not meta.fence_failed:
            log.info("transactional id %r: aborting its open transaction with epoch %d (fencing epoch %d)",
                     meta.transactional_id, meta.producer_epoch + 1, meta.producer_epoch)
            meta.producer_epoch += 1
        meta.last_producer_epoch = -1

    async def _abort_fenced(self, meta: TxnMetadata) -> int:
        error = await self._persist(meta, S.PREPARE_ABORT)
        meta.fence_failed = bool(error)
        if error:
            return error
        self._start_markers(meta)
        return ErrorCode.NONE

    # ================================================================== the checks every TC API shares

    def _producer_check(self, transactional_id: str | None, producer_id: int, producer_epoch: int
                        ) -> tuple[int, TxnMetadata | None]:
        """42 / 15 / 49 / 90 in Kafka's order; (NONE, metadata) when the caller is the current producer."""
        error = self._check_id(transactional_id)
        if error is not None:
            return error, None
        meta = self.txns.get(transactional_id or "")
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, meta

    # ================================================================== AddPartitionsToTxn / AddOffsetsToTxn

    async def add_partitions(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> int:
        """Add ``partitions`` (already checked to exist) to the transaction; one code for all."""
        error, meta = self._producer_check(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        if meta.pending is not None or meta.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        wanted = set(partitions)
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            return ErrorCode.NONE
        start = self._now() if meta.state is not S.ONGOING else meta.start_ms
        return await self._persist(meta, S.ONGOING, partitions=meta.partitions | wanted, start_ms=start)

    async def add_offsets(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                          group_id: str) -> int:
        return await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                         [offsets_partition(group_id, self._offsets_partitions)])

    # ================================================================== EndTxn

    async def end_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                              commit: bool, send_markers: bool = True) -> int:
        """Write PrepareCommit/PrepareAbort and answer; the markers and Complete* follow.

        ``send_markers=False`` stops after Prepare* (tests use it to stand for a crash between
        the two; :meth:`resume_markers` or a restart finishes the transaction)."""
        error, meta = self._producer_check(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = meta.state
        if state is S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            error = await self._persist(meta, target)
            if error:
                return error
            if meta.state is not target:
                return ErrorCode.INVALID_TXN_STATE
            if send_markers:
                self._start_markers(meta)
            return ErrorCode.NONE
        if state is S.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS
        if state is S.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
        if state is S.COMPLETE_ABORT:
            return ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE
        return ErrorCode.INVALID_TXN_STATE  # Empty

    # ================================================================== markers

    def _start_markers(self, meta: TxnMetadata) -> None:
        if meta.markers_in_flight or not self.active:
            return
        meta.markers_in_flight = True
        self._tasks.spawn(self._write_markers(meta))

    def resume_markers(self) -> int:
        """Write the markers of every transaction left in Prepare* (after ``send_markers=False``)."""
        waiting = [m for m in self.txns.values() if m.state.is_prepare and not m.markers_in_flight]
        for meta in waiting:
            self._start_markers(meta)
        return len(waiting)

    async def _write_markers(self, meta: TxnMetadata) -> None:
        """COMMIT/ABORT on every partition of the transaction, then Complete*. Retriable failures
        are retried (a marker written twice completes nothing the second time)."""
        try:
            commit = meta.state is S.PREPARE_COMMIT
            remaining = sorted(meta.partitions)
            while remaining and self._is_current(meta):
                remaining = await self._write_markers_once(meta, remaining, commit)
                if remaining:
                    await asyncio.sleep(MARKER_RETRY_SECONDS)
            if not self._is_current(meta):
                return
            target = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
            while self._is_current(meta):
                error = await self._persist(meta, target, partitions=set())
                if error != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                    break
                await asyncio.sleep(MARKER_RETRY_SECONDS)
            log.info("transaction %r of producer %d epoch %d: %s", meta.transactional_id, meta.producer_id,
                     meta.producer_epoch, meta.state.display)
        finally:
            meta.markers_in_flight = False

    def _coordinator_epoch(self, meta: TxnMetadata) -> int:
        return self.coordinator_epochs.get(self.partitions.partition_of(meta.transactional_id), 0)

    async def _write_markers_once(self, meta: TxnMetadata, partitions: list[TopicPartition],
                                  commit: bool) -> list[TopicPartition]:
        """One pass over ``partitions``; those to try again."""
        marker = TxnMarker(meta.producer_id, meta.producer_epoch, commit, self._coordinator_epoch(meta))
        errors = await self._markers.write(marker, partitions)
        retry: list[TopicPartition] = []
        for (topic, partition), error in sorted(errors.items()):
            if error == ErrorCode.NONE:
                continue
            if error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                log.warning("transaction %r: %s-%d is gone, no marker written there", meta.transactional_id,
                            topic, partition)
            elif error in _MARKER_STOP:
                log.warning("transaction %r: marker refused by %s-%d: %s", meta.transactional_id, topic,
                            partition, ErrorCode(error).name)
            else:
                log.warning("transaction %r: marker for %s-%d failed (will retry): %s", meta.transactional_id,
                            topic, partition, ErrorCode(error).name)
                retry.append((topic, partition))
        return retry

    # ================================================================== Produce / TxnOffsetCommit

    def check_transactional_write(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                  tp: TopicPartition) -> int:
        """Whether the producer may write transactional data to ``tp`` now: NONE, 49 (unknown id or
        producer), 90 (another epoch), 51 (the transaction is ending) or TRANSACTION_ABORTABLE
        (``tp`` is not in an ongoing transaction). Callers map these per API version."""
        error, meta = self._producer_check(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return error
        if meta.pending is not None or meta.state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state is not S.ONGOING or tp not in meta.partitions:
            return ErrorCode.TRANSACTION_ABORTABLE
        return ErrorCode.NONE

    # ================================================================== timeouts and expiry

    def _abort_timed_out_task(self) -> None:
        self.abort_timed_out()

    def abort_timed_out(self) -> int:
        """Fence and abort every Ongoing transaction older than its timeout; how many were started."""
        now = self._now()
        doomed = [m for m in self.txns.values()
                  if m.state is S.ONGOING and m.pending is None and m.start_ms + m.timeout_ms < now]
        for meta in doomed:
            log.info("transactional id %r: transaction open since %d timed out (%d ms)", meta.transactional_id,
                     meta.start_ms, meta.timeout_ms)
            self._fence(meta)
            meta.pending = S.PREPARE_EPOCH_FENCE  # until the task below writes PrepareAbort
            self._tasks.spawn(self._fence_after_timeout(meta))
        return len(doomed)

    async def _fence_after_timeout(self, meta: TxnMetadata) -> None:
        meta.pending = None
        if meta.state is S.ONGOING and self.txns.get(meta.transactional_id) is meta:
            await self._abort_fenced(meta)

    def _expire_task(self) -> None:
        self.expire_transactional_ids()

    def expire_transactional_ids(self) -> int:
        """Tombstone ids idle (Empty/Complete*) for ``transactional.id.expiration.ms``; how many."""
        now = self._now()
        doomed = [m for m in self.txns.values()
                  if m.state.is_idle and m.pending is None and not m.markers_in_flight
                  and m.last_update_ms <= now - self.expiration_ms]
        by_partition: dict[int, list[TxnMetadata]] = {}
        for meta in doomed:
            meta.check_transition(S.DEAD)
            by_partition.setdefault(self.partitions.partition_of(meta.transactional_id), []).append(meta)
        expired = 0
        for partition, metas in by_partition.items():
            try:
                self.stores[partition].append_many([(m.transactional_id, None) for m in metas])
            except (KafkaError, OSError) as exc:
                log.warning("expiring %d transactional id(s) failed: %s", len(metas), exc)
                continue
            for meta in metas:
                self.txns.pop(meta.transactional_id, None)
            expired += len(metas)
        if expired:
            log.info("expired %d idle transactional id(s)", expired)
        return expired

    # ================================================================== admin

    def describe(self, transactional_id: str | None) -> tuple[int, TxnMetadata | None]:
        error = self._check_id(transactional_id)
        if error is not None:
            return error, None
        meta = self.txns.get(transactional_id or "")
        if meta is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list_transactions(self, state_filters: Iterable[str], producer_id_filters: Iterable[int],
                          duration_filter_ms: int = -1) -> tuple[int, list[str], list[TxnMetadata]]:
        """(error, unknown state names, matching ids); COORDINATOR_LOAD_IN_PROGRESS while a
        partition loads, as Kafka answers."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        if self.partitions.any_loading():
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        states: set[TxnState] = set()
        unknown: list[str] = []
        for name in state_filters:
            state = STATES_BY_NAME.get(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        pids = set(producer_id_filters)
        now = self._now()
        found = [
            m for m in self.txns.values()
            if (not states or m.state in states) and (not pids or m.producer_id in pids)
            and (duration_filter_ms < 0 or now - m.start_ms > duration_filter_ms)
        ]
        if unknown and not states:
            found = []  # only unknown names were asked for: nothing can match them
        return ErrorCode.NONE, unknown, sorted(found, key=lambda m: m.transactional_id)

    def kafka_partition(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition Kafka would use for the id (display only)."""
        return partition_for(transactional_id, self.kafka_partitions)
