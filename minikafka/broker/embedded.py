"""A broker on a thread of its own, for synchronous code and tests.

::

    with BrokerThread(data_dir=tmp_path, port=0) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from typing import Any

from minikafka.broker.server import Broker
from minikafka.config import BrokerConfig


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed, else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def call_on(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any, timeout: float = 60) -> Any:
    """Run ``fn(*args)`` on ``loop`` from another thread, awaiting it if it returns a coroutine."""

    async def runner() -> Any:
        result = fn(*args)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    return asyncio.run_coroutine_threadsafe(runner(), loop).result(timeout)


class BrokerThread:
    """Runs a :class:`Broker` on its own event loop thread."""

    def __init__(
        self,
        data_dir: str = "./minikafka-data",
        port: int = 0,
        host: str = "127.0.0.1",
        config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.broker_config = BrokerConfig(host=host, port=port, data_dir=str(data_dir), settings=dict(config or {}),
                                          **kwargs)
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None, "broker not started"
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        assert self.broker is not None, "broker not started"
        return self.broker.port

    def start(self) -> BrokerThread:
        ready: Future[None] = Future()
        self._loop = new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self.broker = Broker(self.broker_config)
            try:
                self._loop.run_until_complete(self.broker.start())
            except BaseException as exc:
                ready.set_exception(exc)
                return
            ready.set_result(None)
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="minikafka-broker", daemon=True)
        self._thread.start()
        ready.result(timeout=120)
        return self

    def call(self, fn: Any, *args: Any, timeout: float = 60) -> Any:
        """Run ``fn(*args)`` on the broker's loop (awaiting it if it is a coroutine function)."""
        assert self._loop is not None
        return call_on(self._loop, fn, *args, timeout=timeout)

    def stop(self, clean: bool = True) -> None:
        if self._loop is None or self.broker is None:
            return
        # A later start() comes back on the same port, as a restarted broker would.
        self.broker_config.port = self.broker.port
        try:
            self.call(self.broker.stop, clean)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(timeout=30)
            self._loop.close()
            self._loop = None

    def restart(self, clean: bool = True) -> None:
        """Stop (cleanly, or as a crash) and start again on the same port and data dir."""
        self.stop(clean=clean)
        self.start()

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ClusterThread:
    """Runs a :class:`~minikafka.broker.cluster.cluster.Cluster` of ``brokers`` brokers on its own
    event loop thread, with the controls a failover test needs::

        with ClusterThread(brokers=3, data_dir=tmp_path) as cluster:
            producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
            cluster.crash(cluster.leader("orders", 0))
    """

    def __init__(self, brokers: int = 3, data_dir: str = "./minikafka-data", port: int = 0,
                 host: str = "127.0.0.1", config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        from minikafka.broker.cluster.cluster import Cluster

        self.cluster = Cluster(BrokerConfig(host=host, port=port, data_dir=str(data_dir),
                                            settings=dict(config or {}), **kwargs), brokers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ClusterThread:
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="minikafka-cluster", daemon=True)
        self._thread.start()
        try:
            self.call(self.cluster.start, timeout=120)
        except BaseException:
            self._close_loop()
            raise
        return self

    def call(self, fn: Any, *args: Any, timeout: float = 60) -> Any:
        """Run ``fn(*args)`` on the cluster's loop (awaiting it if it is a coroutine function)."""
        assert self._loop is not None, "cluster not started"
        return call_on(self._loop, fn, *args, timeout=timeout)

    def stop(self) -> None:
        if self._loop is None:
            return
        try:
            self.call(self.cluster.stop)
        finally:
            self._close_loop()

    def _close_loop(self) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> ClusterThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- controls
    @property
    def bootstrap(self) -> str:
        return str(self.call(lambda: self.cluster.bootstrap))

    def crash(self, node_id: int) -> None:
        """Stop broker ``node_id`` as a kill -9 would; the controller fences it at once."""
        self.call(self.cluster.crash, node_id)

    def start_broker(self, node_id: int) -> None:
        """Start broker ``node_id`` again on its port and data dir (it recovers, then follows)."""
        self.call(self.cluster.start_broker, node_id)

    def stop_broker(self, node_id: int, controlled: bool = True) -> None:
        self.call(self.cluster.stop_broker, node_id, controlled)

    def leader(self, topic: str, partition: int) -> int:
        part = self.call(self.cluster.controller.partition, topic, partition)
        return -1 if part is None else int(part.leader)

    def coordinator(self, key: str, kind: str = "group") -> int:
        """The broker that coordinates group ``key`` (``kind`` "group") or transactional id ``key``
        (``kind`` "transaction"): the leader of its internal partition, -1 while there is none."""
        from minikafka.broker.cluster.cluster import coordinator_topic

        return int(self.call(self.cluster.coordinator_of, coordinator_topic(kind), key))

    def state(self, topic: str, partition: int) -> Any:
        """The partition's record at the controller (replicas, isr, leader, epochs)."""
        return self.call(self.cluster.controller.partition, topic, partition)

    def address(self, node_id: int) -> str:
        """``host:port`` of broker ``node_id`` (where it listens, or listened before it went down)."""
        broker = self.cluster.brokers[node_id]
        return f"{broker.advertised_address()[0]}:{broker.port}"
