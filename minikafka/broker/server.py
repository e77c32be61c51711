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
from typing import Any

from minikafka.storage.log_manager import LogManager

from minikafka.broker.connection import Connection
from minikafka.broker.context import RequestContext
from minikafka.broker.dispatch import build_api_table
from minikafka.broker.fetch_waiters import FetchWaiters
from minikafka.broker.flusher import Flusher
from minikafka.broker.groups import GroupCoordinator  # consumer groups
from minikafka.broker.metrics import Metrics
from minikafka.broker.producer_ids import ProducerIdAllocator
from minikafka.config import BrokerConfig
from minikafka.protocol.apis import ApiSpec

log = logging.getLogger("minikafka.broker")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    def __init__(self, config: BrokerConfig | None = None, **kwargs: Any) -> None:
        self.config = config if config is not None else BrokerConfig(**kwargs)
        self.node_id = self.config.node_id
        self.metrics = Metrics()
        self.api_table: dict[int, ApiSpec] = build_api_table()
        self.logs: LogManager | None = None
        self.producer_ids: ProducerIdAllocator | None = None
        self.fetch_waiters = FetchWaiters()
        self.flusher = Flusher()
        self.clock = now_ms
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[Connection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._background: list[asyncio.Task[Any]] = []
        self.port: int = self.config.port
        self.started = False
        self.interceptor: Any = None  # fault injection hook (minikafka.broker.faults)
        self.groups: GroupCoordinator | None = None  # consumer groups: created in start()

    # ----------------------------------------------------------------- addresses
    @property
    def host(self) -> str:
        return self.config.host

    @property
    def advertised_host(self) -> str:
        host = self.config.advertised_host or self.config.host
        return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host

    @property
    def advertised_port(self) -> int:
        return self.config.advertised_port or self.port

    @property
    def bootstrap(self) -> str:
        return f"{self.advertised_host}:{self.advertised_port}"

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir)

    # ----------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        started = time.perf_counter()
        self.logs = LogManager(self.config.data_dir, self.config, now_ms=lambda: self.clock())
        self.logs.load()
        for partition_log in self.logs.all_logs():
            self.attach_log(partition_log)
        self.producer_ids = ProducerIdAllocator(self.data_dir)
        # --- consumer groups: coordinator and committed offsets (loads __consumer_offsets) ---
        self.groups = GroupCoordinator(self)
        self.groups.start()
        self.metrics.recovery_seconds = time.perf_counter() - started
        self._server = await asyncio.start_server(
            self._on_connect, self.config.host, self.config.port, reuse_address=True, limit=1 << 20
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._background = [
            asyncio.create_task(self._every("log.retention.check.interval.ms", self._retention)),
            asyncio.create_task(
                self._every("producer.id.expiration.check.interval.ms", self._expire_producers)
            ),
            asyncio.create_task(self._every("log.flush.offset.checkpoint.interval.ms", self._checkpoint)),
        ]
        self.started = True
        log.info(
            "minikafka node %d listening on %s:%d (advertised %s), data dir %s, cluster id %s",
            self.node_id,
            self.config.host,
            self.port,
            self.bootstrap,
            self.config.data_dir,
            self.logs.cluster_id,
        )

    def attach_log(self, partition_log: Any) -> None:
        partition_log.on_append = self.fetch_waiters.notify
        self.metrics.count_snapshots(partition_log.producer_state)  # [metrics hook] snapshots written

    async def stop(self, clean: bool = True) -> None:
        """Stop accepting, let in-flight requests finish, then close the logs.

        ``clean=False`` simulates a crash: sockets are dropped and nothing is flushed,
        snapshotted or marked clean.
        """
        if not self.started:
            return
        self.started = False
        if self._server is not None:
            self._server.close()
        for task in self._background:
            task.cancel()
        # --- consumer groups: parked JoinGroup/SyncGroup answer NOT_COORDINATOR, timers stop ---
        if self.groups is not None:
            self.groups.close()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if clean:
            deadline = time.monotonic() + 5
            while any(c.in_request for c in self._connections) and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
        for conn in list(self._connections):
            conn.close()
        self.fetch_waiters.notify_all()
        if self._tasks:
            # Closed transports end each connection loop at its next read.
            _done, pending = await asyncio.wait(list(self._tasks), timeout=5)
            for task in pending:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1)
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

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.started:
            writer.close()
            return
        conn = Connection(self, reader, writer)
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
            self.metrics.connections_active -= 1
            if task is not None:
                self._tasks.discard(task)

    # ----------------------------------------------------------------- requests
    def request_is_flexible(self, api_key: int, api_version: int) -> bool:
        spec = self.api_table.get(api_key)
        if spec is None:
            return False
        if api_key == 18:  # ApiVersions: v3+ is flexible even above the supported range
            return api_version >= 3
        return spec.flexible(api_version) if spec.supports(api_version) else False

    async def dispatch(self, spec: ApiSpec, ctx: RequestContext, request: Any) -> Any:
        if self.interceptor is not None:
            return await self.interceptor.dispatch(spec, ctx, request)
        return await spec.handler(ctx, request)

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
            partition_log.producer_state.expire(now)

    def _checkpoint(self) -> None:
        assert self.logs is not None
        self.logs.checkpoint()
