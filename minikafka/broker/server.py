"""The broker: storage, the asyncio listener, background duties and a clean shutdown.

``async with Broker(config) as broker:`` starts a broker on the running loop (port 0 picks a
free port; ``broker.bootstrap`` says where it listens). :mod:`minikafka.broker.embedded` runs one
on a thread of its own for synchronous code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minikafka import __version__
from minikafka.broker.connection import Connection
from minikafka.broker.context import BrokerServices
from minikafka.broker.dispatch import ApiSpec, build_api_table
from minikafka.broker.fetch_waiters import FetchWaiters
from minikafka.broker.flusher import Flusher
from minikafka.broker.group_configs import GroupConfigFile, GroupConfigs
from minikafka.broker.groups import GroupCoordinator  # consumer groups
from minikafka.broker.groups.offset_store import OffsetStore
from minikafka.broker.groups.records import OFFSETS_TOPIC
from minikafka.broker.interceptor import RequestInterceptor
from minikafka.broker.internal_log import INTERNAL_TOPIC_PARTITIONS
from minikafka.broker.limits import ConnectionQuotas, close_idle_connections, peer_ip
from minikafka.broker.listeners import Listener, ListenerSet
from minikafka.broker.metrics import Metrics
from minikafka.broker.transactions import TransactionCoordinator
from minikafka.broker.transactions.markers import LocalMarkers
from minikafka.broker.transactions.records import TRANSACTION_STATE_TOPIC
from minikafka.broker.transactions.state_log import TxnStateLog
from minikafka.clock import wall_clock_ms
from minikafka.config import BrokerConfig
from minikafka.protocol.apis import ApiKey
from minikafka.protocol.framing import FrameReader
from minikafka.protocol.kafka_versions import release
from minikafka.startup_errors import BindError, DataDirError, KeyMaterialError
from minikafka.storage.cleaner import LogCleaner
from minikafka.storage.log import PartitionLog
from minikafka.storage.log_manager import LogManager
from minikafka.storage.producer_ids import ProducerIdAllocator

if TYPE_CHECKING:
    from minikafka.broker.cluster.cluster import ClusterLink
    from minikafka.broker.cluster.high_watermark_checkpoints import HighWatermarkCheckpoints
    from minikafka.broker.cluster.markers import PeerMarkers
    from minikafka.broker.cluster.replica_manager import ReplicaManager
    from minikafka.broker.sasl import UserStore
    from minikafka.storage.cleaner import CleanResult

log = logging.getLogger(__name__)
#: How often logs are asked whether their flush policy (roll, flush.ms) wants an fsync.
FLUSH_CHECK_SECONDS = 1.0


class Broker:
    def __init__(self, config: BrokerConfig | None = None, *, cluster: ClusterLink | None = None,
                 **kwargs: Any) -> None:
        self.config = config if config is not None else BrokerConfig(**kwargs)
        #: set for a broker of a cluster (minikafka.broker.cluster): its controller and peers
        self.cluster = cluster
        self.replicas: ReplicaManager | None = None  # a cluster broker's replicas: created in start()
        self.high_watermarks: HighWatermarkCheckpoints | None = None  # their replication-offset-checkpoint
        self.node_id = self.config.node_id
        self.metrics = Metrics()
        self.kafka_release = release(str(self.config.get("minikafka.kafka.version")))  # checked by the config
        self.api_table: dict[int, ApiSpec] = build_api_table(self.kafka_release)
        self.logs: LogManager | None = None
        self.cleaner: LogCleaner | None = None  # created in start() when log.cleaner.enable
        self._cleaning = asyncio.Lock()  # one cleaning at a time: the background duty's or clean_logs()'s
        self.producer_ids: ProducerIdAllocator | None = None
        self.fetch_waiters = FetchWaiters()
        self.flusher = Flusher()
        self.clock = wall_clock_ms
        self.listeners: ListenerSet | None = None  # [listeners] bound in start()
        self.sasl_users: UserStore | None = None  # [listeners] when a listener uses SASL
        self.quotas = ConnectionQuotas(self.config)  # [limits] max.connections, max.connections.per.ip
        self._connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._background: list[asyncio.Task[Any]] = []
        self.port: int = self.config.port
        self.started = False
        self.interceptor: RequestInterceptor | None = None  # sees every request when set (the test kit's faults)
        self.groups: GroupCoordinator | None = None  # consumer groups: created in start()
        self.group_configs: GroupConfigs | None = None  # their dynamic configs: created in start()
        self.transactions: TransactionCoordinator | None = None  # transactional ids: created in start()
        self.markers: LocalMarkers | None = None  # writes WriteTxnMarkers' markers here: created in start()
        self.peer_markers: PeerMarkers | None = None  # a cluster coordinator's markers to the leaders
        #: what every request is handled with; built by start() (connections are served only after it)
        self.services: BrokerServices

    # ----------------------------------------------------------------- addresses
    @property
    def host(self) -> str:
        return self.config.host

    def listener(self) -> Listener | None:
        """The first listener; None before start. A request knows its own (``RequestContext``)."""
        return self.listeners.primary if self.listeners is not None else None

    def advertised_address(self, listener: Listener | None = None) -> tuple[str, int]:
        """Host and port clients are told to use: ``listener``'s endpoint (the one a request came
        in on), else the first listener's, else the configured address."""
        if listener is None:
            listener = self.listener()
        if listener is not None:
            return listener.endpoint_host, listener.endpoint_port
        host = self.config.advertised_host or self.config.host
        return ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host), self.config.advertised_port or self.port

    @property
    def advertised_host(self) -> str:
        return self.advertised_address()[0]

    @property
    def advertised_port(self) -> int:
        return self.advertised_address()[1]

    @property
    def bootstrap(self) -> str:
        return f"{self.advertised_host}:{self.advertised_port}"

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir)

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start, or raise a :class:`~minikafka.startup_errors.StartupError` that says why not, with
        every listener closed again."""
        try:
            await self._start()
        except BaseException as exc:
            if self.listeners is not None:
                self.listeners.close()
            if self.logs is not None:
                self.logs.unlock()
            if isinstance(exc, OSError) and not isinstance(exc, BindError):
                where = f" ({exc.filename})" if exc.filename else ""
                raise DataDirError(f"data dir {self.config.data_dir}: {exc.strerror or exc}{where}") from exc
            raise

    async def _start(self) -> None:
        started = time.perf_counter()
        # Everything that can refuse a start comes before the first write to the data dir: the
        # settings (TLS key store, SASL users), the data dir itself, then the bind of every listener
        # (connections wait in the listen backlog until the logs are loaded).
        self.listeners = ListenerSet(self.config)
        if self.listeners.needs_sasl:
            from minikafka.broker.sasl import UserStore

            try:
                self.sasl_users = UserStore.from_config(self.config)
            except (OSError, ValueError) as exc:
                raise KeyMaterialError(f"SASL users (minikafka.sasl.users, minikafka.sasl.users.file): {exc}") from exc
        self.logs = LogManager(self.config.data_dir, self.config, now_ms=lambda: self.clock(),
                               on_log_opened=self._wire_log)
        self.logs.check_usable()
        # each group's dynamic configs: a single broker's in its data dir, a cluster's at the controller
        group_store = GroupConfigFile(self.data_dir) if self.cluster is None else self.cluster
        await self.listeners.open(self._on_connect)
        self.logs.load()
        if self.cluster is not None:
            self.replicas = self._replica_manager(self.cluster, self.logs)
            self.high_watermarks = self._high_watermarks(self.cluster, self.logs)
        # a cluster's brokers share one allocator: two producers never get the same id
        self.producer_ids = ProducerIdAllocator(self.data_dir) if self.cluster is None else self.cluster.producer_ids
        # --- consumer groups: coordinator and committed offsets (loads __consumer_offsets) ---
        # In a cluster the coordinators start empty: each partition of their internal topic is loaded
        # when this broker is elected its leader (_leadership_changed), their writes wait for the ISR.
        link = self.cluster
        offset_stores = OffsetStore.factory(self.logs, self.config, "offsets.topic.segment.bytes", self.clock,
                                            self.flusher, self.replicas)
        topics = self.logs.topics if link is None else (lambda: link.controller.topics)
        offsets_count = INTERNAL_TOPIC_PARTITIONS if link is None else link.internal_partitions(OFFSETS_TOPIC)
        release_offers = self.kafka_release is None or self.kafka_release.consumer_protocol  # not 3.9
        self.group_configs = GroupConfigs(self.config, group_store, offered=release_offers)
        self.groups = GroupCoordinator(self.config, offset_stores, lambda: self.clock(), offsets_count, topics,
                                       self.group_configs)
        await self.groups.start(load_all=link is None)
        # --- transactions: coordinator state (loads __transaction_state, finishes Prepare* ones); its
        # markers on __consumer_offsets decide the transactional offsets of the group coordinator ---
        txn_state_logs = TxnStateLog.factory(self.logs, self.config, "transaction.state.log.segment.bytes",
                                             self.clock, self.flusher, self.replicas)
        # markers land in this broker's logs through self.markers: a single broker's coordinator writes
        # them there itself, a cluster's sends WriteTxnMarkers to each partition's leader
        self.markers = LocalMarkers(self.logs, self.clock, self.groups.offsets.complete_transaction,
                                    self.flusher.flush if self.config.fsync else None, self.replicas,
                                    None if self.replicas is None else self.replicas.not_here)
        self.peer_markers = None if link is None else self._peer_markers(link)
        txn_count = INTERNAL_TOPIC_PARTITIONS if link is None else link.internal_partitions(TRANSACTION_STATE_TOPIC)
        self.transactions = TransactionCoordinator(
            self.config, txn_state_logs, self.markers if self.peer_markers is None else self.peer_markers,
            lambda: self.clock(), self.producer_ids, partitions=txn_count, offsets_partitions=offsets_count)
        await self.transactions.start(load_all=link is None)
        self.services = BrokerServices(
            config=self.config, node_id=self.node_id, storage=self.logs, groups=self.groups,
            group_configs=self.group_configs, transactions=self.transactions, markers=self.markers, producer_ids=self.producer_ids, clock=lambda: self.clock(),
            metrics=self.metrics, flusher=self.flusher, fetch_waiters=self.fetch_waiters, api_table=self.api_table,
            running=lambda: self.started, advertised_address=self.advertised_address(), replicas=self.replicas,
            cluster=self.cluster)
        if self.replicas is not None:
            self.replicas.start()
        self.metrics.recovery_seconds = time.perf_counter() - started
        self.listeners.start_accepting()
        self.port = self.listeners.primary.port
        self._background = [
            # [limits] connections.max.idle.ms
            asyncio.create_task(close_idle_connections(self.config, self._connections)),
            asyncio.create_task(self._every("log.retention.check.interval.ms", self._retention)),
            asyncio.create_task(
                self._every("producer.id.expiration.check.interval.ms", self._expire_producers)
            ),
            asyncio.create_task(self._every("log.flush.offset.checkpoint.interval.ms", self._checkpoint)),
            asyncio.create_task(self._flush_due_logs()),
        ]
        if self.config.get("log.cleaner.enable"):  # compaction (minikafka.storage.cleaner)
            self.cleaner = LogCleaner(self.data_dir, self.logs.all_logs, lambda: self.clock(),
                                      io_bytes_per_second=self.config.get("log.cleaner.io.max.bytes.per.second"),
                                      dedupe_buffer_bytes=self.config.get("log.cleaner.dedupe.buffer.size"))
            self._background.append(asyncio.create_task(self._clean_logs_periodically()))
        if self.high_watermarks is not None:
            self._background.append(asyncio.create_task(
                self._every("replica.high.watermark.checkpoint.interval.ms", self.high_watermarks.write)))
        self.started = True
        log.info(
            "minikafka %s node %d listening on %s:%d (advertised %s), data dir %s, cluster id %s",
            __version__,
            self.node_id,
            self.config.host,
            self.port,
            self.bootstrap,
            self.config.data_dir,
            self.logs.cluster_id,
        )
        if len(self.listeners.listeners) > 1 or self.listeners.primary.security_protocol != "PLAINTEXT":
            log.info("listeners: %s", self.listeners.describe())

    def _replica_manager(self, cluster: ClusterLink, logs: LogManager) -> ReplicaManager:
        from minikafka.broker.cluster.fetcher import Fetchers
        from minikafka.broker.cluster.replica_manager import ReplicaManager

        fetchers = Fetchers(self.node_id, logs, self.config, cluster.peer_address_of)
        return ReplicaManager(self.node_id, cluster.controller, logs, self.config, lambda: self.clock(), fetchers,
                              self.fetch_waiters.notify, on_leadership=self._leadership_changed,
                              controller_reachable=cluster.controller_reachable)

    def _peer_markers(self, link: ClusterLink) -> PeerMarkers:
        from minikafka.broker.cluster.markers import PeerMarkers

        # a leader answers once its ISR has the markers (offsets.commit.timeout.ms at most)
        return PeerMarkers(link, int(self.config.get("offsets.commit.timeout.ms")) / 1000 + 5)

    def _leadership_changed(self, topic: str, partition: int, epoch: int | None) -> None:
        """A cluster broker started (``epoch``) or stopped (None) leading a partition: the
        coordinator of an internal topic loads or unloads it (Kafka: onElection/onResignation)."""
        if topic == OFFSETS_TOPIC and self.groups is not None:
            if epoch is None:
                self.groups.unload_partition(partition)
            else:
                self.groups.on_election(partition)
        elif topic == TRANSACTION_STATE_TOPIC and self.transactions is not None:
            if epoch is None:
                self.transactions.unload_partition(partition)
            else:
                self.transactions.on_election(partition, epoch)

    def _high_watermarks(self, cluster: ClusterLink, logs: LogManager) -> HighWatermarkCheckpoints:
        """The replicas' high watermarks as checkpointed, restored before they are taken up."""
        from minikafka.broker.cluster.high_watermark_checkpoints import HighWatermarkCheckpoints

        checkpoints = HighWatermarkCheckpoints(logs, cluster.controller)
        checkpoints.restore()
        return checkpoints

    def _wire_log(self, partition_log: PartitionLog) -> None:
        """Every partition log the LogManager opens wakes waiting fetches on append and counts the
        producer snapshots it writes in the metrics."""
        partition_log.on_append = self.fetch_waiters.notify if self.cluster is None else self._appended
        partition_log.on_snapshot = self.metrics.snapshot_written

    def _appended(self, partition_log: PartitionLog) -> None:
        """A cluster broker's log grew: waiting fetches wake (followers among them), and a leader
        whose ISR is itself alone moves its high watermark at once."""
        self.fetch_waiters.notify(partition_log)
        if self.replicas is not None:
            self.replicas.appended(partition_log.topic, partition_log.partition)

    async def stop(self, clean: bool = True) -> None:
        """Stop accepting, let in-flight requests finish, then close the logs.

        ``clean=False`` simulates a crash: sockets are dropped and nothing is flushed,
        snapshotted or marked clean.
        """
        if not self.started:
            return
        self.started = False
        if self.listeners is not None:
            self.listeners.close()  # [listeners] every listener stops accepting
        if self.cleaner is not None:
            self.cleaner.cancelled.set()  # a cleaning in its worker thread stops at the next batch
        for task in self._background:
            task.cancel()
        # --- consumer groups: parked JoinGroup/SyncGroup answer NOT_COORDINATOR, timers stop ---
        if self.groups is not None:
            self.groups.close()
        if self.transactions is not None:
            self.transactions.close()
        if self.peer_markers is not None:
            await self.peer_markers.close()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if clean:
            # The requests in flight now may finish (up to 5 s); parked long polls answer at once
            # (running() is false now). Requests read after this point do not count: followers of
            # this broker's partitions fetch again as soon as they are answered, and waiting for a
            # moment with none in flight made every clean stop of a cluster broker last the 5 s.
            began = time.monotonic()
            self.fetch_waiters.notify_all()
            deadline = began + 5
            while (any(c.in_request and c.request_started <= began for c in self._connections)
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.005)
        if self.replicas is not None:  # acks=all writes still waiting end now, fetchers stop
            await self.replicas.stop()
        if clean and self.high_watermarks is not None:  # after the fetchers stopped: the last word
            self.high_watermarks.write_at_stop()
        for conn in list(self._connections):
            conn.close()
        self.fetch_waiters.notify_all()
        if self._tasks:
            # Closed transports end each connection loop at its next read.
            _done, pending = await asyncio.wait(list(self._tasks), timeout=5)
            for task in pending:
                task.cancel()
        if self.listeners is not None:
            await self.listeners.wait_closed()
        if self.logs is not None:
            if clean:
                await self.flusher.drain()
                self.logs.shutdown()
            else:
                self.logs.abandon()
        log.info("minikafka node %d stopped (%s)", self.node_id, "clean" if clean else "crash")

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _on_connect(self, reader: FrameReader, transport: asyncio.Transport,
                          listener: Listener | None = None) -> None:
        if not self.started:
            transport.close()
            return
        # [limits] max.connections / max.connections.per.ip: refuse with a log line, as Kafka does
        ip = peer_ip(transport)
        refused = self.quotas.admit(ip)
        if refused is not None:
            log.warning("Rejected connection from %s: %s", ip, refused)
            transport.close()
            return
        conn = Connection(self, reader, transport, listener)
        self._connections.add(conn)
        self.metrics.connections_active += 1
        self.metrics.connections_total += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.run()
        except asyncio.CancelledError:
            # [stop hook] stop() cancels connection tasks; ending quietly keeps asyncio's stream
            # callback (Python 3.11) from logging the cancellation as an error for every open connection
            pass
        finally:
            self._connections.discard(conn)
            self.quotas.release(ip)
            self.metrics.connections_active -= 1
            if task is not None:
                self._tasks.discard(task)

    # ----------------------------------------------------------------- requests
    def request_is_flexible(self, api_key: int, api_version: int) -> bool:
        spec = self.api_table.get(api_key)
        if spec is None:
            return False
        if api_key == ApiKey.API_VERSIONS:  # v3+ is flexible even above the supported range
            return api_version >= 3
        return spec.flexible(api_version) if spec.supports(api_version) else False

    def unsupported_api_versions_body(self) -> bytes:
        from minikafka.broker.handlers.api_versions import unsupported_version_body

        return unsupported_version_body(self.api_table)

    # ----------------------------------------------------------------- background
    async def _every(self, setting: str, action: Any) -> None:
        while True:
            await asyncio.sleep(max(self.config.get(setting), 10) / 1000)
            try:
                action()
            except Exception:
                log.exception("background task %s failed", action.__name__)

    def _retention(self) -> None:
        assert self.logs is not None
        now = self.clock()
        for partition_log in self.logs.all_logs():
            deleted = partition_log.apply_retention(now)
            if deleted:
                log.info("retention deleted %d segment(s) of %s-%d", deleted, partition_log.topic,
                         partition_log.partition)

    def _expire_producers(self) -> None:
        assert self.logs is not None
        now = self.clock()
        for partition_log in self.logs.all_logs():
            partition_log.expire_producers(now)

    def _checkpoint(self) -> None:
        assert self.logs is not None
        self.logs.checkpoint()

    async def _clean_logs_periodically(self) -> None:
        """Every log.cleaner.backoff.ms, clean the dirtiest compacted logs until none qualifies."""
        while True:
            await asyncio.sleep(max(self.config.get("log.cleaner.backoff.ms"), 10) / 1000)
            try:
                await self.clean_logs()
            except Exception:
                log.exception("the log cleaner failed")

    async def clean_logs(self) -> list[tuple[PartitionLog, CleanResult]]:
        """Clean the compacted logs, the dirtiest first, until none qualifies (by its topic's
        min.cleanable.dirty.ratio, min/max.compaction.lag.ms); returns each cleaning with its log.
        Empty when log.cleaner.enable is off. The background duty runs this, and a test can too."""
        cleaned: list[tuple[PartitionLog, CleanResult]] = []
        async with self._cleaning:
            while self.started and self.cleaner is not None:
                found = self.cleaner.dirtiest()
                if found is None:
                    break
                # clean_once_async cleans that same log: nothing runs on the loop before it looks
                result = await self.cleaner.clean_once_async()
                if result is None:  # it failed, or the log changed under it (deleted, say)
                    break
                cleaned.append((found[0], result))
        return cleaned

    async def _flush_due_logs(self) -> None:
        """fsync, off the event loop, the logs whose policy asks for it (a rolled segment, flush.ms)."""
        while True:
            await asyncio.sleep(FLUSH_CHECK_SECONDS)
            assert self.logs is not None
            for partition_log in self.logs.logs_due_for_flush(self.clock()):
                try:
                    await self.flusher.flush(partition_log)
                except Exception:
                    log.exception("flush of %s-%d failed", partition_log.topic, partition_log.partition)
