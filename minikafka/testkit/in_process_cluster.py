"""A cluster of brokers for failover tests, on a thread of its own::

    from minikafka.testkit import MiniKafkaCluster

    with MiniKafkaCluster(brokers=3) as kafka:          # free ports, temporary data dir
        kafka.create_topic("orders", replication_factor=3, config={"min.insync.replicas": "2"})
        leader = kafka.leader("orders", 0)
        kafka.crash(leader)                             # a kill -9; the controller fences it
        ...                                             # the code under test fails over
        kafka.start_broker(leader)
        kafka.wait_until_in_sync("orders", 0)
        kafka.slow(2, 5000)                             # broker 2's follower fetches answered 5 s late
        kafka.faults.error_before(api="Produce", broker=1, trigger="always")  # rules name brokers

The controls are :class:`~minikafka.testkit.cluster_control.ClusterControl`'s, the ones the HTTP
admin endpoint of ``minikafka serve --brokers N --admin-port P`` serves (``admin_port`` starts
it here too).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from minikafka.broker.embedded import ClusterThread
from minikafka.testkit.cluster_control import ClusterControl
from minikafka.testkit.faults import FaultRule
from minikafka.testkit.in_process import Faults, OnAThread, scratch_dir


class MiniKafkaCluster(OnAThread):
    """``brokers`` brokers (node ids 1..N) on free ports (or ``port``, ``port``+1, ...), over
    ``data_dir`` (by default a fresh temporary directory, on a RAM filesystem unless
    ``in_memory=False``, removed at :meth:`stop`). ``config`` holds broker settings under Kafka's
    names, shared by every broker; ``faults`` rule specs in force from the first request (a rule
    without ``broker`` applies on every broker); ``admin_port`` (0 = free port) starts the HTTP
    admin endpoint."""

    def __init__(self, brokers: int = 3, data_dir: str | Path | None = None, port: int = 0,
                 host: str = "127.0.0.1", config: Mapping[str, Any] | None = None, admin_port: int | None = None,
                 in_memory: bool = True, faults: Iterable[Mapping[str, Any]] | None = None,
                 **broker_kwargs: Any) -> None:
        self._own_dir = data_dir is None
        self.data_dir = scratch_dir(in_memory) if data_dir is None else Path(data_dir)
        try:  # the settings and rules are checked here: a refused one leaves no scratch dir behind
            self._thread = ClusterThread(brokers, str(self.data_dir), port, host, dict(config or {}), **broker_kwargs)
            self.control = ClusterControl(self._thread.cluster)  # its interceptors go on every broker it starts
            self.control.faults.add_all([dict(f) for f in faults or []])  # no broker runs yet: no loop needed
        except BaseException:
            self._remove_own_dir()
            raise
        self.faults = Faults(self._thread.call, lambda: self.control.faults)
        self._admin_port = admin_port

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> MiniKafkaCluster:
        try:
            self._thread.start()
            self._thread_running = True
            if self._admin_port is not None:
                from minikafka.testkit.cluster_admin_http import ClusterAdminServer

                admin = ClusterAdminServer(self.control, self._thread.cluster.config.host, self._admin_port)
                self._admin = self._thread.call(admin.start)
        except BaseException:
            self.stop()
            raise
        return self

    # ----------------------------------------------------------------- brokers
    def crash(self, node_id: int) -> None:
        """Stop broker ``node_id`` as a kill -9 would (nothing flushed); the controller fences it."""
        self._thread.call(self.control.crash, node_id)

    def start_broker(self, node_id: int) -> None:
        """Start broker ``node_id`` again on its port and data dir (it recovers, then follows)."""
        self._thread.call(self.control.start, node_id)

    def restart(self, node_id: int, clean: bool = True) -> None:
        """A controlled shutdown (or a crash with ``clean=False``) of ``node_id``, then a start."""
        self._thread.call(self.control.restart, node_id, clean)

    def shutdown(self, node_id: int) -> None:
        """A controlled shutdown: its leadership moves to other in-sync replicas, then it stops."""
        self._thread.call(self.control.shutdown, node_id)

    def isolate(self, node_id: int, from_: str = "all") -> None:
        """Cut broker ``node_id`` off from ``"clients"``, ``"brokers"``, the ``"controller"`` or
        ``"all"`` (:mod:`minikafka.testkit.isolation`) until :meth:`heal`."""
        self._thread.call(self.control.isolate, node_id, from_)

    def slow(self, node_id: int, ms: int) -> FaultRule:
        """Answer each of broker ``node_id``'s follower fetches ``ms`` late until :meth:`heal`:
        once its leaders have records it lacks, it falls out of their ISRs after
        ``replica.lag.time.max.ms`` (when ``ms`` is longer). Returns once a fetch of it is held at
        each of its leaders (a record written from then on reaches it ``ms`` late), with the rule
        that does it (``slow-<node>``, in :attr:`faults`)."""
        rule: FaultRule = self._thread.call(self.control.slow, node_id, ms)
        return rule

    def heal(self, node_id: int) -> None:
        """End broker ``node_id``'s isolation and its slowing (fetches it holds are answered now)."""
        self._thread.call(self.control.heal, node_id)

    def move_leader(self, topic: str, partition: int, node_id: int) -> dict[str, Any]:
        """Make ``node_id`` the leader; ValueError unless it is an active in-sync replica."""
        return dict(self._thread.call(self.control.move_leader, topic, partition, node_id))

    # ----------------------------------------------------------------- reading
    def describe(self) -> dict[str, Any]:
        """What ``GET /cluster`` answers: brokers, controller, and every partition's leader, epoch,
        replicas, ISR, offline replicas, high watermark and each replica's log offsets."""
        return dict(self._thread.call(self.control.describe))

    def partition(self, topic: str, partition: int = 0) -> dict[str, Any]:
        """One partition of :meth:`describe`."""
        return dict(self._thread.call(self.control.partition, topic, partition))

    def leader(self, topic: str, partition: int = 0) -> int:
        """The partition's leader (-1 while it has none)."""
        return int(self.partition(topic, partition)["leader"])

    def coordinator(self, key: str, kind: str = "group") -> int:
        """The broker that coordinates group ``key`` (``kind`` "group") or transactional id ``key``
        (``kind`` "transaction"): the leader of its internal partition, -1 while there is none."""
        return self._thread.coordinator(key, kind)

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        return list(self.partition(topic, partition)["isr"])

    def wait_until_in_sync(self, topic: str, partition: int = 0, timeout: float = 30.0) -> None:
        """Wait (at most ``timeout`` seconds) until every replica of the partition is in its ISR."""
        self._wait_for_isr(topic, partition, timeout, lambda isr, replicas: sorted(isr) == sorted(replicas))

    def wait_for_isr(self, topic: str, isr: list[int], partition: int = 0, timeout: float = 30.0) -> None:
        """Wait (at most ``timeout`` seconds) until the partition's ISR is ``isr`` (in any order):
        a slowed or cut-off follower has left it, say, once ``replica.lag.time.max.ms`` passed."""
        self._wait_for_isr(topic, partition, timeout, lambda now, _replicas: sorted(now) == sorted(isr))

    def _wait_for_isr(self, topic: str, partition: int, timeout: float,
                      reached: Callable[[list[int], list[int]], bool]) -> None:
        deadline = time.monotonic() + timeout
        while True:
            state = self.partition(topic, partition)
            if reached(state["isr"], state["replicas"]):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition}: ISR {state['isr']} of replicas {state['replicas']} "
                                   f"after {timeout} s")
            time.sleep(0.05)

    @property
    def brokers(self) -> list[int]:
        return sorted(self._thread.cluster.controller.brokers)

    @property
    def bootstrap(self) -> str:
        """Every running broker's ``host:port``, for ``bootstrap.servers``."""
        return self._thread.bootstrap

    def address(self, node_id: int) -> str:
        """``host:port`` of broker ``node_id`` (where it listens, or listened before it went down)."""
        return self._thread.address(node_id)

    # ----------------------------------------------------------------- topics
    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None,
                     config: Mapping[str, Any] | None = None) -> str:
        """Create a topic through the controller; ``partitions`` and ``replication_factor`` default
        to ``num.partitions`` and ``default.replication.factor``."""
        self._thread.call(self.control.create_topic, name, partitions, replication_factor, dict(config or {}))
        return name

    def new_topic(self, partitions: int | None = None, replication_factor: int | None = None,
                  config: Mapping[str, Any] | None = None, prefix: str = "test") -> str:
        """Create a topic with a fresh unique name."""
        return self.create_topic(f"{prefix}-{uuid.uuid4().hex[:12]}", partitions, replication_factor, config)

    def topics(self, internal: bool = False) -> dict[str, int]:
        return dict(self._thread.call(self.control.topics, internal))
